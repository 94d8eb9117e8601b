"""Probes for chapter 7: the position-wise feed-forward network, its SwiGLU variant, the pre-LN
encoder layer and the encoder stack.

Forward passes return the student's outputs in both modes (`run_modes`); the parameter checks
return a new module's parameter table and its dropout probabilities as read off the module; their
`observe` functions, run by the judge, add the parameter counts up (`with_count`, `_encoder_facts`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..cases import Case
from ..kit import ADD, PARAMS, TORCH_ATTENTION, build, count, load_weights, parameters, run_modes, with_count
from ..runner import Probe, register

#: the keys of the raw reports the parameter checks return
FFN_P = "dropout probability"                          # FeedForward: self.dropout.p
LAYER_P = "dropout probability (self.dropout)"         # EncoderLayer: self.dropout.p
LAYER_FFN_P = "dropout probability (self.ffn.dropout)"  # EncoderLayer: self.ffn.dropout.p
ENCODER_P = "dropout probability of each layer"        # Encoder: [layer.dropout.p for each layer]
AFTER = "parameters after sequences of 3 and 11 positions"  # Encoder: the table after two forward passes
#: the keys of the encoder's forward report
OUT, PERM = "output", "output on the positions permuted"
#: the keys the parameter checks' `observe` adds: the number of parameters the table (PARAMS, AFTER) adds up to
AFTER_COUNT = "number of parameters after sequences of 3 and 11 positions"

_FFN_LAYOUT = ("The module holds linear1 = nn.Linear(d_model, d_ff) and linear2 = nn.Linear(d_ff, d_model), "
               "both with a bias")
_SWIGLU_LAYOUT = ("The module holds w_gate = nn.Linear(d_model, d_ff, bias=False), w_up = nn.Linear(d_model, d_ff, "
                  "bias=False) and w_down = nn.Linear(d_ff, d_model, bias=False)")
_LAYER_LAYOUT = ("The layer holds norm1 and norm2 (LayerNorm(d_model)), self_attn (MultiHeadAttention(d_model, "
                 "num_heads)) and ffn (FeedForward(d_model, d_ff, dropout))")
_ENCODER_LAYOUT = ("The encoder holds layers, an nn.ModuleList of num_layers EncoderLayer(d_model, num_heads, d_ff, "
                   "dropout), and norm, a final LayerNorm(d_model)")


def _encoder_facts(case: Case, raw: dict) -> dict:
    """`observe` of encoder_parameters: the raw report's parameter counts, before the forward passes
    (with the table) and after them (the count only)."""
    facts = with_count(case, {k: v for k, v in raw.items() if k != AFTER})
    return {**facts, AFTER_COUNT: count(raw[AFTER])}


def _forward(module: nn.Module, case: Case) -> dict[str, Any]:
    """{'eval': y, 'train': y'}: forward(x) (with mask=mask where the case has one), y of x's shape."""
    if "mask" in case.kwargs:
        return run_modes(module, lambda m, x, mask: m(x, mask=mask), case.args[0], case.kwargs["mask"])
    return run_modes(module, lambda m, x: m(x), *case.args)


# ------------------------------------------------------- 7.1 FeedForward ---
# meta: d_model, d_ff, and dropout / activation (None: the default, not passed).

def _build_ffn(cls: Any, case: Case) -> nn.Module:
    m = case.meta
    kwargs = {k: m[k] for k in ("dropout", "activation") if m.get(k) is not None}
    return build(cls, m["d_model"], m["d_ff"], **kwargs)


def _run_ffn(cls: Any, case: Case) -> dict[str, Any]:
    module = _build_ffn(cls, case)
    load_weights(module, case.meta["weights"], _FFN_LAYOUT)
    return _forward(module, case)


def _ffn_report(cls: Any, case: Case) -> dict[str, Any]:
    """A new FeedForward's parameter table and self.dropout.p."""
    module = _build_ffn(cls, case)
    return {PARAMS: parameters(module), FFN_P: module.dropout.p}


def _made_ffn(cls: Any, case: Case) -> str:
    """Construct the module (the contract asks for an error, which the call then raises)."""
    _build_ffn(cls, case)
    return "a module was created"


# -------------------------------------------------- 7.2 SwiGLUFeedForward ---

def _run_swiglu(cls: Any, case: Case) -> dict[str, Any]:
    module = build(cls, case.meta["d_model"], case.meta["d_ff"])
    load_weights(module, case.meta["weights"], _SWIGLU_LAYOUT)
    return _forward(module, case)


def _swiglu_report(cls: Any, case: Case) -> dict[str, Any]:
    return {PARAMS: parameters(build(cls, case.meta["d_model"], case.meta["d_ff"]))}


# ------------------------------------------------------ 7.3 EncoderLayer ---
# meta: init = (d_model, num_heads, d_ff), dropout (None: not passed).

def _build_layer(cls: Any, case: Case) -> nn.Module:
    p = case.meta["dropout"]
    return build(cls, *case.meta["init"]) if p is None else build(cls, *case.meta["init"], dropout=p)


def _run_layer(cls: Any, case: Case) -> dict[str, Any]:
    module = _build_layer(cls, case)
    load_weights(module, case.meta["weights"], _LAYER_LAYOUT)
    return _forward(module, case)


def _layer_report(cls: Any, case: Case) -> dict[str, Any]:
    """A new layer's parameter table, self.dropout.p and self.ffn.dropout.p."""
    module = _build_layer(cls, case)
    return {PARAMS: parameters(module), LAYER_P: module.dropout.p, LAYER_FFN_P: module.ffn.dropout.p}


# ----------------------------------------------------------- 7.4 Encoder ---
# meta: init = (num_layers, d_model, num_heads, d_ff); forward: perm, a permutation of the positions.

def permuted(x: torch.Tensor, mask: torch.Tensor | None, perm: torch.Tensor) -> tuple:
    """x (batch, seq, d_model) and its mask with the positions reordered by `perm` (seq,): the keys,
    and the queries where the mask has them ((batch, 1, seq) masks have none)."""
    if mask is not None:
        mask = mask[..., perm] if mask.shape[-2] == 1 else mask[..., perm, :][..., perm]
    return x[:, perm], mask


def _run_encoder(cls: Any, case: Case) -> dict[str, Any]:
    """In each mode: {OUT: the output on x, PERM: the output on x with its positions permuted}."""
    module = build(cls, *case.meta["init"])
    load_weights(module, case.meta["weights"], _ENCODER_LAYOUT)
    perm = case.meta["perm"]

    def both(m: nn.Module, x: torch.Tensor, mask: torch.Tensor | None) -> dict:
        xp, mp = permuted(x, mask, perm)
        if mask is None:
            return {OUT: m(x), PERM: m(xp)}
        return {OUT: m(x, mask=mask), PERM: m(xp, mask=mp)}

    return run_modes(module, both, case.args[0], case.kwargs.get("mask"))


def _encoder_report(cls: Any, case: Case) -> dict[str, Any]:
    """A new encoder's parameter table, the table again after forward passes on the inputs of
    meta['x'] (sequences of two lengths), and each layer's self.dropout.p."""
    p = case.meta["dropout"]
    module = build(cls, *case.meta["init"]) if p is None else build(cls, *case.meta["init"], dropout=p)
    before = parameters(module)
    with torch.no_grad():
        for x in case.meta["x"]:
            module(x)
    return {PARAMS: before, AFTER: parameters(module), ENCODER_P: [layer.dropout.p for layer in module.layers]}


#: the layers' own products: a fused matrix product with the bias is not the exercise (7.1, 7.2)
_NO_ADDMM = ("torch.addmm",)
#: the encoder's final norm is its LayerNorm module (7.4)
_NO_FUNCTIONAL_NORM = ("torch.nn.functional.layer_norm", "torch.layer_norm", *TORCH_ATTENTION)
#: the layer's residual connections are written with `+`, and its sub-layers are the course's: wrapping
#: nn.TransformerEncoderLayer with the weights copied in (`course.twins`) is not the exercise (7.3)
_LAYER_FORBID = (*ADD, *TORCH_ATTENTION)
#: exercise 7.3's layer holds exercise 7.1's network
_ON_FFN = dict(builds_on=("FeedForward",), answer="EncoderLayer")

register(
    Probe("feed_forward.ffn_forward", call=_run_ffn, forbid=_NO_ADDMM),
    Probe("feed_forward.ffn_layers", call=_ffn_report, observe=with_count),
    Probe("feed_forward.ffn_dropout", call=_run_ffn, forbid=_NO_ADDMM),
    Probe("feed_forward.ffn_errors", call=_made_ffn),
    Probe("feed_forward.swiglu_forward", call=_run_swiglu, forbid=_NO_ADDMM),
    Probe("feed_forward.swiglu_layers", call=_swiglu_report, observe=with_count),
    Probe("feed_forward.encoder_layer", call=_run_layer, forbid=_LAYER_FORBID, **_ON_FFN),
    Probe("feed_forward.encoder_layer_parameters", call=_layer_report, observe=with_count, **_ON_FFN),
    Probe("feed_forward.encoder_layer_dropout", call=_run_layer, forbid=_LAYER_FORBID, **_ON_FFN),
    Probe("feed_forward.encoder", call=_run_encoder, forbid=_NO_FUNCTIONAL_NORM, builds_on=("EncoderLayer",),
          answer="Encoder"),
    Probe("feed_forward.encoder_parameters", call=_encoder_report, observe=_encoder_facts,
          builds_on=("EncoderLayer",),
          answer="Encoder"),
)
