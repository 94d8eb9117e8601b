"""Probes for chapter 8: the causal mask, the decoder layer (its dropouts, the no-future property and its
layout), the decoder stack and the full encoder-decoder Transformer.

Every call returns the student's raw outputs: the module's forward passes in both modes (`run_modes`), the
attributes the contract names (``cross_weights``, the ``p`` of its dropouts, the parameter table). What the
answers describe (the first k positions, the shape and ``requires_grad`` of the kept weights, the distinct
dropout probabilities, a meta tensor's summary) the probes' `observe` functions derive from them, in the
judge (outside the sandbox) and in a student's own run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..cases import Case
from ..kit import TORCH_ATTENTION, build, load_weights, parameter_table, run_modes
from ..runner import Probe, register

# ---------------------------------------------------------------- 8.1 mask ---


def tensor_summary(t: torch.Tensor) -> dict:
    """``{"device": "meta", "shape": (n, n), "dtype": "torch.float32"}``: all a tensor on PyTorch's meta
    device has (no values to record)."""
    return {"device": t.device.type, "shape": tuple(t.shape), "dtype": str(t.dtype)}


def on_meta(case: Case) -> bool:
    """Whether the case asks for the mask on the meta device."""
    return torch.device(case.kwargs.get("device") or "cpu").type == "meta"


#: the keys of the two masks recorded where the probe calls twice (``meta["overwrite"]``)
FIRST = "first call"
AGAIN = "second call, after the first call's mask was written over"


def _call_mask(fn: Any, case: Case) -> Any:
    """The mask ``fn(n, dtype=..., device=...)`` returned, (n, n); a meta tensor as its `tensor_summary`.
    With ``meta["overwrite"]``: the first mask (as returned), then, after that value was written into it
    (as a caller may write into a mask it was given), the mask a second call returns, as ``{FIRST: ...,
    AGAIN: ...}``; the first mask is then put back as it was, so that a shared tensor changes no other case."""
    out = fn(*case.args, **case.kwargs)
    if isinstance(out, torch.Tensor) and out.is_meta:
        return tensor_summary(out)
    value = case.meta.get("overwrite")
    if value is None or not isinstance(out, torch.Tensor):
        return out
    first = out.clone()
    out.fill_(value)
    try:
        again = fn(*case.args, **case.kwargs)
        again = again.clone() if isinstance(again, torch.Tensor) else again
    finally:
        out.copy_(first)
    return {FIRST: first, AGAIN: again}


def _observe_mask(case: Case, raw: Any) -> Any:
    """The mask as it came back; on a meta-device case, its summary, where a tensor that came back with
    values (an array here, not a meta tensor) counts as made on the CPU, whatever `device` said."""
    if on_meta(case) and isinstance(raw, np.ndarray):
        return tensor_summary(torch.from_numpy(raw))
    return raw


# ------------------------------------------------------------- 8.2 layer ---

LAYER_WHY = ("The layer holds norm1, self_attn, norm2, cross_attn, norm3 and ffn (no norm2 and cross_attn without "
             "cross-attention): LayerNorm(d_model), MultiHeadAttention(d_model, num_heads) and "
             "FeedForward(d_model, d_ff) from chapters 5-7")


def _build_layer(cls: Any, case: Case, **kwargs: Any) -> nn.Module:
    """DecoderLayer(*meta["config"], cross_attention=meta["cross"], **kwargs) holding the case's weights."""
    module = build(cls, *case.meta["config"], cross_attention=case.meta["cross"], **kwargs)
    load_weights(module, case.meta["weights"], LAYER_WHY)
    return module


def _call_layer(cls: Any, case: Case) -> dict:
    """Both modes: {"output": (batch, n_tgt, d_model), "cross_weights": what the layer kept (None without
    cross-attention)}."""
    def forward(m: Any, kw: dict) -> dict:
        out = m(**kw)
        return {"output": out, "cross_weights": m.cross_weights}
    return run_modes(_build_layer(cls, case), forward, case.kwargs)


