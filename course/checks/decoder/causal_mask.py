"""8.1: causal_mask(n, dtype, device); oracle: ``nn.Transformer.generate_square_subsequent_mask``.
The `device` clause is tested with PyTorch's ``meta`` device, which every machine has (a CPU-only grader
included): a meta tensor has a shape, a dtype and a device but no values, so those cases compare a summary
(`course.probing.calls.decoder.tensor_summary`, which the probe's `observe` makes of the student's mask).
The "new tensor" clause: in the cases with ``meta["overwrite"]`` the probe writes that value into the
first call's mask and calls again; the second mask must be untouched (`course.probing.calls.decoder.AGAIN`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from course.probing.calls.decoder import AGAIN, FIRST, on_meta, tensor_summary

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
    # (n, keyword arguments, whether the probe overwrites the first mask and calls again: the "new tensor" clause)
    specs = [(4, {}, True), (1, {}, False), (3, {"dtype": torch.float64}, False)] if not hidden else [
        (5, {}, True), (2, {}, False), (1, {}, False), (7, {"dtype": torch.float64}, True),
        (5, {"dtype": torch.float16}, False), (6, {"device": torch.device("cpu")}, False),
        (3, {"dtype": torch.float64, "device": "cpu"}, True), (64, {}, False), (0, {}, False), (-2, {}, False),
        (5, {"device": torch.device("meta")}, False), (4, {"dtype": torch.float64, "device": "meta"}, False)]
    if not hidden:
        specs.append((3, {"device": "meta"}, False))
    cases = []
    for n, kw, twice in specs:
        n = _drawn(rng, n)
        label = f"n = {n}" + "".join(f", {k}={v!r}" if k == "device" else f", {k}={v}" for k, v in kw.items())
        meta = {}
        if twice:
            meta["overwrite"] = float(rng.integers(1, 10))
            label += f"; the mask written over with {meta['overwrite']:g}, then a second call"
        cases.append(Case(label, (n,), kw, meta=meta))
    return cases


def _twice(case: Case, mask: Any, again: Any = None) -> Any:
    """A mask in the form the probe records it: as it is, or, where the probe calls twice, the first call's
    mask and the second's (`again`; by default the same, as every new mask is)."""
    if "overwrite" not in case.meta or not isinstance(mask, torch.Tensor):
        return mask
    return {FIRST: mask, AGAIN: mask if again is None else again}


def _cached(case: Case) -> Any:
    """The same tensor returned by both calls: the second shows what was written into the first."""
    right = _mask(case)
    return _twice(case, right[FIRST], torch.full_like(right[FIRST], case.meta["overwrite"]))


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
        return _twice(case, hidden)
    if kind == "0/1":
        return _twice(case, hidden.to(dtype))
    return _twice(case, torch.zeros(n, n, dtype=dtype).masked_fill(hidden, float(fill)))


def _oracle(case: Case) -> Any:
    n = case.args[0]
    if n < 1:
        return kit.raises("n must be at least 1")
    mask = nn.Transformer.generate_square_subsequent_mask(n, dtype=case.kwargs.get("dtype", torch.float32),
                                                          device=case.kwargs.get("device"))
    return _summary(mask) if on_meta(case) else _twice(case, mask)


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
    Mistake("Did you return the same tensor on every call (a cached mask)? The contract asks for a new tensor: "
            "a caller may write into the mask it gets (adding a padding mask in place, say), and the next call "
            "must not see that.", kit.unless(lambda case: "overwrite" in case.meta, _cached)),
]

register(
    __name__,
    Check(name="causal_mask", cases=_cases, expected=_oracle, mistakes=_MISTAKES,
          hint="Return a new (n, n) tensor of the requested dtype (float32 by default) and device on every call: 0 "
               "on and below the diagonal, -inf above it (row i = query i, column j = key j, hidden when j > i); "
               "raise ValueError when n < 1."),
)
