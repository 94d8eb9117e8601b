"""8.1: causal_mask(n, dtype, device); oracle: ``nn.Transformer.generate_square_subsequent_mask``.
The `device` clause is tested with PyTorch's ``meta`` device, which every machine has (a CPU-only grader
included): a meta tensor has a shape, a dtype and a device but no values, so those cases compare a summary
(`course.probing.calls.decoder.tensor_summary`, which the probe's `observe` makes of the student's mask)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from course.probing.calls.decoder import on_meta, tensor_summary

from .. import kit
from ..framework import NOT_APPLICABLE, Case, Check, Mistake, register
from ..kit import variant


def _drawn(rng: np.random.Generator, n: int) -> int:
    """n drawn around a spec's: 0 and 1 (edge cases) stay, a negative n is some small negative size, a small n
    up to twice as large, a large one up to half as large again."""
    if n < 0:
        return -int(rng.integers(1, 6))
    return n if n <= 1 else n + int(rng.integers(0, (n if n <= 8 else n // 2) + 1))


def _cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(4, {}), (1, {}), (3, {"dtype": torch.float64})] if not hidden else [
        (5, {}), (2, {}), (1, {}), (7, {"dtype": torch.float64}), (5, {"dtype": torch.float16}),
        (6, {"device": torch.device("cpu")}), (3, {"dtype": torch.float64, "device": "cpu"}), (64, {}),
        (0, {}), (-2, {}), (5, {"device": torch.device("meta")}), (4, {"dtype": torch.float64, "device": "meta"})]
    if not hidden:
        specs.append((3, {"device": "meta"}))
    specs = [(_drawn(rng, n), kw) for n, kw in specs]
    return [Case(f"n = {n}" + "".join(f", {k}={v!r}" if k == "device" else f", {k}={v}" for k, v in kw.items()),
                 (n,), kw) for n, kw in specs]


def _summary(out: Any) -> Any:
    """What can be compared of a tensor on the meta device: where it lives, its shape and dtype (the form
    the probe sends a meta tensor in)."""
    return tensor_summary(out) if isinstance(out, torch.Tensor) else out


def _mask(case: Case, *, diagonal: int = 1, past: bool = False, fill: Any = "-inf", keep_dtype: bool = True,
          kind: str = "additive") -> Any:
    """The mask written out; knobs: `diagonal` (0 also hides j == i), `past` (hide j < i instead), `fill`
    (what hidden entries get), `keep_dtype` (False: always float32), `kind` ('bool': True where hidden;
    '0/1': 1.0 where hidden)."""
    n = case.args[0]
    if n < 1:
        return kit.raises("n must be at least 1")
    if on_meta(case):
        return NOT_APPLICABLE  # no values to tell these mistakes apart on the meta device
    dtype = case.kwargs.get("dtype", torch.float32) if keep_dtype else torch.float32
    hidden = torch.ones(n, n, dtype=torch.bool)
    hidden = hidden.tril(-diagonal) if past else hidden.triu(diagonal)
    if kind == "bool":
        return hidden
    if kind == "0/1":
        return hidden.to(dtype)
    return torch.zeros(n, n, dtype=dtype).masked_fill(hidden, float(fill))


def _oracle(case: Case) -> Any:
    n = case.args[0]
    if n < 1:
        return kit.raises("n must be at least 1")
    mask = nn.Transformer.generate_square_subsequent_mask(n, dtype=case.kwargs.get("dtype", torch.float32),
                                                          device=case.kwargs.get("device"))
    return _summary(mask) if on_meta(case) else mask


def _device_ignored(case: Case) -> Any:
    """The mask made on the default device (CPU) whatever `device` says."""
    n = case.args[0]
    return _summary(torch.empty(n, n, dtype=case.kwargs.get("dtype", torch.float32)))


_MISTAKES = [
    Mistake("Did you hide the diagonal too (j >= i)? Position i must see itself: only j > i is hidden, "
            "torch.triu(..., diagonal=1). Hiding the diagonal leaves row 0 with no key at all (a NaN softmax).",
            variant(_mask, diagonal=0)),
    Mistake("Did you hide the past instead of the future? -inf goes above the diagonal (key j > query i), "
            "0 on and below it: use triu, not tril.", variant(_mask, past=True)),
    Mistake("Did you hide the past, diagonal included? -inf goes strictly above the diagonal (j > i).",
            variant(_mask, past=True, diagonal=0)),
    Mistake("Did you use a large negative number instead of -inf? The contract asks for -inf, which softmax "
            "turns into an exact 0 (and which fits every dtype: -1e9 overflows float16).",
            variant(_mask, fill=-1e9)),
    Mistake("Did you return a boolean mask? The course's masks are additive floats: 0 where a key is "
            "visible, -inf where it is hidden.", variant(_mask, kind="bool")),
    Mistake("Did you return a 0/1 mask? It is added to the scores, so hidden entries must be -inf, "
            "visible ones 0.", variant(_mask, kind="0/1")),
    Mistake("Did you ignore the device argument? Create the mask on `device` (torch.zeros(..., device=device) "
            "and the like); the tests ask for PyTorch's meta device, which every machine has.",
            kit.unless(lambda case: on_meta(case) and case.args[0] >= 1, _device_ignored)),
]

register(
    __name__,
    Check(name="causal_mask", cases=_cases, expected=_oracle, mistakes=_MISTAKES,
          hint="Return an (n, n) tensor of the requested dtype (float32 by default) and device: 0 on and below "
               "the diagonal, -inf above it (row i = query i, column j = key j, hidden when j > i); raise "
               "ValueError when n < 1."),
)