def _call_future(cls: Any, case: Case) -> dict:
    """Both modes: (output on x, output on meta["changed"]), each (batch, n_tgt, d_model)."""
    def forward(m: Any, kw: dict) -> tuple:
        return m(**kw), m(**{**kw, "x": case.meta["changed"]})
    return run_modes(_build_layer(cls, case), forward, case.kwargs)


def _observe_future(case: Case, raw: dict) -> dict:
    """Both outputs in each mode, cut to the positions before meta["k"]: (batch, k, d_model)."""
    k = case.meta["k"]
    return {mode: tuple(out[:, :k] for out in outputs) for mode, outputs in raw.items()}


def _call_dropout(cls: Any, case: Case) -> dict:
    """Both modes of DecoderLayer(..., dropout=meta["p"]): the outputs (batch, n_tgt, d_model)."""
    return run_modes(_build_layer(cls, case, dropout=case.meta["p"]), lambda m, kw: m(**kw), case.kwargs)


#: the key of the kept cross-attention weights' facts in the layout report
CROSS_WEIGHTS_AFTER = "cross_weights after a forward pass (with gradients on)"


def _call_layer_layout(cls: Any, case: Case) -> dict:
    """A new DecoderLayer(*args, **kwargs): its parameter table, ``self.dropout.p``, ``cross_weights``
    before any forward pass, and (with cross-attention) ``cross_weights`` after one pass with autograd on,
    with its ``requires_grad`` (which the recorded values lose)."""
    module = build(cls, *case.args, **case.kwargs)
    report = {"parameters": parameter_table(module), "dropout.p": module.dropout.p,
              "cross_weights": module.cross_weights}
    if case.kwargs["cross_attention"]:
        d = case.args[0]
        module(torch.ones(1, 2, d), torch.ones(1, 3, d))
        w = module.cross_weights
        report["cross_weights after"] = {"value": w, "requires_grad": w.requires_grad}
    return report


def _observe_layer_layout(case: Case, raw: dict) -> dict:
    """The layout report: the parameter table, dropout.p as a float, cross_weights before any pass and,
    with cross-attention, the shape and requires_grad of the weights one pass kept (they must be detached)."""
    facts = {"parameters": raw["parameters"], "dropout.p": float(raw["dropout.p"]),
             "cross_weights": raw["cross_weights"]}
    if case.kwargs["cross_attention"]:
        after = raw["cross_weights after"]
        facts[CROSS_WEIGHTS_AFTER] = {"shape": list(after["value"].shape),
                                      "requires_grad": bool(after["requires_grad"])}
    return facts


# ------------------------------------------------------------ 8.3 decoder ---

DECODER_WHY = ("The decoder holds `layers`, an nn.ModuleList of num_layers DecoderLayers, and `norm`, the final "
               "LayerNorm(d_model)")


#: the key of the decoder's dropout probabilities in its layout report
DECODER_PS = "the dropout probabilities of its nn.Dropout modules"


def dropout_ps(module: nn.Module) -> list:
    """The ``p`` of every nn.Dropout module `module` holds, in the order of ``module.modules()``."""
    return [m.p for m in module.modules() if isinstance(m, nn.Dropout)]


def distinct_ps(ps: list) -> list[float]:
    """The distinct probabilities among the recorded `dropout_ps`, sorted."""
    return sorted({float(p) for p in ps})


def _call_decoder(cls: Any, case: Case) -> dict:
    """Both modes of Decoder(*meta["config"], cross_attention=meta["cross"]): (batch, n_tgt, d_model)."""
    n, d, h, ff = case.meta["config"]
    module = build(cls, n, d, h, ff, cross_attention=case.meta["cross"])
    load_weights(module, case.meta["weights"], DECODER_WHY)
    return run_modes(module, lambda m, kw: m(**kw), case.kwargs)


def _call_decoder_layout(cls: Any, case: Case) -> dict:
    """A new Decoder(*args, **kwargs): its parameter table, ``len(layers)`` and, when the case sets
    dropout, the `dropout_ps` of its modules."""
    module = build(cls, *case.args, **case.kwargs)
    report = {"parameters": parameter_table(module), "number of layers": len(module.layers)}
    if "dropout" in case.kwargs:
        report["dropout ps"] = dropout_ps(module)
    return report


