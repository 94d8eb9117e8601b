"""Benchmark: chapter 10's character LM against nanoGPT's own code, side by side in one run.

Not a test: it measures. nanoGPT (Karpathy) is not downloaded: pass the path of a checkout. Each
round runs, one after the other on the same machine, nanoGPT's ``train.py`` with its README's CPU
command (4 layers x 128, block 64, batch 12, 2,000 iterations, evaluations every 250) and the
course's `--preset nanogpt-cpu` (the same shape, batch and schedule) with PyTorch's fused kernels
(``fused``) and, if asked, with the course's own pieces (``own``) and nanoGPT with biases
(``--nanogpt-bias``: the README's run has none; the course's model has them, as the 2017 paper's).
Every other round runs the sides in the reverse order, so a steady change of the machine's load
falls on every side (`orders` in the record). From the repository root::

    python benchmarks/versus_nanogpt.py --nanogpt ~/nanoGPT --data data/tinyshakespeare.txt \\
        --rounds 2 --course fused own --nanogpt-bias --json course/runs/versus_nanogpt_cpu.json

Two clocks, the same on both sides: tokens/s over the training steps only (nanoGPT's iterations that
evaluated, and its first, are left out; the course's History leaves its evaluations out), and the
wall seconds of the whole process (start-up, evaluations and all). nanoGPT's data files
(``data/shakespeare_char/{train,val}.bin``, ``meta.pkl``) are written from `--data` the way its
``prepare.py`` writes them, if missing. Both sides inherit this process's environment:
``OMP_WAIT_POLICY`` is left as it is (unset: libgomp's threads spin a while before they sleep).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from course.train import cpu_name, load_average, omp_wait_policy  # noqa: E402

# nanoGPT's README, "I only have a macbook": its CPU run of shakespeare_char
NANOGPT_FLAGS = ["--device=cpu", "--compile=False", "--eval_iters=20", "--log_interval=1", "--block_size=64",
                 "--batch_size=12", "--n_layer=4", "--n_head=4", "--n_embd=128", "--max_iters=2000",
                 "--lr_decay_iters=2000", "--dropout=0.0"]
EVAL_INTERVAL = 250          # config/train_shakespeare_char.py
TOKENS_PER_ITER = 12 * 64
ITER = re.compile(r"^iter (\d+): loss ([\d.]+), time ([\d.]+)ms")
STEP = re.compile(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)")
COURSE_FUSED = {"fused": "1", "own": "0"}


def prepare_nanogpt_data(checkout: str, text_path: str) -> None:
    """nanoGPT's data/shakespeare_char/prepare.py without its download: characters sorted, ids as
    uint16, the first 90% train, the rest val."""
    folder = os.path.join(checkout, "data", "shakespeare_char")
    if all(os.path.exists(os.path.join(folder, f)) for f in ("train.bin", "val.bin", "meta.pkl")):
        return
    with open(text_path) as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    ids = np.array([stoi[c] for c in text], dtype=np.uint16)
    split = int(len(ids) * 0.9)
    os.makedirs(folder, exist_ok=True)
    ids[:split].tofile(os.path.join(folder, "train.bin"))
    ids[split:].tofile(os.path.join(folder, "val.bin"))
    with open(os.path.join(folder, "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, f)


def timed(command: list[str], cwd: str, env: dict[str, str]) -> tuple[str, float, str, str]:
    """Run `command`; returns (its stdout, wall seconds, load before, load after). Raises if it fails."""
    before = load_average()
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return done.stdout, seconds, before, load_average()


def run_nanogpt(checkout: str, threads: int, out_dir: str, bias: bool = False) -> dict:
    """nanoGPT's README CPU run (with bias=True: biases in its linear layers and LayerNorms, as the
    course's model has them); its log read into losses and training tokens/s."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    command = [sys.executable, "train.py", "config/train_shakespeare_char.py", *NANOGPT_FLAGS,
               f"--out_dir={out_dir}", *(["--bias=True"] if bias else [])]
    log, wall, before, after = timed(command, checkout, env)
    times = {int(m[1]): float(m[3]) / 1e3 for m in map(ITER.match, log.splitlines()) if m}
    val = [(int(m[1]), float(m[3])) for m in map(STEP.match, log.splitlines()) if m]
    steps = [i for i in times if i > 0 and i % EVAL_INTERVAL]      # iterations that only trained
    seconds = sum(times[i] for i in steps)
    return {"val": val, "final_val": val[-1][1], "train_steps_counted": len(steps),
            "train_seconds": round(seconds, 2), "tokens_per_second": round(len(steps) * TOKENS_PER_ITER / seconds),
            "wall_seconds": round(wall, 1), "load_before": before, "load_after": after}


