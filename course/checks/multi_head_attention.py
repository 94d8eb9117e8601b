"""Checks for chapter 5: splitting heads, merging them, multi-head attention, and a
multi-head module assembled from single heads.

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
  with both. The mask follows chapter 4's contract (broadcastable to
  ``(batch, n_q, n_k)``); PyTorch gets it with the head axis inserted, as an
  ``attn_mask`` of shape ``(n_q, n_k)`` or ``(batch * num_heads, n_q, n_k)``.
  No dropout: the same answer in training and in eval mode.
* `multi_head_from_heads`: the single heads themselves (chapter 4's reference
  `AttentionHead`, run in float64): the concatenation of their outputs times
  ``W_o``, and their weights stacked on a head axis; the loaded module is run
  by `_mha64`.

Mistakes are `_split`, `_merge`, `_layers` and `_mha64` with knobs turned.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import torch
from torch import nn

from course.reference.attention import AttentionHead

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

_MASK_SHAPES = {"causal": "(n_q, n_k)", "padding": "(batch, 1, n_k)", "random": "(n_q, n_k)",
                "full": "(batch, n_q, n_k)"}


def _mha_case(rng: np.random.Generator, *, b: int, n_q: int, n_k: int | None = None, d_model: int, h: int,
              d_q: int | None = None, d_kv: int | None = None, bias: bool = True, mask: str | None = None,
              call: str = "self") -> Case:
    """MultiHeadAttention(d_model, h, d_q_in=d_q, d_kv_in=d_kv, bias=bias); meta: the weights to copy
    in (scaled so that scores stay moderate: a saturated softmax would hide scaling bugs), the
    inputs, the mask, and the forward `call`: 'self', 'key only' (value defaults to key) or 'cross'."""
    n_k = n_q if call == "self" else n_k
    label = (f"{'self' if call == 'self' else 'cross'}-attention: batch {b}, {n_q} queries, {n_k} keys, d_model "
             f"{d_model}, {h} heads, d_q_in {d_q}, d_kv_in {d_kv}" + (f", {mask} mask {_MASK_SHAPES[mask]}" if mask
             else "") + (", bias=False" if not bias else "") + (", value not given (defaults to key)" if
                                                                  call == "key only" else ""))
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
    elif mask == "padding":  # (b, 1, n_k), >= 1 real key each; the first sequence is padded and the
        keep = [n_k - 1 or 1, n_k, *rng.integers(1, n_k + 1, size=b - 2).tolist()][:b]  # second is not
        m = kit.padding_mask(keep, n_k)  # (a mask landing on the wrong head when batch == h changes weights)
    elif mask in ("random", "full"):  # any additive float mask, (n_q, n_k) or (b, n_q, n_k), finite values
        shape = (n_q, n_k) if mask == "random" else (b, n_q, n_k)
        m = torch.from_numpy(rng.uniform(-3, 0, size=shape).astype(np.float32))
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
    attn_mask = m["mask"] if m["mask"] is None or m["mask"].dim() == 2 else \
        m["mask"].unsqueeze(-3).expand(b, h, n_q, n_k).reshape(b * h, n_q, n_k)  # PyTorch's layout: batch-major
    attn_mask = None if attn_mask is None else attn_mask.double()
    with torch.no_grad():
        out, w = ref(query.double(), key.double(), value.double(), attn_mask=attn_mask,
                     need_weights=True, average_attn_weights=False)
    return kit.both_modes((out.float(), w.float()))


def _mha64(case: Case, *, split: str = "right", merge: str = "right", scale_by: str = "d_head",
           w_o: bool = True, squeeze: bool = False, masked: bool = True, head_axis: bool = True,
           value_from: str = "value") -> Any:
    """Independent float64 multi-head attention, written head by head with einsum over the
    weight matrices, in both modes. Knobs: `split` a layout from `_SPLITS` or 'wide' (one head
    of width d_model), `merge` a layout from `_MERGES`, `scale_by` 'd_model', no `w_o`, the wide
    head's weights squeezed, the mask not passed on or added without inserting the head axis (a
    broadcasting error raises, as it would in the student's code), the value taken from the query."""
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
        scores = scores + (m["mask"].double().unsqueeze(-3) if head_axis else m["mask"].double())
    weights = torch.softmax(scores, dim=-1)
    heads = torch.einsum("bhnm,bhmd->bhnd", weights, v)
    merged = torch.einsum("bhnd->bnhd", heads).reshape(b, n_q, -1) if merge == "right" else \
        _MERGES[merge][0](heads, *heads.shape)
    out = merged @ p["W_o.weight"].double().T + bias("W_o") if w_o else merged
    if squeeze:
        weights = weights.squeeze(1)
    return kit.both_modes((out.float(), weights.float()))


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
    Mistake("Did you add the mask to the (batch, num_heads, n_q, n_k) scores without inserting the head "
            "axis? The mask follows chapter 4's contract, broadcastable to (batch, n_q, n_k), and "
            "broadcasting aligns shapes from the right: a padding mask (batch, 1, n_k) lines up as "
            "(1, batch, 1, n_k), so sequence b's mask lands on head b. That is an error when batch != "
            "num_heads and silently wrong when they are equal. Use mask.unsqueeze(-3): (batch, 1, n_q, n_k).",
            differing(_mha64, head_axis=False)),
]
_VALUE_FROM_QUERY = Mistake("Did you default the value to the query? When only `key` is given, the value "
                            "defaults to `key`.", differing(_mha64, value_from="query"))
