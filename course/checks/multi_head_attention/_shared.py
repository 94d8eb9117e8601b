"""What several of chapter 5's checks share: the layer names, the divisibility error, the
wrong head layouts (`_SPLITS`, `_MERGES`) and `_mha64`, the independent float64 multi-head
attention (the oracle of `MultiHeadAttention` where PyTorch's module cannot serve, and the
runner of the module `multi_head_from_heads` fills in)."""

from __future__ import annotations

import math
from typing import Any

import torch

from course.probing.calls.multi_head_attention import LAYERS  # noqa: F401  (the checks use it from here)

from .. import kit
from ..framework import NOT_APPLICABLE, Case


def _indivisible(d_model: int, h: int) -> Any:
    return kit.raises(f"d_model = {d_model} is not divisible by num_heads = {h}")



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



def _inputs(meta: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(query, key, value) of a forward case: its meta holds only what the call passes (the query, and the key
    and the value where given); key defaults to query and value to key."""
    key = meta.get("key", meta["query"])
    return meta["query"], key, meta.get("value", key)


def _mha64(case: Case, *, split: str = "right", merge: str = "right", scale_by: str = "d_head",
           w_o: bool = True, squeeze: bool = False, masked: bool = True, head_axis: bool = True,
           value_from: str = "value") -> Any:
    """Independent float64 multi-head attention, written head by head with einsum over the
    weight matrices, in both modes. Knobs: `split` a layout from `_SPLITS` or 'wide' (one head
    of width d_model), `merge` a layout from `_MERGES`, `scale_by` 'd_model', no `w_o`, the wide
    head's weights squeezed, the mask not passed on or added without inserting the head axis (a
    broadcasting error raises, as it would in the student's code), the value taken from the query, or
    (`value_from='key'`) a given value ignored because the key was not given."""
    (d_model, h), m, p = case.args, case.meta, case.meta["params"]
    d_head = d_model // h
    query, key, value = _inputs(m)
    if value_from == "query" and query.shape[-1] != key.shape[-1]:
        return NOT_APPLICABLE  # that code raises: W_v cannot take the query
    value = query if value_from == "query" and m["call"] == "key only" else \
        key if value_from == "key" and m["call"] == "value only" else value
    x_q, x_k, x_v = query.double(), key.double(), value.double()
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