def _observe_decoder_layout(case: Case, raw: dict) -> dict:
    """The layout report, with the modules' dropout probabilities as `distinct_ps`."""
    facts = {"parameters": raw["parameters"], "number of layers": raw["number of layers"]}
    if "dropout" in case.kwargs:
        facts[DECODER_PS] = distinct_ps(raw["dropout ps"])
    return facts


# -------------------------------------------------------- 8.4 transformer ---

TRANSFORMER_WHY = ("The model holds `encoder`, chapter 7's Encoder(num_encoder_layers, d_model, num_heads, d_ff, "
                   "dropout), and `decoder`, your Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout)")


#: the key of the dropout probabilities in the encode/decode report
TRANSFORMER_PS = "the dropout probabilities of the nn.Dropout modules of the same Transformer built with dropout=0.25"


def _build_transformer(cls: Any, case: Case) -> nn.Module:
    module = build(cls, *case.meta["config"])
    load_weights(module, case.meta["weights"], TRANSFORMER_WHY)
    return module


def _call_transformer(cls: Any, case: Case) -> dict:
    """Both modes of model(src, tgt, ...): (batch, n_tgt, d_model)."""
    return run_modes(_build_transformer(cls, case), lambda m, kw: m(**kw), case.kwargs)


def _call_parts(cls: Any, case: Case) -> dict:
    """Both modes: encode(src, src_mask) (batch, n_src, d_model), decode(tgt, meta["memory"], tgt_mask,
    memory_mask) (batch, n_tgt, d_model), the parameter table, and the `dropout_ps` of the same model built
    with dropout=0.25."""
    module, kw = _build_transformer(cls, case), case.kwargs

    def forward(m: Any, memory: torch.Tensor) -> dict:
        with_dropout = build(cls, *case.meta["config"], dropout=0.25)
        return {"encode": m.encode(kw["src"], kw.get("src_mask")),
                "decode": m.decode(kw["tgt"], memory, kw.get("tgt_mask"), kw.get("memory_mask")),
                "parameters": parameter_table(m), "dropout ps": dropout_ps(with_dropout)}
    return run_modes(module, forward, case.meta["memory"])


def _observe_parts(case: Case, raw: dict) -> dict:
    """The report in each mode, with the dropout-0.25 model's dropout probabilities as `distinct_ps`."""
    return {mode: {"encode": r["encode"], "decode": r["decode"], "parameters": r["parameters"],
                   TRANSFORMER_PS: distinct_ps(r["dropout ps"])} for mode, r in raw.items()}


#: the layers are built from the course's sub-layers: wrapping nn.TransformerDecoderLayer or nn.Transformer
#: with the weights copied in (`course.twins`) is not the exercise
_NO_TORCH = dict(forbid=TORCH_ATTENTION)
#: exercise 8.4's model holds exercise 8.3's decoder
_ON_DECODER = dict(builds_on=("Decoder",), answer="Transformer", **_NO_TORCH)

register(
    Probe("decoder.causal_mask", call=_call_mask, observe=_observe_mask,
          forbid=("torch.nn.Transformer.generate_square_subsequent_mask",)),
    Probe("decoder.decoder_layer", call=_call_layer, **_NO_TORCH),
    Probe("decoder.decoder_layer_no_future", call=_call_future, observe=_observe_future, **_NO_TORCH),
    Probe("decoder.decoder_only_layer", call=_call_layer, **_NO_TORCH),
    Probe("decoder.decoder_layer_structure", call=_call_layer_layout, observe=_observe_layer_layout, **_NO_TORCH),
    Probe("decoder.decoder_layer_dropout", call=_call_dropout, **_NO_TORCH),
    Probe("decoder.decoder", call=_call_decoder, builds_on=("DecoderLayer",), answer="Decoder", **_NO_TORCH),
    Probe("decoder.decoder_structure", call=_call_decoder_layout, observe=_observe_decoder_layout,
          builds_on=("DecoderLayer",), answer="Decoder", **_NO_TORCH),
    Probe("decoder.transformer", call=_call_transformer, **_ON_DECODER),
    Probe("decoder.transformer_encode_decode", call=_call_parts, observe=_observe_parts, **_ON_DECODER),
)
