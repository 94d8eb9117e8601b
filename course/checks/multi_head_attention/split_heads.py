"""Checks for `split_heads`; oracle: ``torch.split`` + ``torch.stack`` (no reshape or
transpose of ours is trusted). Mistakes are `_split` with knobs turned."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..framework import NOT_APPLICABLE, Case, Check, Mistake, register
from ..kit import variant, randn
from ._shared import _SPLITS, _indivisible


def _split_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        shapes = [(1, 3, 4, 2), (2, 4, 6, 3)]
        bad = [(1, 2, 6, 4)]
    else:
        shapes = [(3, 5, 12, 4), (2, 7, 8, 8), (4, 1, 6, 2), (2, 3, 5, 1), (2, 4, 16, 4), (1, 6, 6, 6)]
        bad = [(2, 3, 10, 4), (1, 2, 4, 8)]
    cases = [Case(f"x of shape ({b}, {n}, {d}), num_heads={h}", (randn(rng, b, n, d), h))
             for b, n, d, h in shapes]
    cases += [Case(f"x of shape ({b}, {n}, {d}), num_heads={h} (does not divide d_model)",
                   (randn(rng, b, n, d), h)) for b, n, d, h in bad]
    if hidden:  # the contract keeps the dtype
        cases.append(Case("float64 x of shape (2, 3, 6), num_heads=3", (randn(rng, 2, 3, 6).double(), 3)))
    return cases


def _split(case: Case, layout: str = "right") -> Any:
    """The oracle (torch.split + torch.stack); knobs: a wrong layout from `_SPLITS`, or
    'unchecked' (no divisibility check: reshape itself fails with RuntimeError)."""
    x, h = case.args
    b, n, d = x.shape
    if layout == "unchecked":
        return x.reshape(b, n, h, d // h).transpose(1, 2)
    if d % h:
        return _indivisible(d, h) if layout == "right" else NOT_APPLICABLE
    if layout == "right":
        return torch.stack(x.split(d // h, dim=-1), dim=1)
    return _SPLITS[layout][0](x, b, n, h, d // h)



register(
    __name__,
    Check(
        name="split_heads", cases=_split_cases, expected=_split,
        mistakes=[
            *(Mistake(hint, variant(_split, layout=layout)) for layout, (_, hint) in _SPLITS.items()),
            Mistake("Did you rely on reshape to fail? Check d_model % num_heads yourself and raise a "
                    "ValueError that says what is wrong.", variant(_split, layout="unchecked")),
        ],
        hint="Head i must hold features i*d_head .. (i+1)*d_head - 1 of every token, in token order: "
             "x.reshape(batch, seq, num_heads, d_head).transpose(1, 2). Raise ValueError when "
             "num_heads does not divide d_model.",
    ),
)
