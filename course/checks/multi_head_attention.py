"""Checks for chapter 5: splitting heads, merging them, and multi-head attention.

Oracles:

* `split_heads` / `merge_heads`: a different formulation of the same layout
  (``torch.split`` + ``torch.stack`` and ``torch.unbind`` + ``torch.cat``), so
  no reshape or transpose of ours is trusted.
* the module's layers: the parameter shapes and dtypes (float32) and the
  attributes ``num_heads`` and ``d_head`` the contract lists.
* `MultiHeadAttention`: ``torch.nn.MultiheadAttention`` in float64 with the
  weights copied in (per-head weights from ``average_attn_weights=False``),
  cast back to float32. PyTorch's module cannot take queries whose width
  differs from ``d_model``; there the oracle is `_mha64`, an independent
  float64 einsum implementation that never splits tensors by reshaping (it
  indexes the weight matrices head by head); the reference answer must agree
  with both. No dropout: the same answer in training and in eval mode.

Mistakes are `_split`, `_merge`, `_layers` and `_mha64` with knobs turned.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from . import kit
from .framework import NOT_APPLICABLE, Case, Check, Mistake, register
from .kit import differing, randn

LAYERS = ("W_q", "W_k", "W_v", "W_o")


def _indivisible(d_model: int, h: int) -> Any:
    return kit.raises(f"d_model = {d_model} is not divisible by num_heads = {h}")


# ----------------------------------------------------------- split / merge ---

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


_BATCH_MIXED = ("Did you put the heads in front of the batch ((num_heads, batch, ...)) and reshape? That "
                "mixes heads of different sequences in the batch: keep batch first and transpose only "
                "dimensions 1 and 2.")
_SPLITS = {  # wrong layouts (x, batch, seq, heads, d_head) -> (batch, heads, seq, d_head), and their hints
    "no transpose": (lambda x, b, n, h, dh: x.reshape(b, h, n, dh),
                     "Did you reshape straight to (batch, num_heads, seq, d_head)? That reads the memory in the "
                     "wrong order, so a head's rows mix features of different tokens. Reshape to "
                     "(batch, seq, num_heads, d_head) first, then transpose(1, 2)."),
    "transpose forgotten": (lambda x, b, n, h, dh: x.reshape(b, n, h, dh),
                            "Did you forget the transpose? After reshaping to (batch, seq, num_heads, d_head), "
                            "swap dimensions 1 and 2 to get (batch, num_heads, seq, d_head)."),
    "interleaved": (lambda x, b, n, h, dh: x.reshape(b, n, dh, h).permute(0, 3, 1, 2),
                    "Each head takes a contiguous block of d_head features (head 0: features 0..d_head-1). "
                    "Did you reshape to (..., d_head, num_heads), which deals features out to heads in turn?"),
    "batch mixed": (lambda x, b, n, h, dh: x.reshape(b, n, h, dh).permute(2, 0, 1, 3).reshape(b, h, n, dh),
                    _BATCH_MIXED),
    "heads first": (lambda x, b, n, h, dh: x.reshape(h, b, n, dh).transpose(0, 1), _BATCH_MIXED),
}


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


def _merge_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    shapes = [(1, 2, 3, 2), (2, 3, 4, 2)] if not hidden else \
        [(3, 4, 5, 3), (2, 8, 1, 4), (2, 1, 6, 5), (2, 4, 4, 4), (2, 2, 7, 3)]
    return [Case(f"x of shape ({b}, {h}, {n}, {dh}): batch {b}, {h} heads, seq {n}, d_head {dh}",
                 (randn(rng, b, h, n, dh),)) for b, h, n, dh in shapes]


_MERGES = {  # wrong layouts (batch, heads, seq, d_head) -> (batch, seq, d_model), and their hints
    "no transpose": (lambda x, b, h, n, dh: x.reshape(b, n, h * dh),
                     "Did you reshape straight to (batch, seq, d_model)? Transpose back to "
                     "(batch, seq, num_heads, d_head) first (transpose(1, 2)), or tokens get scrambled."),
    "interleaved": (lambda x, b, h, n, dh: x.permute(0, 2, 3, 1).reshape(b, n, h * dh),
                    "Did you put the features in the order (d_head, num_heads)? Head 0's d_head features "
                    "come first, then head 1's, and so on."),
    "batch mixed": (lambda x, b, h, n, dh: x.reshape(h, b, n, dh).permute(1, 2, 0, 3).reshape(b, n, h * dh),
                    "Did you reshape to (num_heads, batch, ...)? That mixes heads of different sequences "
                    "in the batch."),
}


def _merge(case: Case, layout: str = "right") -> torch.Tensor:
    """The oracle (torch.unbind + torch.cat); knobs: a wrong layout from `_MERGES`."""
    (x,) = case.args
    return torch.cat(x.unbind(dim=1), dim=-1) if layout == "right" else _MERGES[layout][0](x, *x.shape)


# ------------------------------------------------------------ the layers ---

def _layer_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    configs = [(8, 2, None, None, True), (8, 4, 5, 6, True), (6, 4, None, None, True)] if not hidden else \
        [(16, 8, None, 10, True), (12, 3, 7, None, False), (8, 1, 3, 3, True), (512, 8, None, None, True),
         (10, 4, None, None, True), (6, 12, None, None, True), (9, 2, 4, 4, False)]
    return [Case(f"MultiHeadAttention({d}, {h}, d_q_in={dq}, d_kv_in={dkv}, bias={bias})"
                 + (f" ({h} heads do not divide d_model = {d})" if d % h else ""),
                 (d, h), {"d_q_in": dq, "d_kv_in": dkv, "bias": bias}) for d, h, dq, dkv, bias in configs]


def _call_layers(cls: Any, case: Case) -> dict[str, Any]:
    module = kit.build(cls, *case.args, **case.kwargs)
    return {"parameters": kit.parameter_table(module), "num_heads": module.num_heads, "d_head": module.d_head}


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


# ------------------------------------------------------ multi-head attention ---

def _mha_case(rng: np.random.Generator, label: str, *, b: int, n_q: int, n_k: int | None = None,
              d_model: int, h: int, d_q: int | None = None, d_kv: int | None = None,
              bias: bool = True, mask: str | None = None, call: str = "self") -> Case:
    """MultiHeadAttention(d_model, h, d_q_in=d_q, d_kv_in=d_kv, bias=bias); meta: the weights to copy
    in (scaled so that scores stay moderate: a saturated softmax would hide scaling bugs), the
    inputs, the mask, and the forward `call`: 'self', 'key only' (value defaults to key) or 'cross'."""
    n_k = n_q if call == "self" else n_k
    dq, dkv = d_q or d_model, d_kv or d_model
    widths = dict(zip(LAYERS, (dq, dkv, dkv, d_model)))
    params = {f"{name}.weight": randn(rng, d_model, d_in) / math.sqrt(d_in) for name, d_in in widths.items()}
    for name in LAYERS:
        params[f"{name}.bias"] = 0.5 * randn(rng, d_model) if bias else None
    query = randn(rng, b, n_q, dq)
    key = query if call == "self" else randn(rng, b, n_k, dkv)
    value = key if call in ("self", "key only") else randn(rng, b, n_k, dkv)
    m = None
    if mask == "causal":
        m = kit.causal_mask(n_q)
    elif mask == "padding":  # (b, 1, 1, n_k): each sequence keeps >= 1 real keys, the first is padded
        keep = rng.integers(1, n_k + 1, size=b)
        keep[0] = n_k - 1 if n_k > 1 else 1
        m = kit.padding_mask([int(k) for k in keep], n_k)[:, None]
    elif mask == "random":  # any additive float mask, (n_q, n_k), finite values
        m = torch.from_numpy(rng.uniform(-3, 0, size=(n_q, n_k)).astype(np.float32))
    return Case(label, (d_model, h), {"d_q_in": d_q, "d_kv_in": d_kv, "bias": bias},
                meta={"params": params, "query": query, "key": key, "value": value, "mask": m, "call": call})


def _call_mha(cls: Any, case: Case) -> Any:
    module = kit.build(cls, *case.args, **case.kwargs)
    kit.load_weights(module, case.meta["params"], "The module holds W_q = nn.Linear(d_q_in or d_model, d_model, "
                     "bias=bias), W_k and W_v = nn.Linear(d_kv_in or d_model, d_model, bias=bias) and W_o = "
                     "nn.Linear(d_model, d_model, bias=bias)")
    m = case.meta
    inputs = {"self": (m["query"],), "key only": (m["query"], m["key"]),
              "cross": (m["query"], m["key"], m["value"])}[m["call"]]
    return kit.run_modes(module, lambda mod: mod(*inputs, mask=m["mask"]))


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
    query, key, value = m["query"], m["key"], m["value"]
    b, n_q, n_k = query.shape[0], query.shape[1], key.shape[1]
    attn_mask = None if m["mask"] is None else \
        m["mask"].double().expand(b, h, n_q, n_k).reshape(b * h, n_q, n_k)  # PyTorch's layout: batch-major
    with torch.no_grad():
        out, w = ref(query.double(), key.double(), value.double(), attn_mask=attn_mask,
                     need_weights=True, average_attn_weights=False)
    return kit.eval_then_train((out.float(), w.float()))


def _mha64(case: Case, *, split: str = "right", merge: str = "right", scale_by: str = "d_head",
           w_o: bool = True, squeeze: bool = False, masked: bool = True, value_from: str = "value") -> Any:
    """Independent float64 multi-head attention, written head by head with einsum over the
    weight matrices, in both modes. Knobs: `split` a layout from `_SPLITS` or 'wide' (one head
    of width d_model), `merge` a layout from `_MERGES`, `scale_by` 'd_model', no `w_o`, the wide
    head's weights squeezed, the mask not passed on, the value taken from the query."""
    (d_model, h), m, p = case.args, case.meta, case.meta["params"]
    d_head = d_model // h
    if value_from == "query" and m["query"].shape[-1] != m["key"].shape[-1]:
        return NOT_APPLICABLE  # that code raises: W_v cannot take the query
    value = m["query"] if value_from == "query" and m["call"] == "key only" else m["value"]
    x_q, x_k, x_v = m["query"].double(), m["key"].double(), value.double()
    b, n_q = x_q.shape[0], x_q.shape[1]

    def bias(name: str) -> torch.Tensor:
        t = p[f"{name}.bias"]
        return torch.zeros(d_model, dtype=torch.float64) if t is None else t.double()

    def project(x: torch.Tensor, name: str) -> torch.Tensor:  # (b, n, d_in) -> (b, h, n, d_head)
        if split == "right":  # head i = output rows i*d_head .. of the weight
            w = p[f"{name}.weight"].double().reshape(h, d_head, -1)
            return torch.einsum("bni,hdi->bhnd", x, w) + bias(name).reshape(h, 1, d_head)
        full = x @ p[f"{name}.weight"].double().T + bias(name)  # (b, n, d_model)
        return full.unsqueeze(1) if split == "wide" else _SPLITS[split][0](full, b, x.shape[1], h, d_head)

    q, k, v = project(x_q, "W_q"), project(x_k, "W_k"), project(x_v, "W_v")
    scores = torch.einsum("bhnd,bhmd->bhnm", q, k) / math.sqrt(d_model if scale_by == "d_model" else q.shape[-1])
    if m["mask"] is not None and masked:
        scores = scores + m["mask"].double()
    weights = torch.softmax(scores, dim=-1)
    heads = torch.einsum("bhnm,bhmd->bhnd", weights, v)
    merged = torch.einsum("bhnd->bnhd", heads).reshape(b, n_q, -1) if merge == "right" else \
        _MERGES[merge][0](heads, *heads.shape)
    out = merged @ p["W_o.weight"].double().T + bias("W_o") if w_o else merged
    if squeeze:
        weights = weights.squeeze(1)
    return kit.eval_then_train((out.float(), weights.float()))


