"""Checks for `merge_heads`; oracle: ``torch.unbind`` + ``torch.cat`` (no reshape or
transpose of ours is trusted). Mistakes are `_merge` with knobs turned."""

from __future__ import annotations

import numpy as np
import torch

from ..framework import Case, Check, Mistake, register
from ..kit import variant, randn
from ._shared import _MERGES


def _merge_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    shapes = [(1, 2, 3, 2), (2, 3, 4, 2)] if not hidden else \
        [(3, 4, 5, 3), (2, 8, 1, 4), (2, 1, 6, 5), (2, 4, 4, 4), (2, 2, 7, 3)]
    return [Case(f"x of shape ({b}, {h}, {n}, {dh}): batch {b}, {h} heads, seq {n}, d_head {dh}",
                 (randn(rng, b, h, n, dh),)) for b, h, n, dh in shapes]



def _merge(case: Case, layout: str = "right") -> torch.Tensor:
    """The oracle (torch.unbind + torch.cat); knobs: a wrong layout from `_MERGES`."""
    (x,) = case.args
    return torch.cat(x.unbind(dim=1), dim=-1) if layout == "right" else _MERGES[layout][0](x, *x.shape)



register(
    __name__,
    Check(
        name="merge_heads", cases=_merge_cases, expected=_merge,
        mistakes=[Mistake(hint, variant(_merge, layout=layout)) for layout, (_, hint) in _MERGES.items()],
        hint="merge_heads undoes split_heads: x.transpose(1, 2) gives (batch, seq, num_heads, d_head), "
             "then reshape to (batch, seq, num_heads * d_head).",
    ),
)
