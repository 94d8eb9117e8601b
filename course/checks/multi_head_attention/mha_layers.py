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
    def draw(low: int, high: int) -> int:  # an integer in [low, high]
        return int(rng.integers(low, high + 1))
    h1, h2, h3 = (int(rng.choice(c)) for c in ([2, 4], [2, 4], [3, 4, 5]))
    d2 = h2 * draw(2, 3)
    if not hidden:  # d_q_in odd, d_kv_in even and not d_model: every width differs
        configs = [(h1 * draw(2, 4), h1, None, None, True), (d2, h2, 2 * draw(1, 4) + 1, d2 + 2 * draw(1, 3), True),
                   (h3 * draw(1, 3) + draw(1, h3 - 1), h3, None, None, True)]  # indivisible
    else:
        d3, v1, v2 = draw(6, 10), draw(2, 5), draw(3, 6)
        configs = [(8 * draw(2, 3), 8, None, draw(9, 12), True),  # only d_kv_in given
                   (3 * draw(3, 5), 3, draw(5, 8), None, False),  # only d_q_in given, no bias
                   (d3, 1, v1, v1, True),  # one head, d_q_in = d_kv_in
                   (64 * draw(6, 9), int(rng.choice([8, 16])), None, None, True),  # a large d_model
                   (4 * draw(2, 4) + draw(1, 3), 4, None, None, True),  # indivisible
                   (d3, d3 + draw(1, 6), None, None, True),  # more heads than features
                   (2 * draw(3, 6) + 1, 2, v2, v2, False)]  # indivisible, with input widths
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
        name="mha_layers", guard=True, cases=_layer_cases, expected=_layers,
        mistakes=_MISTAKES,
        hint="W_q = nn.Linear(d_q_in or d_model, d_model, bias), W_k and W_v = nn.Linear(d_kv_in or "
             "d_model, d_model, bias), W_o = nn.Linear(d_model, d_model, bias), all float32, and nothing "
             "else with parameters; keep self.num_heads and self.d_head = d_model // num_heads; raise "
             "ValueError in __init__ when num_heads does not divide d_model.",
    ),
)