_WIDE = ("Did you attend with the full-width projections (one head of width d_model)? Split them "
         "into num_heads heads before attending; weights should be (batch, num_heads, n_q, n_k).")
_MHA_MISTAKES = [
    *(Mistake(f"Splitting the heads: {hint}", differing(_mha64, split=layout))
      for layout, (_, hint) in _SPLITS.items() if layout != "transpose forgotten"),
    *(Mistake(f"Merging the heads: {hint}", differing(_mha64, merge=layout)) for layout, (_, hint) in _MERGES.items()),
    Mistake("Did you forget the output projection W_o? The concatenated heads must go through "
            "W_o (with its bias) before they are returned.", differing(_mha64, w_o=False)),
    Mistake("Did you scale the scores by sqrt(d_model)? Each head works in d_head = d_model / num_heads "
            "dimensions, so its scores are divided by sqrt(d_head).", differing(_mha64, scale_by="d_model")),
    Mistake(_WIDE, differing(_mha64, split="wide")),
    Mistake(_WIDE, differing(_mha64, split="wide", squeeze=True)),
    Mistake("Did you pass the mask on to scaled_dot_product_attention?", differing(_mha64, masked=False)),
]
_VALUE_FROM_QUERY = Mistake("Did you default the value to the query? When only `key` is given, the value "
                            "defaults to `key`.", differing(_mha64, value_from="query"))
