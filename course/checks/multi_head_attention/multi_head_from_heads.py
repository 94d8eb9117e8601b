"""Checks for `multi_head_from_heads`; oracle: the single heads themselves (chapter 4's
reference `AttentionHead`, run in float64): the concatenation of their outputs times ``W_o``,
and their weights stacked on a head axis; the loaded module is run by `_mha64`. Mistakes are
`_from_heads` with knobs turned."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import torch
from torch import nn

from course.reference.attention import AttentionHead

from .. import kit
from ..framework import NOT_APPLICABLE, Case, Check, Mistake, register
from ..kit import variant, randn
from ._shared import LAYERS, _mha64


class _Layers(nn.Module):
    """What `multi_head_from_heads` is given: MultiHeadAttention(d_model, h, d_in, d_in, bias=False)'s
    layers and attributes (the check runs the loaded weights itself, with `_mha64`)."""

    def __init__(self, d_model: int, h: int, d_in: int) -> None:
        super().__init__()
        self.d_model, self.num_heads, self.d_head = d_model, h, d_model // h
        for name, width in zip(LAYERS, (d_in, d_in, d_in, d_model)):
            setattr(self, name, nn.Linear(width, d_model, bias=False))


def _heads_case(rng: np.random.Generator, h: int, d_in: int, d_head: int, b: int, n_q: int, n_k: int) -> Case:
    heads, d_model = [kit.build(AttentionHead, d_in, d_head) for _ in range(h)], h * d_head
    for head in heads:
        kit.load_weights(head, {f"{c}.weight": randn(rng, d_head, d_in) / math.sqrt(d_in) for c in LAYERS[:3]})
    x = randn(rng, b, n_q, d_in)
    context = x if n_k == n_q else randn(rng, b, n_k, d_in)
    return Case(f"{h} heads AttentionHead(d_in={d_in}, d_k={d_head}), W_o ({d_model}, {d_model}), "
                f"mha = MultiHeadAttention({d_model}, {h}, d_q_in={d_in}, d_kv_in={d_in}, bias=False); "
                f"run on x {(b, n_q, d_in)}, context {(b, n_k, d_in)}",
                (kit.build(_Layers, d_model, h, d_in), heads, randn(rng, d_model, d_model) / math.sqrt(d_model)),
                meta={"query": x, "key": context, "value": context})


def _from_heads_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    configs = [(2, 3, 3, 2, 4, 4), (3, 5, 2, 2, 3, 5)] if not hidden else \
        [(4, 4, 4, 2, 5, 5), (1, 6, 4, 2, 3, 3), (3, 7, 2, 3, 4, 6), (8, 5, 2, 1, 3, 2), (2, 8, 4, 2, 6, 4)]
    return [_heads_case(rng, *c) for c in configs]


def _run_loaded(case: Case, weights: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    mha, _, _ = case.args
    params = {**{f"{name}.weight": w for name, w in weights.items()}, **{f"{name}.bias": None for name in LAYERS}}
    run = Case(case.label, (mha.d_model, mha.num_heads), meta={**case.meta, "params": params, "mask": None})
    return _mha64(run)["eval"]


def _call_from_heads(fn: Any, case: Case) -> dict[str, Any]:
    mha, heads, w_o = case.args
    before = [{k: v.clone() for k, v in head.state_dict().items()} for head in heads]
    returned = fn(mha, heads, w_o)
    out, weights = _run_loaded(case, {name: getattr(mha, name).weight.detach() for name in LAYERS})
    unchanged = all(torch.equal(v, head.state_dict()[k]) for head, s in zip(heads, before) for k, v in s.items())
    return {"returns mha": returned is mha, "heads unchanged": unchanged, "parameters": kit.parameter_table(mha),
            "output": out, "weights": weights}


def _from_heads(case: Case, order: str = "right", head_t: bool = False, o_t: bool = True,
                value_layer: str = "W_v") -> Any:
    """The oracle: the single heads themselves (float64), concatenated and projected by W_o. Knobs
    (run through the loaded module instead): heads copied in `order` 'reversed' or 'interleaved'
    (head i in rows i, i + h, ...), the heads' weights transposed (`head_t`), W_o copied without
    transposing it (`o_t`), W_v's rows taken from each head's `value_layer`."""
    mha, heads, w_o = case.args
    d_model, h, d_in = mha.d_model, mha.num_heads, heads[0].W_q.weight.shape[1]
    table = {f"{name}.weight": ((d_model, d_in if name != "W_o" else d_model), "float32") for name in LAYERS}
    if (order, head_t, o_t, value_layer) == ("right", False, True, "W_v"):
        x, context = case.meta["query"].double(), case.meta["key"].double()
        runs = [copy.deepcopy(head).double()(x, context) for head in heads]
        out = torch.cat([o for o, _ in runs], dim=-1) @ w_o.double()
        return {"returns mha": True, "heads unchanged": True, "parameters": table,
                "output": out.float(), "weights": torch.stack([w for _, w in runs], dim=1).float()}
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
    out, attn = _run_loaded(case, weights)
    return {"returns mha": True, "heads unchanged": True, "parameters": table, "output": out, "weights": attn}


_ROWS = ("Head i's W_q, W_k and W_v weights (d_head, d_in) go to rows i*d_head .. (i+1)*d_head - 1 of the "
         "module's W_q.weight, W_k.weight and W_v.weight (d_model, d_in): torch.cat([...], dim=0) in head order.")



register(
    __name__,
    Check(
        name="multi_head_from_heads", cases=_from_heads_cases, expected=_from_heads, call=_call_from_heads,
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
