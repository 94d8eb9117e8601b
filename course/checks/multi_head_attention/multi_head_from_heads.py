"""Checks for `multi_head_from_heads`; oracle: the module's weights holding the heads' rows in
head order (and W_o.T). The kernel records what the function returned, the heads' weights after
the call and the module's loaded weights; the probe's observe compares the heads with the case's.
Mistakes are `_from_heads` with knobs turned."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from course.probing.calls.multi_head_attention import _Layers
from course.reference.attention import AttentionHead

from .. import kit
from ..framework import NOT_APPLICABLE, Case, Check, Mistake, register
from ..kit import variant, randn
from ._shared import LAYERS


def _heads_case(rng: np.random.Generator, h: int, d_in: int, d_head: int) -> Case:
    heads, d_model = [kit.build(AttentionHead, d_in, d_head) for _ in range(h)], h * d_head
    for head in heads:
        kit.load_weights(head, {f"{c}.weight": randn(rng, d_head, d_in) / math.sqrt(d_in) for c in LAYERS[:3]})
    return Case(f"{h} heads AttentionHead(d_in={d_in}, d_k={d_head}), W_o ({d_model}, {d_model}), "
                f"mha = MultiHeadAttention({d_model}, {h}, d_q_in={d_in}, d_kv_in={d_in}, bias=False)",
                (kit.build(_Layers, d_model, h, d_in), heads, randn(rng, d_model, d_model) / math.sqrt(d_model)))


def _from_heads_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    def draw(low: int, high: int) -> int:  # an integer in [low, high]
        return int(rng.integers(low, high + 1))
    square, other = draw(2, 4), draw(3, 5)  # (h, d_in, d_head); d_in = d_head lets transposed heads fit
    configs = [(draw(2, 3), square, square), (draw(2, 4), draw(4, 6), draw(2, 3))] if not hidden else \
        [(draw(3, 4), other, other), (1, draw(5, 7), draw(3, 4)), (3, draw(6, 8), 2), (8, draw(4, 6), draw(1, 2)),
         (2, draw(7, 9), 4)]
    return [_heads_case(rng, *c) for c in configs]


def _from_heads(case: Case, order: str = "right", head_t: bool = False, o_t: bool = True,
                value_layer: str = "W_v") -> Any:
    """The oracle: mha returned, the heads untouched, the module's parameter table, and its weights
    holding the heads' rows in head order and W_o.T. Knobs: heads copied in `order` 'reversed' or
    'interleaved' (head i in rows i, i + h, ...), the heads' weights transposed (`head_t`), W_o
    copied without transposing it (`o_t`), W_v's rows taken from each head's `value_layer`."""
    mha, heads, w_o = case.args
    d_model, h, d_in = mha.d_model, mha.num_heads, heads[0].W_q.weight.shape[1]
    table = {f"{name}.weight": ((d_model, d_in if name != "W_o" else d_model), "float32") for name in LAYERS}
    if head_t and d_in != mha.d_head:
        return NOT_APPLICABLE  # the copy raises: the transposed weights have the wrong shape
    order_of = heads[::-1] if order == "reversed" else heads
    weights = {}
    for name in LAYERS[:3]:
        blocks = [getattr(head, value_layer if name == "W_v" else name).weight for head in order_of]
        stacked = torch.cat([w.T if head_t else w for w in blocks])
        if order == "interleaved":
            stacked = stacked.reshape(h, -1, d_in).transpose(0, 1).reshape(d_model, d_in)
        weights[name] = stacked.detach()
    weights["W_o"] = w_o.T if o_t else w_o
    return {"returns mha": True, "heads unchanged": True, "parameters": table, "loaded weights": weights}


_ROWS = ("Head i's W_q, W_k and W_v weights (d_head, d_in) go to rows i*d_head .. (i+1)*d_head - 1 of the "
         "module's W_q.weight, W_k.weight and W_v.weight (d_model, d_in): torch.cat([...], dim=0) in head order.")



register(
    __name__,
    Check(
        name="multi_head_from_heads", cases=_from_heads_cases, expected=_from_heads,
        mistakes=[
            Mistake(f"Did you copy the heads in reverse order? {_ROWS}", variant(_from_heads, order="reversed")),
            Mistake(f"Did you deal each head's rows out to every num_heads-th row? {_ROWS}",
                    variant(_from_heads, order="interleaved")),
            Mistake("Did you transpose the heads' weights? nn.Linear stores its weight as (d_out, d_in), so a "
                    "head's W_q.weight (d_head, d_in) already is a block of rows of the module's W_q.weight.",
                    variant(_from_heads, head_t=True)),
            Mistake("Did you copy W_o without transposing it? W_o is given in the row convention, (h*d_head, "
                    "d_model), used as concat @ W_o; nn.Linear computes x @ weight.T, so W_o.weight = W_o.T.",
                    variant(_from_heads, o_t=False)),
            Mistake("Did you fill W_v with the heads' W_k weights? Each projection takes the heads' own layer.",
                    variant(_from_heads, value_layer="W_k")),
        ],
        hint=f"{_ROWS} W_o.weight = W_o.T. Copy inside `with torch.no_grad():` (a parameter cannot be changed "
             "in place while autograd tracks it), keep the parameters float32 and their shapes, leave heads "
             "and W_o unchanged, and return mha itself.",
    ),
)