_MHA_HINT = ("Follow the recipe: project with W_q, W_k, W_v; split_heads; attend with the leading "
             "(batch, num_heads) dimensions; merge_heads; project with W_o. Return (output, weights). "
             "No dropout: if only key 'train' differs, your module behaves differently in training mode.")


def _mha_label(s: dict) -> str:
    return ((f", {s['mask']} mask" if s.get("mask") else "") + (", bias=False" if s.get("bias") is False else "")
            + (", value not given (defaults to key)" if s.get("call") == "key only" else ""))


def _self_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [dict(b=1, n_q=3, d_model=4, h=2), dict(b=2, n_q=4, d_model=8, h=4, mask="causal")] if not hidden \
        else [dict(b=3, n_q=5, d_model=8, h=2), dict(b=2, n_q=7, d_model=16, h=8, mask="causal"),
              dict(b=2, n_q=4, d_model=12, h=4, mask="padding"), dict(b=4, n_q=3, d_model=6, h=1),
              dict(b=2, n_q=6, d_model=8, h=4, bias=False, mask="random"), dict(b=1, n_q=1, d_model=8, h=2)]
    return [_mha_case(rng, f"self-attention: batch {s['b']}, seq {s['n_q']}, d_model {s['d_model']}, "
                           f"{s['h']} heads" + _mha_label(s), **s) for s in specs]


