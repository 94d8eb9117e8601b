"""Benchmark: BPE training, recounting every pair after each merge (exercise 1.3's `train_bpe`) against
updating only the words a merge changes (exercise 1.7's `train_bpe_fast`).

Not a test: it measures. Both learn the same number of merges from the same text, on one core, and must
give the same merges (checked); each is timed in processor seconds, the best of ``--repeats`` runs. The
default text is the first 130,000 characters of Tiny Shakespeare, about the size of CS336's speed test
(a 500-token vocabulary from about 130 KB of English in under 1.5 s); the file is for benchmarks only
and is not in the repository. ``--json`` writes the result, with the machine and its load, to
``course/runs/bpe_training_cpu.json``. Run from the repository root, after
``python -m autograder release 01_tokenizing``::

    python benchmarks/bpe_training.py
    python benchmarks/bpe_training.py --text FILE --chars 130000 --merges 500 --json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
from pathlib import Path
from typing import Callable

from course.reference.tokenizing import train_bpe, train_bpe_fast
from course.runs import HERE as RUNS
from course.train import cpu_name

ROOT = Path(__file__).resolve().parent.parent
TEXT = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"


def best_of(learn: Callable[[str, int], list], text: str, merges: int, repeats: int) -> tuple[float, list]:
    """The least processor time of `repeats` runs of learn(text, merges), and its merges."""
    times, out = [], []
    for _ in range(repeats):
        start = time.process_time()
        out = learn(text, merges)
        times.append(time.process_time() - start)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", type=Path, default=TEXT)
    parser.add_argument("--chars", type=int, default=130_000, help="the text's first CHARS characters")
    parser.add_argument("--merges", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="record it in course/runs/bpe_training_cpu.json")
    args = parser.parse_args()
    text = args.text.read_text(encoding="utf-8")[:args.chars]
    load_before = os.getloadavg()
    seconds, merges = {}, {}
    for learn in (train_bpe, train_bpe_fast):
        seconds[learn.__name__], merges[learn.__name__] = best_of(learn, text, args.merges, args.repeats)
        print(f"{learn.__name__:>14}: {len(merges[learn.__name__])} merges in {seconds[learn.__name__]:.3f} s")
    if merges["train_bpe"] != merges["train_bpe_fast"]:
        raise SystemExit("the two learned different merges")
    record = {"task": "bpe_training", "text": args.text.name, "characters": len(text),
              "bytes": len(text.encode("utf-8")), "merges": args.merges, "repeats": args.repeats,
              "processor_seconds": seconds,
              "hardware": cpu_name(), "threads": 1, "load_average_before": load_before,
              "load_average": os.getloadavg(), "date": dt.date.today().isoformat()}
    print(f"{seconds['train_bpe'] / seconds['train_bpe_fast']:.1f} times faster; {record['hardware']}, load "
          f"average {load_before[0]:.2f} before, {record['load_average'][0]:.2f} after")
    if args.json:
        (RUNS / "bpe_training_cpu.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
