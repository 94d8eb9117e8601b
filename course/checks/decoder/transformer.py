"""8.4: Transformer, the encoder-decoder: forward, encode and decode against nn.Transformer(norm_first=True,
batch_first=True) with the same weights, source and target padding included; and its layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from course.probing.calls.decoder import TRANSFORMER_PS as _P

from .. import kit
from ..framework import NOT_APPLICABLE, Case, Check, Mistake, register
from ..kit import randn
from course.twins import torch_attn_mask
from ._shared import (
    SkeletonTransformer,
    decoder64,
    drawn,
    lengths_for,
    loaded64,
    numeric,
    twin_transformer,
    weights_for,
)

def _case(rng: np.random.Generator, *, b: int, ns: int, nt: int, d: int, h: int, ne: int, nd: int, ff: int,
          masks: str = "padding") -> Case:
    """masks: 'padding' (source padding as src_mask and memory_mask (batch, 1, n_src); causal + target
    padding as tgt_mask), 'causal' (tgt_mask (n_tgt, n_tgt) only), 'src only' / 'memory only' (as 'padding'
    with memory_mask / src_mask left out: a default must not be borrowed from the other). The sizes are `drawn`
    around the given ones."""
    s = drawn(rng, {"b": b, "ns": ns, "nt": nt, "d": d, "h": h, "ne": ne, "nd": nd, "ff": ff})
    b, ns, nt, d, ne, nd, ff = (s[k] for k in ("b", "ns", "nt", "d", "ne", "nd", "ff"))
    weights = weights_for(SkeletonTransformer(d, h, ne, nd, ff), rng)
    kwargs: dict[str, Any] = {"src": randn(rng, b, ns, d), "tgt": randn(rng, b, nt, d)}
    if masks != "causal":
        src_pad = kit.padding_mask(lengths_for(rng, b, ns), ns)
        kwargs["src_mask"] = src_pad
        kwargs["tgt_mask"] = kit.causal_mask(nt) + kit.padding_mask(lengths_for(rng, b, nt), nt)
        kwargs["memory_mask"] = src_pad
        kwargs.pop({"src only": "memory_mask", "memory only": "src_mask"}.get(masks, ""), None)
    else:
        kwargs["tgt_mask"] = kit.causal_mask(nt)
    label = (f"Transformer({d}, {h}, {ne}, {nd}, {ff}): " + kit.describe(**kwargs)
             + {"padding": " (source padding; causal + target padding)", "causal": " (causal tgt_mask only)",
                "src only": " (source padding as src_mask only, memory_mask left out; causal + target padding)",
                "memory only": " (source padding as memory_mask only, src_mask left out; causal + target padding)"}[
                 masks])
    return Case(label, (), kwargs, meta={"config": (d, h, ne, nd, ff), "weights": weights})


def _cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [{"b": 2, "ns": 6, "nt": 5, "d": 8, "h": 2, "ne": 2, "nd": 2, "ff": 16}] if not hidden else [
        {"b": 3, "ns": 7, "nt": 5, "d": 12, "h": 3, "ne": 2, "nd": 3, "ff": 20},
        {"b": 2, "ns": 4, "nt": 4, "d": 8, "h": 2, "ne": 1, "nd": 1, "ff": 16},
        {"b": 2, "ns": 3, "nt": 6, "d": 8, "h": 4, "ne": 3, "nd": 2, "ff": 8},
        {"b": 2, "ns": 5, "nt": 5, "d": 16, "h": 4, "ne": 2, "nd": 2, "ff": 32, "masks": "causal"},
        {"b": 1, "ns": 2, "nt": 1, "d": 8, "h": 1, "ne": 1, "nd": 2, "ff": 8},
        {"b": 2, "ns": 6, "nt": 4, "d": 8, "h": 2, "ne": 1, "nd": 1, "ff": 16, "masks": "src only"},
        {"b": 2, "ns": 5, "nt": 3, "d": 8, "h": 2, "ne": 1, "nd": 1, "ff": 16, "masks": "memory only"},
    ]
    return [_case(rng, **s) for s in specs]


def _twin_masks(case: Case) -> dict:
    kw, (_d, h, *_) = case.kwargs, case.meta["config"]
    b, ns, nt = kw["src"].shape[0], kw["src"].shape[1], kw["tgt"].shape[1]
    return {"src_mask": torch_attn_mask(kw.get("src_mask"), b, h, ns, ns),
            "tgt_mask": torch_attn_mask(kw.get("tgt_mask"), b, h, nt, nt),
            "memory_mask": torch_attn_mask(kw.get("memory_mask"), b, h, nt, ns)}


def _oracle(case: Case) -> Any:
    twin = twin_transformer(*case.meta["config"], case.meta["weights"])
    with torch.no_grad():
        out = twin(case.kwargs["src"].double(), case.kwargs["tgt"].double(), **_twin_masks(case))
    return kit.both_modes(out.float())


def _manual(case: Case, *, src_mask: bool = True, memory_mask: str = "memory", encoder: bool = True,
            borrow: bool = False, **knobs: Any) -> Any:
    """The model in float64 (chapter 7's Encoder, `decoder64`); knobs: `src_mask=False` (the encoder gets no
    mask), `memory_mask` ('memory', 'none'), `encoder=False` (the decoder attends to src itself), `borrow`
    (a mask left out replaced by the other one given)."""
    kw = case.kwargs
    if borrow:
        if ("src_mask" in kw) == ("memory_mask" in kw):
            return NOT_APPLICABLE
        kw = {**kw, "src_mask": kw.get("src_mask", kw.get("memory_mask")),
              "memory_mask": kw.get("memory_mask", kw.get("src_mask"))}
    M = loaded64(SkeletonTransformer(*case.meta["config"]), case.meta["weights"])
    with torch.no_grad():
        src = kw["src"].double()
        m = kw.get("src_mask")
        memory = M.encoder(src, None if m is None or not src_mask else m.double()) if encoder else src
        mm = kw.get("memory_mask") if memory_mask == "memory" else None
        out = decoder64(M.decoder, kw["tgt"].double(), memory, kw.get("tgt_mask"), mm, **knobs)
    return kit.both_modes(out.float())


_MISTAKES = [
    Mistake("Did you pass src_mask to the encoder? The source's padding must be hidden from its self-attention: "
            "memory = self.encoder(src, src_mask).", kit.variant(_manual, src_mask=False)),
    Mistake("Did you pass memory_mask on to the decoder? The source's padding must stay hidden from the "
            "cross-attention too.", kit.variant(_manual, memory_mask="none")),
    Mistake("Did you give the decoder the source itself instead of the encoder's output? memory = "
            "self.encode(src, src_mask), then decode(tgt, memory, ...).", numeric(kit.variant(_manual, encoder=False))),
    Mistake("Did you fill in a mask that was left out with the other one? src_mask and memory_mask are separate "
            "arguments, each None (no mask) unless given: do not borrow memory_mask from src_mask or the other "
            "way round.", kit.variant(_manual, borrow=True)),
    Mistake("Did you forget the decoder's final norm? The output of decode is self.decoder's, which ends with "
            "its LayerNorm.", kit.variant(_manual, final_norm="none")),
]

# ---------------------------------------------------------- encode, decode ---

def _parts_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    cases = _cases(rng, hidden)
    for case in cases:
        src = case.kwargs["src"]
        case.meta["memory"] = randn(rng, *src.shape)
        case.label = case.label.replace("Transformer", "encode(src, src_mask), decode(tgt, memory, ...) of "
                                        "Transformer", 1) + ", memory " + kit.shape_of(src)
    return cases


def _parts(case: Case, **knobs: Any) -> Any:
    (d, h, ne, nd, ff), kw = case.meta["config"], case.kwargs
    masks = _twin_masks(case)
    if knobs:
        M = loaded64(SkeletonTransformer(d, h, ne, nd, ff), case.meta["weights"])
        with torch.no_grad():
            m = kw.get("src_mask")
            enc = M.encoder(kw["src"].double(), None if m is None or knobs.get("src_mask") is False else m.double())
            dec = decoder64(M.decoder, kw["tgt"].double(), case.meta["memory"].double(), kw.get("tgt_mask"),
                            kw.get("memory_mask") if knobs.get("memory_mask") != "none" else None)
    else:
        twin = twin_transformer(d, h, ne, nd, ff, case.meta["weights"])
        with torch.no_grad():
            enc = twin.encoder(kw["src"].double(), mask=masks["src_mask"])
            dec = twin.decoder(kw["tgt"].double(), case.meta["memory"].double(), tgt_mask=masks["tgt_mask"],
                               memory_mask=masks["memory_mask"])
    table = kit.parameter_table(SkeletonTransformer(d, h, ne, nd, ff))
    ps = [0.25] if knobs.get("dropout_passed", True) else [0.0, 0.25]
    return kit.both_modes({"encode": enc.float(), "decode": dec.float(), "parameters": table, _P: ps})


register(
    __name__,
    Check(name="transformer", cases=_cases, expected=_oracle, mistakes=_MISTAKES,
          hint="forward(src, tgt, src_mask, tgt_mask, memory_mask) = decode(tgt, encode(src, src_mask), tgt_mask, "
               "memory_mask); encode runs self.encoder, decode runs self.decoder. No dropout at p = 0."),
    Check(name="transformer_encode_decode", cases=_parts_cases, expected=_parts,
          mistakes=[Mistake(_MISTAKES[0].hint, kit.variant(_parts, src_mask=False)),
                    Mistake(_MISTAKES[1].hint, kit.variant(_parts, memory_mask="none")),
                    Mistake("Did you pass dropout on? The model holds Encoder(num_encoder_layers, d_model, num_heads, "
                            "d_ff, dropout) and Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout).",
                            kit.variant(_parts, dropout_passed=False))],
          hint="encode(src, src_mask) returns self.encoder(src, src_mask); decode(tgt, memory, tgt_mask, "
               "memory_mask) returns self.decoder(tgt, memory, tgt_mask, memory_mask). The model holds exactly "
               "encoder.* and decoder.* parameters."),
)
