"""8.2: DecoderLayer: its forward pass against nn.TransformerDecoderLayer (and, without cross-attention,
nn.TransformerEncoderLayer given the causal mask), the no-future property, and its layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from course.probing.calls.decoder import CROSS_WEIGHTS_AFTER as _AFTER

from .. import kit
from ..framework import Case, Check, Mistake, register
from ..kit import randn
from course.twins import torch_attn_mask
from ._shared import (
    SkeletonLayer,
    drawn,
    layer64,
    lengths_for,
    loaded64,
    numeric,
    twin_layer,
    weights_for,
)

def layer_case(rng: np.random.Generator, *, b: int, nt: int, ns: int | None = None, d: int, h: int, ff: int,
               cross: bool = True, tgt: str = "causal+padding", mem: str | None = "padding",
               memory_given: bool | None = None) -> Case:
    """DecoderLayer(d, h, ff, cross_attention=cross); kwargs: what forward gets. tgt: 'causal' (n_tgt, n_tgt),
    'causal+padding' (batch, n_tgt, n_tgt) or 'none'; mem: 'padding' (batch, 1, n_src), None, or 'padding only'
    (a memory_mask (batch, 1, n_src) without memory, for a decoder-only layer, which ignores it). The sizes are
    `drawn` around the given ones (n_src = n_tgt where ns is None)."""
    memory_given = cross if memory_given is None else memory_given
    s = drawn(rng, {"b": b, "nt": nt, "ns": ns, "d": d, "h": h, "ff": ff})
    b, nt, ns, d, ff = s["b"], s["nt"], s["ns"], s["d"], s["ff"]
    ns = nt if ns is None else ns
    weights = weights_for(SkeletonLayer(d, h, ff, cross), rng)
    kwargs: dict[str, Any] = {"x": randn(rng, b, nt, d)}
    if memory_given:
        kwargs["memory"] = randn(rng, b, ns, d)
    if tgt != "none":
        m = kit.causal_mask(nt)
        kwargs["tgt_mask"] = m + kit.padding_mask(lengths_for(rng, b, nt), nt) if "padding" in tgt else m
    if memory_given and mem == "padding" or mem == "padding only":
        kwargs["memory_mask"] = kit.padding_mask(lengths_for(rng, b, ns), ns)
    label = (f"DecoderLayer({d}, {h}, {ff}{'' if cross else ', cross_attention=False'}): "
             + kit.describe(**{k: v for k, v in kwargs.items()})
             + {"causal+padding": " (causal + target padding)", "causal": " (causal)", "none": ""}[tgt])
    return Case(label, (), kwargs, meta={"config": (d, h, ff), "cross": cross, "weights": weights})


def _oracle(case: Case) -> Any:
    """nn.TransformerDecoderLayer (float64) with the case's weights; the cross-attention weights from its
    own sub-modules, run in the same order."""
    kw, (d, h, ff), cross = case.kwargs, case.meta["config"], case.meta["cross"]
    if cross != ("memory" in kw):
        return kit.raises("memory is required with cross-attention and refused without it")
    x = kw["x"].double()
    b, nt = x.shape[:2]
    twin = twin_layer(d, h, ff, case.meta["weights"], cross)
    tm = torch_attn_mask(kw.get("tgt_mask"), b, h, nt, nt)
    with torch.no_grad():
        if not cross:
            return kit.both_modes({"output": twin(x, src_mask=tm).float(), "cross_weights": None})
        mem = kw["memory"].double()
        mm = torch_attn_mask(kw.get("memory_mask"), b, h, nt, mem.shape[1])
        out = twin(x, mem, tgt_mask=tm, memory_mask=mm)
        h1 = twin.norm1(x)
        x1 = x + twin.self_attn(h1, h1, h1, attn_mask=tm)[0]
        w = twin.multihead_attn(twin.norm2(x1), mem, mem, attn_mask=mm, average_attn_weights=False)[1]
    return kit.both_modes({"output": out.float(), "cross_weights": w.float()})


def _manual(case: Case, **knobs: Any) -> Any:
    """`layer64` on the case, in the form the probe returns."""
    kw, cross = case.kwargs, case.meta["cross"]
    if cross != ("memory" in kw):
        return kit.raises("memory")
    L = loaded64(SkeletonLayer(*case.meta["config"], cross_attention=cross), case.meta["weights"])
    weights: list = []
    with torch.no_grad():
        out = layer64(L, kw["x"].double(), kw["memory"].double() if cross else None, kw.get("tgt_mask"),
                      kw.get("memory_mask"), weights=weights, **knobs)
    return kit.both_modes({"output": out.float(), "cross_weights": weights[-1].float() if weights else None})


def _slip(**knobs: Any) -> Any:
    return numeric(kit.variant(_manual, **knobs))


def _refused(case: Case) -> Any:
    """A ValueError where the contract asks for none."""
    raise ValueError("refused")


LEAK = ("Did you pass tgt_mask to the self-attention? Without the causal mask every position also attends to "
        "later ones: the future leaks into earlier outputs.")
_SKIP = ("Did you skip a residual connection? Every sub-layer's output is added to its input: "
         "x = x + sublayer(norm(x)).")
_ORDER = "Are the sub-layers in the right order? Self-attention first, then cross-attention, then the FFN."
SELF_MISTAKES = [
    Mistake(LEAK, _slip(self_mask="none")),
    Mistake("Did you build a causal mask yourself and ignore tgt_mask? The caller's tgt_mask also hides the "
            "target's padding: pass it to the self-attention as it is.", _slip(self_mask="causal")),
    Mistake("Did you wire the sub-layers post-LN, norm(x + sublayer(x))? The course's layers are pre-LN "
            "(chapter 6): x + sublayer(norm(x)).", _slip(post_ln=True)),
    Mistake("Did you skip the residual connections? Every sub-layer's output is added to its input: "
            "x = x + sublayer(norm(x)).", _slip(skip=("self", "cross", "ffn"))),
    Mistake(_SKIP, _slip(skip=("self",))),
    Mistake(_SKIP, _slip(skip=("ffn",))),
]
CROSS_MISTAKES = [
    Mistake("Did you give the self-attention the source's padding mask (memory_mask)? Self-attention takes "
            "tgt_mask (causal + target padding); memory_mask belongs to cross-attention.",
            _slip(self_mask="memory")),
    Mistake("Did you put the causal mask (tgt_mask) into the cross-attention? Every target position may look at "
            "the whole source: cross-attention takes memory_mask (the source's padding) only.",
            _slip(cross_mask="tgt")),
    Mistake("Did you forget memory_mask in the cross-attention? The source's padding must stay hidden from the "
            "decoder: cross_attn(h, memory, memory, mask=memory_mask).", _slip(cross_mask="none")),
    Mistake("Did you take the queries from the encoder (memory) and the keys and values from the decoder? It is "
            "the other way round: each target position asks (query) what the source holds (keys, values), "
            "cross_attn(norm2(x), memory, memory).", _slip(q_from="encoder")),
    Mistake(_SKIP, _slip(skip=("cross",))),
    Mistake(_ORDER, _slip(order=("cross", "self", "ffn"))),
    Mistake(_ORDER, _slip(order=("self", "ffn", "cross"))),
    Mistake("Did you reuse norm1 before the cross-attention? Each sub-layer has its own norm: norm1 before "
            "self-attention, norm2 before cross-attention, norm3 before the FFN.", _slip(cross_norm="norm1")),
]
_HINT = ("Pre-LN, three sub-layers: x = x + dropout(self_attn(norm1(x), mask=tgt_mask)); then x = x + "
         "dropout(cross_attn(norm2(x), memory, memory, mask=memory_mask)) (keep its weights in "
         "self.cross_weights); then x + dropout(ffn(norm3(x))). No dropout at p = 0: "
         + kit.same_in_both_modes("layer"))


def _cross_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [
        {"b": 2, "nt": 5, "d": 8, "h": 2, "ff": 16},
        {"b": 2, "nt": 4, "ns": 6, "d": 8, "h": 2, "ff": 12},
    ] if not hidden else [
        {"b": 3, "nt": 6, "d": 12, "h": 3, "ff": 20},
        {"b": 2, "nt": 5, "d": 8, "h": 4, "ff": 16, "tgt": "causal"},
        {"b": 2, "nt": 4, "ns": 7, "d": 16, "h": 4, "ff": 24},
        {"b": 4, "nt": 3, "ns": 2, "d": 8, "h": 2, "ff": 8, "mem": None},
        {"b": 1, "nt": 1, "ns": 5, "d": 8, "h": 1, "ff": 16},
        {"b": 2, "nt": 7, "d": 8, "h": 2, "ff": 16, "mem": None},
        {"b": 2, "nt": 3, "ns": 4, "d": 8, "h": 2, "ff": 16, "tgt": "none", "mem": None},
        {"b": 2, "nt": 4, "d": 8, "h": 2, "ff": 16, "memory_given": False},
        {"b": 2, "nt": 4, "ns": 5, "d": 8, "h": 2, "ff": 16, "tgt": "none"},  # tgt_mask left out, memory_mask given
    ]
    return [layer_case(rng, **s) for s in specs]


def _self_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [{"b": 2, "nt": 5, "d": 8, "h": 2, "ff": 16}] if not hidden else [
        {"b": 3, "nt": 6, "d": 12, "h": 3, "ff": 20},
        {"b": 2, "nt": 4, "d": 8, "h": 4, "ff": 16, "tgt": "causal"},
        {"b": 1, "nt": 1, "d": 8, "h": 2, "ff": 8},
        {"b": 2, "nt": 3, "d": 8, "h": 2, "ff": 16, "memory_given": True},
        # a memory_mask alone, which a decoder-only layer ignores; as long as the target, so that a layer that
        # used it in its self-attention would give other numbers, not a shape error
        {"b": 3, "nt": 5, "d": 8, "h": 2, "ff": 16, "mem": "padding only"},
    ]
    return [layer_case(rng, cross=False, **s) for s in specs]


# -------------------------------------------------------------- no future ---

def _future_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [{"b": 2, "nt": 6, "d": 8, "h": 2, "ff": 16}] if not hidden else [
        {"b": 3, "nt": 7, "ns": 4, "d": 12, "h": 3, "ff": 20},
        {"b": 2, "nt": 5, "d": 8, "h": 2, "ff": 16, "cross": False},
        {"b": 2, "nt": 8, "ns": 8, "d": 16, "h": 4, "ff": 16, "tgt": "causal"},
    ]
    cases = []
    for s in specs:
        case = layer_case(rng, **s)
        x = case.kwargs["x"]
        # k no further than every sequence's real tokens: the rows compared are never padding, whose
        # handling decoder_layer judges (here only the future may not leak)
        mask = case.kwargs.get("tgt_mask")
        real = x.shape[1] if mask is None or mask.dim() == 2 else int(torch.isfinite(mask[:, -1]).sum(-1).min())
        k = int(rng.integers(1, max(min(real, x.shape[1] - 1), 1) + 1))
        changed = x.clone()
        changed[:, k:] = randn(rng, x.shape[0], x.shape[1] - k, x.shape[2])
        case.meta["k"], case.meta["changed"] = k, changed
        case.label += f"; positions {k}.. then replaced by other tokens"
        cases.append(case)
    return cases


def _future(case: Case, **knobs: Any) -> Any:
    k = case.meta["k"]
    first = (_oracle if not knobs else _manual)(case, **knobs)["eval"]["output"][:, :k]
    changed = Case(case.label, (), {**case.kwargs, "x": case.meta["changed"]}, case.meta)
    second = (_oracle if not knobs else _manual)(changed, **knobs)["eval"]["output"][:, :k]
    return kit.both_modes((first, second))


# ---------------------------------------------------------------- layout ---

def _layout_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(8, 2, 16, 0.0, True), (8, 2, 16, 0.0, False)] if not hidden else [
        (12, 3, 20, 0.1, True), (16, 4, 64, 0.0, False), (6, 1, 6, 0.25, True), (512, 8, 2048, 0.1, True)]
    cases = []
    for d, h, ff, p, c in specs:
        s = drawn(rng, {"d": d, "h": h, "ff": ff, "p": p}, most=8)
        d, ff, p = s["d"], s["ff"], s["p"]
        cases.append(Case(f"a new DecoderLayer({d}, {h}, {ff}, dropout={p}, cross_attention={c})", (d, h, ff),
                          {"dropout": p, "cross_attention": c}))
    return cases


def _layout(case: Case, drop: tuple[str, ...] = (), detached: bool = True) -> dict:
    d, h, ff = case.args
    table = kit.parameter_table(SkeletonLayer(d, h, ff, cross_attention=case.kwargs["cross_attention"]))
    report = {"parameters": {n: v for n, v in table.items() if not n.startswith(drop)},
              "dropout.p": float(case.kwargs["dropout"]), "cross_weights": None}
    if case.kwargs["cross_attention"]:
        report[_AFTER] = {"shape": [1, h, 2, 3], "requires_grad": not detached}
    return report


def _not_detached(case: Case) -> Any:
    return _layout(case, detached=False) if case.kwargs["cross_attention"] else kit.NOT_APPLICABLE


def _kept_cross(case: Case) -> Any:
    if case.kwargs["cross_attention"]:
        return kit.NOT_APPLICABLE
    d, h, ff = case.args
    return {**_layout(case), "parameters": kit.parameter_table(SkeletonLayer(d, h, ff, True))}


_LAYOUT_MISTAKES = [
    Mistake("Did you keep cross_attn and norm2 in a decoder-only layer? With cross_attention=False the layer "
            "has no cross_attn and no norm2 (only norm1, self_attn, norm3, ffn).", _kept_cross),
    Mistake("Did you detach the cross-attention weights you keep? self.cross_weights = weights.detach(): "
            "kept with their graph, they hold on to the whole forward pass's memory.", _not_detached),
    Mistake("Did you leave out norm3? Each sub-layer has its own LayerNorm: norm1, norm2 (with cross-attention) "
            "and norm3.", kit.variant(_layout, drop=("norm3.",))),
]

register(
    __name__,
    Check(name="decoder_layer", cases=_cross_cases, expected=_oracle,
          mistakes=[*SELF_MISTAKES, *CROSS_MISTAKES], hint=_HINT + " Raise ValueError when memory is missing "
          "(with cross-attention) or given (without)."),
    Check(name="decoder_layer_no_future", cases=_future_cases, expected=_future,
          mistakes=[Mistake(LEAK, kit.variant(_future, self_mask="none")),
                    Mistake("Did you put the causal mask into the cross-attention instead of the self-attention?",
                            numeric(kit.variant(_future, self_mask="none", cross_mask="tgt")))],
          hint="The outputs at positions before k must not change when the tokens at k and after change: "
               "pass tgt_mask to the self-attention."),
    Check(name="decoder_only_layer", cases=_self_cases, expected=_oracle,
          mistakes=[*SELF_MISTAKES,
                    Mistake("Did you refuse a memory_mask in a layer without cross-attention? Only memory is refused "
                            "there (ValueError); a memory_mask has nothing to mask and is ignored.",
                            kit.unless(lambda c: "memory_mask" in c.kwargs and "memory" not in c.kwargs,
                                       _refused))],
          hint="With cross_attention=False: x = x + dropout(self_attn(norm1(x), mask=tgt_mask)), then "
               "x + dropout(ffn(norm3(x))); self.cross_weights stays None; memory must not be given "
               "(ValueError); a memory_mask is ignored."),
    Check(name="decoder_layer_structure", guard=True, cases=_layout_cases, expected=_layout,
          mistakes=_LAYOUT_MISTAKES,
          hint="norm1, self_attn, norm2, cross_attn, norm3: LayerNorm(d_model) and MultiHeadAttention(d_model, "
               "num_heads) (no norm2 and cross_attn when cross_attention=False); ffn = FeedForward(d_model, d_ff, "
               "dropout); self.dropout = nn.Dropout(dropout); self.cross_weights = None until a forward pass."),
)
