"""Probes for 11.2, apply_rope(x, positions, base=10000.0).

`rope` and `rope_errors` call it on the case's arguments (the output's dtype recorded by name beside it:
a float16 or bfloat16 result would otherwise reach the judge as plain numbers). `rope_relative` rotates
copies of one query q at the positions m + s and of one key k at n + s, for several shifts s, and records
the rotated vectors; `relative_facts`, run by the judge, makes the scores rope(q, m + s) . rope(k, n + s)
and the rotated vectors' lengths from them.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from ...cases import Case
from ...runner import Probe, register
from .norm import output_and_dtype

#: the keys of rope_relative's raw record (the rotated copies) and of its facts (`relative_facts`)
ROT_Q, ROT_K = "rope(q, m + s) for each shift s", "rope(k, n + s) for each shift s"
SCORES = "score rope(q, m + s) . rope(k, n + s) less the score at s = 0, for each shift s"
LENGTHS = "|rope(q, m + s)| - |q| and |rope(k, n + s)| - |k|, for each shift s"


def _call(fn: Callable, case: Case) -> dict[str, Any]:
    return output_and_dtype(fn(*case.args, **case.kwargs))


def _shifted(fn: Callable, case: Case) -> dict[str, Any]:
    """meta: q and k (d_head,), m and n, the shifts s (a list), base (None: not passed)."""
    meta = case.meta
    shifts = torch.tensor(meta["shifts"], dtype=torch.int64)
    kw = {} if meta["base"] is None else {"base": meta["base"]}
    q = meta["q"].expand(len(shifts), -1).clone()
    k = meta["k"].expand(len(shifts), -1).clone()
    return {ROT_Q: fn(q, meta["m"] + shifts, **kw), ROT_K: fn(k, meta["n"] + shifts, **kw)}


def relative_facts(case: Case, raw: dict) -> dict[str, np.ndarray]:
    """From the rotated copies: each shift's score less the first shift's, and the rotated vectors'
    lengths less the lengths of q and k (all float64)."""
    rq, rk = (np.asarray(raw[key], dtype=np.float64) for key in (ROT_Q, ROT_K))
    n = len(case.meta["shifts"])
    if rq.shape != (n, case.meta["q"].shape[0]) or rk.shape != rq.shape:
        raise ValueError(f"apply_rope returned shapes {rq.shape} and {rk.shape} for inputs of shape "
                         f"({n}, {case.meta['q'].shape[0]})")
    scores = (rq * rk).sum(-1)
    q, k = (case.meta[key].double().numpy() for key in ("q", "k"))
    lengths = np.stack([np.linalg.norm(rq, axis=-1) - np.linalg.norm(q),
                        np.linalg.norm(rk, axis=-1) - np.linalg.norm(k)])
    return {SCORES: scores - scores[0], LENGTHS: lengths}


register(
    Probe("modern.rope", call=_call),
    Probe("modern.rope_relative", call=_shifted, observe=relative_facts),
    Probe("modern.rope_errors", call=_call),
)
