"""Benchmark: grading throughput, `grade --workers N` (sandbox on) against plain nbgrader.

Not a test: it measures. It writes one class of chapter 0 (`00_introduction`)
submissions: correct (the whole solved notebook), wrong (the chapter's
mutants), stubs, and a few hostile ones from the hostile-submission suite
(`tests/hostile/cases.py`: an endless loop, a kernel that exits, patched
comparisons, a stray error, a notebook that is not JSON). Then, in the same
run on the same machine, it times

* one plain ``nbgrader autograde`` batch over the class (nbgrader's own
  pipeline, kernels unconfined, a fresh course folder, the release made
  beforehand and not timed), and
* ``python -m autograder grade --workers N`` for each N asked for (the
  sandbox on, the whole command timed: release, grading, feedback, report),

each with the same per-cell time limit, and prints seconds per submission,
each one's throughput against plain nbgrader's, how throughput scales from 1
worker up, and the machine's load (``uptime``) before and after. Run it from
the repository root, on a machine with bubblewrap::

    python benchmarks/grading_throughput.py                 # 30 submissions, 1 and 2 workers
    python benchmarks/grading_throughput.py --students 60 --workers 1 2 4
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from itertools import cycle
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the suite's submission builders and hostile cases

from hostile.cases import CASES, CH, Paths  # noqa: E402
from mutants import mutants_for  # noqa: E402
from submissions import mutated, solved, write  # noqa: E402

from course.protocol import SECRET_ENV  # noqa: E402

HOSTILE = ["infinite-loop", "kernel-exit", "forge-allclose", "honest-stray-error", "bad-json"]
CELL_SECONDS = 30  # nbgrader's own default per-cell timeout, given to both


def write_class(submissions: Path, size: int) -> int:
    """`size` honest submissions (correct, wrong, stub in turn) plus the hostile ones; returns the count."""
    kinds = cycle(["correct", "wrong", "stub"])
    wrong = cycle(mutants_for(CH.topic))
    for i in range(size - len(HOSTILE)):
        kind = next(kinds)
        nb = {"correct": lambda: solved(CH), "wrong": lambda: mutated(CH, next(wrong)),
              "stub": lambda: nbformat.read(CH.student, as_version=4)}[kind]()
        write(nb, submissions, f"s{i:03d}-{kind}", CH)
    paths = Paths(out=submissions.parent / "unused", canary=submissions.parent / "canary", port=0)
    for case in (c for c in CASES if c.student in HOSTILE):
        case.build(submissions / f"x-{case.student}" / CH.id, paths)
    return len(list(submissions.iterdir()))


def nbgrader(root: Path, *args: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # the kernels import course.checks
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    subprocess.run([sys.executable, "-m", "nbgrader", *args, "--log-level=ERROR"], cwd=root, env=env,
                   check=False, capture_output=True)


def plain_nbgrader(submissions: Path, base: Path) -> float:
    """Seconds for one plain ``nbgrader autograde`` batch over the class (it says how many it graded)."""
    root = base / "plain"
    shutil.copytree(CH.solution.parent, root / "source" / CH.id)
    (root / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.root = {str(root)!r}\nc.Execute.timeout = {CELL_SECONDS}\n")
    nbgrader(root, "generate_assignment", CH.id)
    shutil.copytree(submissions, root / "submitted")
    start = time.monotonic()
    nbgrader(root, "autograde", CH.id)
    seconds = time.monotonic() - start
    print(f"plain nbgrader graded {len(list(root.glob(f'autograded/*/{CH.id}/{CH.id}.ipynb')))} notebooks")
    return seconds


def course_grade(submissions: Path, base: Path, workers: int) -> float:
    """Seconds for ``python -m autograder grade --workers N`` over the class, sandbox on."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submissions), "--out",
                    str(base / f"grade-{workers}"), "--workers", str(workers), "--cell-timeout", str(CELL_SECONDS)],
                          cwd=ROOT, check=True, capture_output=True, text=True)
    seconds = time.monotonic() - start
    print(f"grade --workers {workers}: {proc.stdout.splitlines()[-2]}")
    return seconds


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=30, help="submissions in the class (at least 30 asked)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="grade's worker counts to time")
    parser.add_argument("--keep", type=Path, help="grade in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="grading-throughput-"))
    base.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault(SECRET_ENV, str(base / "grading-secret"))  # never the instructor's own secret
    count = write_class(base / "submitted", args.students)
    print(f"{count} submissions of {CH.id} ({', '.join(HOSTILE)} among them), {os.cpu_count()} cores")
    print(f"load before: {load()}")
    seconds = {"plain nbgrader autograde": plain_nbgrader(base / "submitted", base)}
    for n in args.workers:
        seconds[f"grade --workers {n}"] = course_grade(base / "submitted", base, n)
    print(f"load after:  {load()}")
    plain = seconds["plain nbgrader autograde"]
    for name, s in seconds.items():
        print(f"{name:26s} {s:7.1f} s  {s / count:5.2f} s per submission  {plain / s:4.2f}x plain's throughput")
    if len(args.workers) > 1:
        first = seconds[f"grade --workers {args.workers[0]}"]
        for n in args.workers[1:]:
            print(f"scaling {args.workers[0]} -> {n} workers: {first / seconds[f'grade --workers {n}']:.2f}x")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
