"""Checks for `MultiHeadAttention.forward` (self-attention, cross-attention, input widths);
oracle: ``torch.nn.MultiheadAttention`` in float64 with the weights copied in, or `_mha64`
where the query width differs from ``d_model`` (see the package docstring). Mistakes are
`_mha64` with knobs turned."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import kit
from ..framework import Case, Check, Mistake, register
from ..kit import variant, randn
from course.twins import torch_attn_mask
from ._shared import _MERGES, _SPLITS, LAYERS, _inputs, _mha64

_MASK_SHAPES = {"causal": "(n_q, n_k)", "padding": "(batch, 1, n_k)", "random": "(n_q, n_k)",
                "full": "(batch, n_q, n_k)"}


def _mha_case(rng: np.random.Generator, *, b: int, n_q: int, n_k: int | None = None, d_model: int, h: int,
              d_q: int | None = None, d_kv: int | None = None, bias: bool = True, mask: str | None = None,
              call: str = "self") -> Case:
    """MultiHeadAttention(d_model, h, d_q_in=d_q, d_kv_in=d_kv, bias=bias); meta: the weights to copy
    in (scaled so that scores stay moderate: a saturated softmax would hide scaling bugs), the
    inputs the call passes (`_inputs`), the mask, and the forward `call`: 'self' (query only), 'key only'
    (value defaults to key), 'value only' (key defaults to query, value given) or 'cross'."""
    n_k = n_q if call in ("self", "value only") else n_k
    label = (f"{'self' if call in ('self', 'value only') else 'cross'}-attention: batch {b}, {n_q} queries, "
             f"{n_k} keys, d_model {d_model}, {h} heads, d_q_in {d_q}, d_kv_in {d_kv}"
             + (f", {mask} mask {_MASK_SHAPES[mask]}" if mask else "") + (", bias=False" if not bias else "")
             + (", value not given (defaults to key)" if call == "key only" else "")
             + (", key not given (defaults to query) but value given" if call == "value only" else ""))
    dq, dkv = d_q or d_model, d_kv or d_model
    widths = dict(zip(LAYERS, (dq, dkv, dkv, d_model)))
    params = {f"{name}.weight": randn(rng, d_model, d_in) / math.sqrt(d_in) for name, d_in in widths.items()}
    for name in LAYERS:
        params[f"{name}.bias"] = 0.5 * randn(rng, d_model) if bias else None
    query = randn(rng, b, n_q, dq)
    key = query if call in ("self", "value only") else randn(rng, b, n_k, dkv)
    value = key if call in ("self", "key only") else randn(rng, b, n_k, dkv)
    m = None
    if mask == "causal":
        m = kit.causal_mask(n_q)
    elif mask == "padding":  # (b, 1, n_k), >= 1 real key each; the first sequence is padded and the
        keep = [n_k - 1 or 1, n_k, *rng.integers(1, n_k + 1, size=b - 2).tolist()][:b]  # second is not
        m = kit.padding_mask(keep, n_k)  # (a mask landing on the wrong head when batch == h changes weights)
    elif mask in ("random", "full"):  # any additive float mask, (n_q, n_k) or (b, n_q, n_k), finite values
        shape = (n_q, n_k) if mask == "random" else (b, n_q, n_k)
        m = torch.from_numpy(rng.uniform(-3, 0, size=shape).astype(np.float32))
    given = {"query": query} | ({"key": key} if call in ("key only", "cross") else {}) \
        | ({"value": value} if call in ("value only", "cross") else {})
    return Case(label, (d_model, h), {"d_q_in": d_q, "d_kv_in": d_kv, "bias": bias},
                meta={"params": params, **given, "mask": m, "call": call})


def _torch_mha(case: Case) -> Any:
    """nn.MultiheadAttention (float64) with the case's weights: the oracle."""
    (d_model, h), kw, m = case.args, case.kwargs, case.meta
    if kw["d_q_in"] not in (None, d_model):
        return _mha64(case)
    p, d_kv = m["params"], kw["d_kv_in"] or d_model
    ref = nn.MultiheadAttention(d_model, h, bias=kw["bias"], kdim=d_kv, vdim=d_kv, batch_first=True,
                                dtype=torch.float64)
    w_q, w_k, w_v = (p[f"W_{c}.weight"] for c in "qkv")
    with torch.no_grad():
        if ref._qkv_same_embed_dim:
            ref.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v]))
        else:
            for c, w in zip("qkv", (w_q, w_k, w_v)):
                getattr(ref, f"{c}_proj_weight").copy_(w)
        ref.out_proj.weight.copy_(p["W_o.weight"])
        if kw["bias"]:
            ref.in_proj_bias.copy_(torch.cat([p[f"W_{c}.bias"] for c in "qkv"]))
            ref.out_proj.bias.copy_(p["W_o.bias"])
    ref.eval()
    query, key, value = _inputs(m)
    b, n_q, n_k = query.shape[0], query.shape[1], key.shape[1]
    attn_mask = torch_attn_mask(m["mask"], b, h, n_q, n_k)
    with torch.no_grad():
        out, w = ref(query.double(), key.double(), value.double(), attn_mask=attn_mask,
                     need_weights=True, average_attn_weights=False)
    return kit.both_modes((out.float(), w.float()))


_WIDE = ("Did you attend with the full-width projections (one head of width d_model)? Split them "
         "into num_heads heads before attending; weights should be (batch, num_heads, n_q, n_k).")
