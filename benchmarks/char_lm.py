"""Benchmark: chapter 10's character language model on Tiny Shakespeare, against nanoGPT.

Not a test: it measures. Trains `course.models.DecoderLM` with `course.train.fit` from a preset
(`course.char_lm.PRESETS`; any flag overrides it) and prints the validation loss against
training seconds, tokens/s (and MFU on a GPU), the machine's load, and samples; then the anchors
below. `--json PATH` writes the run (loss curve, samples, config, hardware, load). Run from the
repository root with the text in a git-ignored folder (downloaded there if missing)::

    python benchmarks/char_lm.py --preset cpu --data data/tinyshakespeare.txt
    python benchmarks/char_lm.py --preset nanogpt-cpu --threads 2           # nanoGPT's shape and schedule
    python benchmarks/char_lm.py --preset gpu --json data/runs/gpu.json       # one GPU: bf16, SDPA, compile
    torchrun --nproc_per_node=8 benchmarks/char_lm.py --preset gpu            # data parallel

The machines are shared: compare timings only within one side-by-side run, and note the load.
"""

from __future__ import annotations

import os

# Shared machines: OpenMP threads that spin while they wait collapse when there are more busy threads
# than cores (20x slower measured at load 7 on 2 cores); passive waiting costs little when idle.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from course.char_lm import main  # noqa: E402  (after the OpenMP setting: torch reads it when loaded)

# nanoGPT (Karpathy), the same text and split: its README's configs
ANCHORS = [
    ("nanoGPT CPU, 4x128, block 64, batch 12, 2,000 steps: its README", "val about 1.88 in about 3 minutes"),
    ("the same, nanoGPT's code measured on a 2-core machine (course/runs/nanogpt_cpu_reference.json)",
     "val 1.8857; 146 s the whole run, 13.7k tokens/s its training steps; 65 s on a quieter machine"),
    ("nanoGPT GPU, 6x384, block 256, batch 64, 5,000 steps, one A100 (its README)", "val 1.4697 in about 3 min"),
    ("targets", "cpu preset: val <= 1.80 within 150 s on 2 cores; gpu preset: val <= 1.47 within 60 s on an H100"),
]

if __name__ == "__main__":
    main()
    if os.environ.get("RANK", "0") == "0":
        for what, figure in ANCHORS:
            print(f"anchor: {what}: {figure}")