def _cross_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [dict(b=2, n_q=3, n_k=5, d_model=8, h=2, d_kv=6),
             dict(b=2, n_q=4, n_k=2, d_model=8, h=4, mask="padding")] if not hidden else \
        [dict(b=3, n_q=5, n_k=7, d_model=16, h=8, d_kv=10, mask="padding"),
         dict(b=2, n_q=1, n_k=6, d_model=8, h=2),
         dict(b=2, n_q=6, n_k=3, d_model=12, h=4, d_kv=5, mask="random"),
         dict(b=1, n_q=4, n_k=9, d_model=8, h=1, d_kv=3),
         dict(b=2, n_q=3, n_k=5, d_model=8, h=4, d_kv=7, bias=False),
         dict(b=2, n_q=4, n_k=6, d_model=8, h=2, d_kv=5, call="key only", mask="padding"),
         dict(b=2, n_q=4, n_k=4, d_model=8, h=2, call="key only")]
    return [_mha_case(rng, f"cross-attention: batch {s['b']}, {s['n_q']} queries, {s['n_k']} keys, d_model "
                           f"{s['d_model']}, {s['h']} heads, d_kv_in {s.get('d_kv')}" + _mha_label(s),
                      **{"call": "cross", **s}) for s in specs]


def _width_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [dict(b=2, n_q=3, n_k=4, d_model=8, h=2, d_q=5, d_kv=6, call="cross")] if not hidden else \
        [dict(b=2, n_q=5, d_model=8, h=4, d_q=6, d_kv=6, call="self", mask="causal"),
         dict(b=3, n_q=4, n_k=6, d_model=16, h=8, d_q=3, d_kv=7, call="cross", mask="padding"),
         dict(b=2, n_q=3, n_k=5, d_model=12, h=2, d_q=20, call="cross"),
         dict(b=1, n_q=6, n_k=2, d_model=8, h=1, d_q=4, d_kv=9, call="cross", bias=False)]
    return [_mha_case(rng, f"{s['call']}-attention: batch {s['b']}, d_model {s['d_model']}, {s['h']} heads, "
                           f"d_q_in {s.get('d_q')}, d_kv_in {s.get('d_kv')}" + _mha_label(s), **s) for s in specs]