_MHA_HINT = ("Follow the recipe: project with W_q, W_k, W_v; split_heads; insert the head axis into the "
             "mask (mask.unsqueeze(-3)); attend with the leading (batch, num_heads) dimensions; merge_heads; "
             "project with W_o. Return (output, weights). "
             "No dropout: if only key 'train' differs, your module behaves differently in training mode.")


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
         dict(b=2, n_q=4, n_k=4, d_model=8, h=2, call="key only")]
    return [_mha_case(rng, **{"call": "cross", **s}) for s in specs]


def _width_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [dict(b=2, n_q=3, n_k=4, d_model=8, h=2, d_q=5, d_kv=6, call="cross")] if not hidden else \
        [dict(b=2, n_q=5, d_model=8, h=4, d_q=6, d_kv=6, call="self", mask="causal"),
         dict(b=3, n_q=4, n_k=6, d_model=16, h=8, d_q=3, d_kv=7, call="cross", mask="padding"),
         dict(b=2, n_q=3, n_k=5, d_model=12, h=2, d_q=20, call="cross"),
         dict(b=1, n_q=6, n_k=2, d_model=8, h=1, d_q=4, d_kv=9, call="cross", bias=False)]
    return [_mha_case(rng, **s) for s in specs]


def _mha_check(name: str, cases: Any, hint: str = "", *mistakes: Mistake) -> Check:
    return Check(name=name, cases=cases, expected=_torch_mha, call=_call_mha, mistakes=[*_MHA_MISTAKES, *mistakes],
                 hint=_MHA_HINT + hint)


# ------------------------------------------- a module from single heads ---

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
    Check(
        name="multi_head_from_heads", cases=_from_heads_cases, expected=_from_heads, call=_call_from_heads,
        mistakes=[
            Mistake(f"Did you copy the heads in reverse order? {_ROWS}", differing(_from_heads, order="reversed")),
            Mistake(f"Did you deal each head's rows out to every num_heads-th row? {_ROWS}",
                    differing(_from_heads, order="interleaved")),
            Mistake("Did you transpose the heads' weights? nn.Linear stores its weight as (d_out, d_in), so a "
                    "head's W_q.weight (d_head, d_in) already is a block of rows of the module's W_q.weight.",
                    differing(_from_heads, head_t=True)),
            Mistake("Did you copy W_o without transposing it? W_o is given in the row convention, (h*d_head, "
                    "d_model), used as concat @ W_o; nn.Linear computes x @ weight.T, so W_o.weight = W_o.T.",
                    differing(_from_heads, o_t=False)),
            Mistake("Did you fill W_v with the heads' W_k weights? Each projection takes the heads' own layer.",
                    differing(_from_heads, value_layer="W_k")),
        ],
        hint=f"{_ROWS} W_o.weight = W_o.T. Copy inside `with torch.no_grad():` (a parameter cannot be changed "
             "in place while autograd tracks it), keep the parameters float32 and their shapes, leave heads "
             "and W_o unchanged, and return mha itself.",
    ),
)