_MHA_MISTAKES = [
    *(Mistake(f"Splitting the heads: {hint}", variant(_mha64, split=layout))
      for layout, (_, hint) in _SPLITS.items() if layout != "transpose forgotten"),
    *(Mistake(f"Merging the heads: {hint}", variant(_mha64, merge=layout)) for layout, (_, hint) in _MERGES.items()),
    Mistake("Did you forget the output projection W_o? The concatenated heads must go through "
            "W_o (with its bias) before they are returned.", variant(_mha64, w_o=False)),
    Mistake("Did you scale the scores by sqrt(d_model)? Each head works in d_head = d_model / num_heads "
            "dimensions, so its scores are divided by sqrt(d_head).", variant(_mha64, scale_by="d_model")),
    Mistake(_WIDE, variant(_mha64, split="wide")),
    Mistake(_WIDE, variant(_mha64, split="wide", squeeze=True)),
    Mistake("Did you pass the mask on to scaled_dot_product_attention?", variant(_mha64, masked=False)),
    Mistake("Did you add the mask to the (batch, num_heads, n_q, n_k) scores without inserting the head "
            "axis? The mask follows chapter 4's contract, broadcastable to (batch, n_q, n_k), and "
            "broadcasting aligns shapes from the right: a padding mask (batch, 1, n_k) lines up as "
            "(1, batch, 1, n_k), so sequence b's mask lands on head b. That is an error when batch != "
            "num_heads and silently wrong when they are equal. Use mask.unsqueeze(-3): (batch, 1, n_q, n_k).",
            variant(_mha64, head_axis=False)),
]
_VALUE_FROM_QUERY = Mistake("Did you default the value to the query? When only `key` is given, the value "
                            "defaults to `key`.", variant(_mha64, value_from="query"))
_VALUE_IGNORED = Mistake("Did you ignore `value` because `key` was not given? `key` defaults to `query`, and "
                         "a `value` that is given is used as it is: forward(query, value=v) attends over the "
                         "query's positions with the values v.", variant(_mha64, value_from="key"))
_MHA_HINT = ("Follow the recipe: project with W_q, W_k, W_v; split_heads; insert the head axis into the "
             "mask (mask.unsqueeze(-3)); attend with the leading (batch, num_heads) dimensions; merge_heads; "
             "project with W_o. Return (output, weights). "
             "No dropout: " + kit.same_in_both_modes())


def _self_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [dict(b=1, n_q=3, d_model=4, h=2), dict(b=2, n_q=4, d_model=8, h=4, mask="causal")] if not hidden \
        else [dict(b=3, n_q=5, d_model=8, h=2), dict(b=2, n_q=7, d_model=16, h=8, mask="causal"),
              dict(b=2, n_q=4, d_model=12, h=4, mask="padding"), dict(b=2, n_q=5, d_model=8, h=2, mask="padding"),
              dict(b=4, n_q=3, d_model=6, h=1), dict(b=3, n_q=4, d_model=12, h=3, mask="full"),
              dict(b=2, n_q=3, d_model=12, h=3, mask="full"),
              dict(b=2, n_q=6, d_model=8, h=4, bias=False, mask="random"), dict(b=1, n_q=1, d_model=8, h=2)]
    return [_mha_case(rng, **s) for s in specs]


def _cross_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [dict(b=2, n_q=3, n_k=5, d_model=8, h=2, d_kv=6),
             dict(b=2, n_q=4, n_k=2, d_model=8, h=2, mask="padding")] if not hidden else \
        [dict(b=3, n_q=5, n_k=7, d_model=16, h=8, d_kv=10, mask="padding"),
         dict(b=2, n_q=1, n_k=6, d_model=8, h=2),
         dict(b=2, n_q=6, n_k=3, d_model=12, h=4, d_kv=5, mask="random"),
         dict(b=1, n_q=4, n_k=9, d_model=8, h=1, d_kv=3),
         dict(b=2, n_q=3, n_k=5, d_model=8, h=4, d_kv=7, bias=False),
         dict(b=2, n_q=4, n_k=6, d_model=8, h=2, d_kv=5, call="key only", mask="padding"),
         dict(b=2, n_q=3, n_k=5, d_model=8, h=2, mask="full"),
         dict(b=2, n_q=4, n_k=4, d_model=8, h=2, call="key only"),
         dict(b=2, n_q=4, d_model=8, h=2, call="value only", mask="causal")]
    return [_mha_case(rng, **{"call": "cross", **s}) for s in specs]


def _width_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [dict(b=2, n_q=3, n_k=4, d_model=8, h=2, d_q=5, d_kv=6, call="cross")] if not hidden else \
        [dict(b=2, n_q=5, d_model=8, h=4, d_q=6, d_kv=6, call="self", mask="causal"),
         dict(b=3, n_q=4, n_k=6, d_model=16, h=8, d_q=3, d_kv=7, call="cross", mask="padding"),
         dict(b=2, n_q=3, n_k=5, d_model=12, h=2, d_q=20, call="cross"),
         dict(b=1, n_q=6, n_k=2, d_model=8, h=1, d_q=4, d_kv=9, call="cross", bias=False)]
    return [_mha_case(rng, **s) for s in specs]


def _mha_check(name: str, cases: Any, hint: str = "", *mistakes: Mistake) -> Check:
    return Check(name=name, cases=cases, expected=_torch_mha, mistakes=[*_MHA_MISTAKES, *mistakes],
                 hint=_MHA_HINT + hint)



register(
    __name__,
    _mha_check("mha_self_attention", _self_cases),
    _mha_check("mha_cross_attention", _cross_cases, " Queries come from `query`; keys and values from `key` "
               "and `value`, whose length may differ.", _VALUE_FROM_QUERY, _VALUE_IGNORED),
    _mha_check("mha_input_widths", _width_cases, " Here the query width d_q_in and the key/value width "
               "d_kv_in differ from d_model."),
)