def _mha_check(name: str, cases: Any, hint: str = "", *mistakes: Mistake) -> Check:
    return Check(name=name, cases=cases, expected=_torch_mha, call=_call_mha, mistakes=[*_MHA_MISTAKES, *mistakes],
                 hint=_MHA_HINT + hint)


register(
    __name__,
    Check(
        name="split_heads", cases=_split_cases, expected=_split,
        mistakes=[
            *(Mistake(hint, differing(_split, layout=layout)) for layout, (_, hint) in _SPLITS.items()),
            Mistake("Did you rely on reshape to fail? Check d_model % num_heads yourself and raise a "
                    "ValueError that says what is wrong.", differing(_split, layout="unchecked")),
        ],
        hint="Head i must hold features i*d_head .. (i+1)*d_head - 1 of every token, in token order: "
             "x.reshape(batch, seq, num_heads, d_head).transpose(1, 2). Raise ValueError when "
             "num_heads does not divide d_model.",
    ),
    Check(
        name="merge_heads", cases=_merge_cases, expected=_merge,
        mistakes=[Mistake(hint, differing(_merge, layout=layout)) for layout, (_, hint) in _MERGES.items()],
        hint="merge_heads undoes split_heads: x.transpose(1, 2) gives (batch, seq, num_heads, d_head), "
             "then reshape to (batch, seq, num_heads * d_head).",
    ),
    Check(
        name="mha_layers", cases=_layer_cases, expected=_layers, call=_call_layers,
        mistakes=[
            Mistake("Did you size W_q as d_model x d_model? Queries come in with width d_q_in when it is "
                    "given: nn.Linear(d_q_in or d_model, d_model).", differing(_layers, q_in="d_model")),
            Mistake("Did you use d_q_in for W_k or W_v? Keys and values come from the other sequence, of "
                    "width d_kv_in: nn.Linear(d_kv_in or d_model, d_model).", differing(_layers, kv_in="d_q_in")),
            Mistake("Did you ignore d_kv_in? W_k and W_v take inputs of width d_kv_in when it is given.",
                    differing(_layers, kv_in="d_model")),
        ],
        hint="W_q = nn.Linear(d_q_in or d_model, d_model, bias), W_k and W_v = nn.Linear(d_kv_in or "
             "d_model, d_model, bias), W_o = nn.Linear(d_model, d_model, bias), all float32, and nothing "
             "else with parameters; keep self.num_heads and self.d_head = d_model // num_heads; raise "
             "ValueError in __init__ when num_heads does not divide d_model.",
    ),
    _mha_check("mha_self_attention", _self_cases),
    _mha_check("mha_cross_attention", _cross_cases, " Queries come from `query`; keys and values from `key` "
               "and `value`, whose length may differ.", _VALUE_FROM_QUERY),
    _mha_check("mha_input_widths", _width_cases, " Here the query width d_q_in and the key/value width "
               "d_kv_in differ from d_model."),
)