def run_course(text_path: str, fused: str, threads: int, folder: str) -> dict:
    """The course's nanogpt-cpu preset (benchmarks/char_lm.py), its recorded run read back."""
    path = os.path.join(folder, f"course-{fused}.json")
    command = [sys.executable, os.path.join(ROOT, "benchmarks", "char_lm.py"), "--preset", "nanogpt-cpu",
               "--fused", fused, "--threads", str(threads), "--quiet", "--samples", "0", "--data", text_path,
               "--json", path]
    _, wall, before, after = timed(command, ROOT, dict(os.environ))
    with open(path) as f:
        history = json.load(f)["history"]
    return {"val": history["val"], "final_val": history["val"][-1][1], "train_steps_counted": history["steps"],
            "train_seconds": round(history["seconds"], 2), "tokens_per_second": round(history["tokens_per_second"]),
            "wall_seconds": round(wall, 1), "load_before": before, "load_after": after}


def nanogpt_commit(checkout: str) -> str | None:
    done = subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nanogpt", required=True, help="a checkout of github.com/karpathy/nanoGPT")
    parser.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--course", nargs="+", choices=sorted(COURSE_FUSED), default=["fused"])
    parser.add_argument("--nanogpt-bias", action="store_true",
                        help="also run nanoGPT with bias=True (the README run has no biases; the course's model has)")
    parser.add_argument("--json", help="write the runs here")
    args = parser.parse_args(argv)
    checkout, text = os.path.abspath(os.path.expanduser(args.nanogpt)), os.path.abspath(args.data)
    prepare_nanogpt_data(checkout, text)
    import torch
    record = {"task": "versus_nanogpt", "machine": cpu_name(), "cores": os.cpu_count(), "threads": args.threads,
              "torch": torch.__version__, "omp_wait_policy": omp_wait_policy(),
              "nanogpt_commit": nanogpt_commit(checkout), "nanogpt_command": " ".join(["train.py",
              "config/train_shakespeare_char.py", *NANOGPT_FLAGS]),
              "course_command": "benchmarks/char_lm.py --preset nanogpt-cpu --fused {1: fused, 0: own} "
                                f"--threads {args.threads}",
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "orders": [], "rounds": []}
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "nanogpt-out")
        sides = {"nanogpt": lambda: run_nanogpt(checkout, args.threads, out),
                 **({"nanogpt_bias": lambda: run_nanogpt(checkout, args.threads, out, bias=True)}
                    if args.nanogpt_bias else {}),
                 **{f"course_{v}": lambda v=v: run_course(text, COURSE_FUSED[v], args.threads, folder)
                    for v in args.course}}
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))   # a trend in the load falls on both sides
            done = {name: sides[name]() for name in order}
            runs = {name: done[name] for name in sides}
            record["orders"].append(order)
            record["rounds"].append(runs)
            print(f"round {r + 1}: " + "; ".join(f"{name} {run['tokens_per_second']:,} tokens/s, val "
                                                 f"{run['final_val']:.4f}, {run['wall_seconds']} s wall"
                                                 for name, run in runs.items()), flush=True)
    for base in ("nanogpt", "nanogpt_bias")[:1 + args.nanogpt_bias]:
        record[f"ratio_to_{base}"] = {
            name: round(statistics.median(r[name]["tokens_per_second"] / r[base]["tokens_per_second"]
                                          for r in record["rounds"]), 3)
            for name in record["rounds"][0] if name.startswith("course")}
        print(f"tokens/s over {base}'s, median of the rounds:", record[f"ratio_to_{base}"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return record


if __name__ == "__main__":
    main()
