"""Probes for chapter 5: split_heads, merge_heads, MultiHeadAttention (its layers and its forward
pass), and multi_head_from_heads.

`multi_head_from_heads`'s cases carry chapter 4's reference `AttentionHead`s and a `_Layers` (the
layers a MultiHeadAttention holds); both travel as their constructor arguments and weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from course.reference.attention import AttentionHead

from ..cases import Case, module_from_state, module_state, transportable
from ..kit import SOFTMAX, TORCH_ATTENTION, build, load_weights, parameter_table, run_modes
from ..runner import Probe, register

#: chapter 4's attention is done here with its answers (or its stand-in), not PyTorch's
_NO_FUSED = (*TORCH_ATTENTION, *SOFTMAX)
#: exercise 5.3 splits and merges the heads with exercises 5.1 and 5.2
_ON_HEADS = dict(builds_on=("split_heads", "merge_heads"), answer="MultiHeadAttention")

LAYERS = ("W_q", "W_k", "W_v", "W_o")


class _Layers(nn.Module):
    """What `multi_head_from_heads` is given: MultiHeadAttention(d_model, h, d_in, d_in, bias=False)'s
    layers (bias-free nn.Linear W_q, W_k, W_v: d_in -> d_model, W_o: d_model -> d_model) and its
    attributes d_model, num_heads, d_head."""

    def __init__(self, d_model: int, h: int, d_in: int) -> None:
        super().__init__()
        self.d_model, self.num_heads, self.d_head = d_model, h, d_model // h
        for name, width in zip(LAYERS, (d_in, d_in, d_in, d_model)):
            setattr(self, name, nn.Linear(width, d_model, bias=False))


transportable("multi_head_attention._Layers", _Layers,
              lambda m: module_state(m, d_model=m.d_model, h=m.num_heads, d_in=m.W_q.in_features),
              module_from_state(_Layers))
transportable("course.reference.attention.AttentionHead", AttentionHead,
              lambda m: module_state(m, d_in=m.W_q.in_features, d_k=m.W_q.out_features, d_v=m.W_v.out_features),
              module_from_state(AttentionHead))


def _call_layers(cls: Any, case: Case) -> dict[str, Any]:
    """MultiHeadAttention(*args, **kwargs)'s parameters {name: (shape, dtype)}, num_heads and d_head."""
    module = build(cls, *case.args, **case.kwargs)
    return {"parameters": parameter_table(module), "num_heads": module.num_heads, "d_head": module.d_head}


def _call_mha(cls: Any, case: Case) -> dict[str, Any]:
    """MultiHeadAttention(d_model, h, **kwargs) with meta['params'] copied in, run in both modes on
    meta's query (batch, n_q, d_q_in), key and value (batch, n_k, d_kv_in), where the call passes them,
    and mask, as meta['call'] says: 'self' (query only), 'key only' (query and key), 'value only' (query
    and value=...) or 'cross' (all three).
    Returns {mode: (output (batch, n_q, d_model), weights (batch, h, n_q, n_k))} as the module gave them."""
    module = build(cls, *case.args, **case.kwargs)
    load_weights(module, case.meta["params"], "The module holds W_q = nn.Linear(d_q_in or d_model, d_model, "
                 "bias=bias), W_k and W_v = nn.Linear(d_kv_in or d_model, d_model, bias=bias) and W_o = "
                 "nn.Linear(d_model, d_model, bias=bias)")
    m = case.meta
    call = m["call"]
    if call == "value only":
        return run_modes(module, lambda mod: mod(m["query"], value=m["value"], mask=m["mask"]))
    inputs = (m["query"],) if call == "self" else (m["query"], m["key"]) if call == "key only" else \
        (m["query"], m["key"], m["value"])
    return run_modes(module, lambda mod: mod(*inputs, mask=m["mask"]))


def _which(obj: Any, args: tuple) -> str | None:
    """Which object a call returned: 'argument i' when it is the i-th argument itself, else its type."""
    for i, arg in enumerate(args):
        if obj is arg:
            return f"argument {i + 1}"
    return None if obj is None else f"a {type(obj).__name__}"


def _call_from_heads(fn: Any, case: Case) -> dict[str, Any]:
    """fn(mha, heads, W_o) with args (a `_Layers`, a list of h `AttentionHead`s, W_o (d_model, d_model)).
    Returns what fn returned (`_which`), the heads' state after the call, and mha's parameters
    {name: (shape, dtype)} and weights {layer: weight} once loaded."""
    mha, heads, w_o = case.args
    returned = fn(mha, heads, w_o)
    return {"returned": _which(returned, case.args),
            "heads after": [dict(head.state_dict()) for head in heads],
            "parameters": parameter_table(mha),
            "loaded weights": {name: getattr(mha, name).weight.detach() for name in LAYERS}}


def _same_state(before: dict[str, torch.Tensor], after: Any) -> bool:
    """A head's state after the call (recorded, plain) is its state before: same names, dtypes, values."""
    if not isinstance(after, dict) or set(after) != set(before):
        return False
    for name, b in before.items():
        a, b = np.asarray(after[name]), b.numpy()
        if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b):
            return False
    return True


def _observe_from_heads(case: Case, raw: dict[str, Any]) -> dict[str, Any]:
    """The facts the check compares, from `_call_from_heads`'s record: whether mha itself came back,
    whether the heads are as the case gave them, mha's parameter table and its loaded weights."""
    _, heads, _ = case.args
    after = raw["heads after"]
    unchanged = len(after) == len(heads) and all(_same_state(head.state_dict(), a) for head, a in zip(heads, after))
    return {"returns mha": raw["returned"] == "argument 1", "heads unchanged": unchanged,
            "parameters": raw["parameters"], "loaded weights": raw["loaded weights"]}


register(
    Probe("multi_head_attention.split_heads", forbid=("torch.Tensor.unflatten", "torch.unflatten")),
    Probe("multi_head_attention.merge_heads", forbid=("torch.Tensor.unbind", "torch.unbind")),
    Probe("multi_head_attention.mha_layers", call=_call_layers),
    Probe("multi_head_attention.mha_self_attention", call=_call_mha, forbid=_NO_FUSED, **_ON_HEADS),
    Probe("multi_head_attention.mha_cross_attention", call=_call_mha, forbid=_NO_FUSED, **_ON_HEADS),
    Probe("multi_head_attention.mha_input_widths", call=_call_mha, forbid=_NO_FUSED, **_ON_HEADS),
    Probe("multi_head_attention.multi_head_from_heads", call=_call_from_heads, observe=_observe_from_heads),
)
