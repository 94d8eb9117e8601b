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

The machines are shared: compare timings only within one side-by-side run, and note the load
(`benchmarks/versus_nanogpt.py` runs nanoGPT's own code beside this one). OpenMP's wait policy is
left to the environment: unset, libgomp's threads spin a while before they sleep, which a step's
many small operations need (with OMP_WAIT_POLICY=PASSIVE the nanogpt-cpu shape trained at about 40%
fewer tokens per second on 2 cores: course/runs/versus_nanogpt_cpu.json against
versus_nanogpt_cpu_passive.json); on a machine with more busy threads than cores, PASSIVE keeps
spinning threads from collapsing.
"""

from __future__ import annotations

import os

from course.char_lm import main


# nanoGPT (Karpathy), the same text and split: its README's configs
ANCHORS = [
    ("nanoGPT CPU, 4x128, block 64, batch 12, 2,000 steps: its README", "val about 1.88 in about 3 minutes"),
    ("the same, nanoGPT's code side by side with this model (course/runs/versus_nanogpt_cpu.json)",
     "val 1.8857; 21.0k and 22.2k tokens/s over its training steps on 2 Xeon cores, this model 1.13x"),
    ("nanoGPT GPU, 6x384, block 256, batch 64, 5,000 steps, one A100 (its README)", "val 1.4697 in about 3 min"),
    ("targets", "cpu preset: val <= 1.80 within 150 s on 2 cores; gpu preset: val <= 1.47 within 60 s on an H100"),
]

if __name__ == "__main__":
    main()
    if os.environ.get("RANK", "0") == "0":
        for what, figure in ANCHORS:
            print(f"anchor: {what}: {figure}")
