"""Benchmark: what small per-step pieces of chapter 10's fused training step cost, one call at a time.

Not a test: it measures (interleaved repeats; the minimum and the median per call, in ms), on the
nanogpt-cpu shape with 2 threads. On a shared machine each small multi-threaded operation can wait for
a free core, so a step's many small operations cost far more under load than their CPU time: compare
only figures from one run, and note the load it prints. From the repository root::

    python benchmarks/step_overheads.py
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from course.models import DecoderLM, DecoderLMConfig, _is_causal  # noqa: E402
from course.reference.decoder import causal_mask  # noqa: E402


def is_causal_before(mask: torch.Tensor) -> bool:
    """The check as course.models made it before: seven small operations per call."""
    if mask.dim() != 2 or mask.shape[0] != mask.shape[1]:
        return False
    future = torch.ones(mask.shape, dtype=torch.bool, device=mask.device).triu(diagonal=1)
    return torch.equal(torch.isneginf(mask), future) and not mask.masked_fill(future, 0).any()


def main(repeats: int = 5, calls: int = 200) -> None:
    torch.set_num_threads(2)
    model = DecoderLM(DecoderLMConfig(69, 128, 4, 4, 512, 0.0, 64))
    grads = [torch.randn_like(p) for p in model.parameters()]

    def clip_per_parameter() -> float:       # what the reference train_step does: one norm, one mul_ per tensor
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        for g in grads:
            g.mul_(1.0)
        return norm.item()

    def clip_foreach() -> float:             # the same with PyTorch's multi-tensor (_foreach) kernels
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        torch._foreach_mul_(grads, 1.0)
        return norm.item()

    mask = causal_mask(64)
    pieces = {"causal_mask(64), a new one": lambda: causal_mask(64),
              "is_causal check, before": lambda: is_causal_before(mask),
              "is_causal check, now": lambda: _is_causal(mask),
              "clipping per parameter": clip_per_parameter, "clipping with _foreach": clip_foreach}
    times: dict[str, list[float]] = {name: [] for name in pieces}
    for _ in range(repeats):
        for name, piece in pieces.items():
            start = time.perf_counter()
            for _ in range(calls):
                piece()
            times[name].append((time.perf_counter() - start) / calls * 1e3)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for name, values in times.items():
        print(f"{name:<28} min {min(values):7.3f} ms   median {sorted(values)[len(values) // 2]:7.3f} ms per call")


if __name__ == "__main__":
    main()
