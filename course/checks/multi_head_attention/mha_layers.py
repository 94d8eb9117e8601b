"""Checks for `MultiHeadAttention.__init__`; oracle: the parameter shapes and dtypes
(float32) and the attributes ``num_heads`` and ``d_head`` the contract lists. Mistakes are
`_layers` with knobs turned."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..framework import NOT_APPLICABLE, Case, Check, Mistake, register
from ..kit import variant
from ._shared import LAYERS, _indivisible


def _layer_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    configs = [(8, 2, None, None, True), (8, 4, 5, 6, True), (6, 4, None, None, True)] if not hidden else \
        [(16, 8, None, 10, True), (12, 3, 7, None, False), (8, 1, 3, 3, True), (512, 8, None, None, True),
         (10, 4, None, None, True), (6, 12, None, None, True), (9, 2, 4, 4, False)]
    return [Case(f"MultiHeadAttention({d}, {h}, d_q_in={dq}, d_kv_in={dkv}, bias={bias})"
                 + (f" ({h} heads do not divide d_model = {d})" if d % h else ""),
                 (d, h), {"d_q_in": dq, "d_kv_in": dkv, "bias": bias}) for d, h, dq, dkv, bias in configs]


def _layers(case: Case, q_in: str = "d_q_in", kv_in: str = "d_kv_in") -> Any:
    """The layers' {name: (shape, dtype)} and attributes; knobs: the width W_q (`q_in`) and
    W_k, W_v (`kv_in`) take: 'd_model', 'd_q_in' or 'd_kv_in'."""
    (d, h), kw = case.args, case.kwargs
    if d % h:
        return _indivisible(d, h) if (q_in, kv_in) == ("d_q_in", "d_kv_in") else NOT_APPLICABLE
    width = {"d_model": d, "d_q_in": kw["d_q_in"] or d, "d_kv_in": kw["d_kv_in"] or d}
    params = {}
    for name, d_in in zip(LAYERS, (width[q_in], width[kv_in], width[kv_in], d)):
        params[f"{name}.weight"] = ((d, d_in), "float32")
        if kw["bias"]:
            params[f"{name}.bias"] = ((d,), "float32")
    return {"parameters": params, "num_heads": h, "d_head": d // h}


_MISTAKES = [
    Mistake("Did you size W_q as d_model x d_model? Queries come in with width d_q_in when it is "
            "given: nn.Linear(d_q_in or d_model, d_model).", variant(_layers, q_in="d_model")),
    Mistake("Did you use d_q_in for W_k or W_v? Keys and values come from the other sequence, of "
            "width d_kv_in: nn.Linear(d_kv_in or d_model, d_model).", variant(_layers, kv_in="d_q_in")),
    Mistake("Did you ignore d_kv_in? W_k and W_v take inputs of width d_kv_in when it is given.",
            variant(_layers, kv_in="d_model")),
]


register(
    __name__,
    Check(
        name="mha_layers", cases=_layer_cases, expected=_layers,
        mistakes=_MISTAKES,
        hint="W_q = nn.Linear(d_q_in or d_model, d_model, bias), W_k and W_v = nn.Linear(d_kv_in or "
             "d_model, d_model, bias), W_o = nn.Linear(d_model, d_model, bias), all float32, and nothing "
             "else with parameters; keep self.num_heads and self.d_head = d_model // num_heads; raise "
             "ValueError in __init__ when num_heads does not divide d_model.",
    ),
)
