"""8.3: Decoder, the stack of layers with its final norm, against nn.TransformerDecoder (and, without
cross-attention, nn.TransformerEncoder given the causal mask); and its layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from course.probing.calls.decoder import DECODER_PS as _P

from .. import kit
from ..framework import NOT_APPLICABLE, Case, Check, Mistake, register
from ..kit import randn
from course.twins import torch_attn_mask
from ._shared import (
    SkeletonDecoder,
    decoder64,
    drawn,
    lengths_for,
    loaded64,
    numeric,
    twin_decoder,
    weights_for,
)

def _case(rng: np.random.Generator, *, n: int, b: int, nt: int, ns: int | None = None, d: int, h: int, ff: int,
          cross: bool = True, pad: bool = True) -> Case:
    s = drawn(rng, {"n": n, "b": b, "nt": nt, "ns": ns, "d": d, "h": h, "ff": ff})  # sizes drawn around the spec's
    n, b, nt, ns, d, ff = s["n"], s["b"], s["nt"], s["ns"], s["d"], s["ff"]
    ns = nt if ns is None else ns
    weights = weights_for(SkeletonDecoder(n, d, h, ff, cross), rng)
    kwargs: dict[str, Any] = {"x": randn(rng, b, nt, d)}
    if cross:
        kwargs["memory"] = randn(rng, b, ns, d)
    tm = kit.causal_mask(nt)
    kwargs["tgt_mask"] = tm + kit.padding_mask(lengths_for(rng, b, nt), nt) if pad else tm
    if cross and pad:
        kwargs["memory_mask"] = kit.padding_mask(lengths_for(rng, b, ns), ns)
    label = (f"Decoder({n}, {d}, {h}, {ff}{'' if cross else ', cross_attention=False'}): " + kit.describe(**kwargs))
    return Case(label, (), kwargs, meta={"config": (n, d, h, ff), "cross": cross, "weights": weights})


def _cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [
        {"n": 2, "b": 2, "nt": 5, "d": 8, "h": 2, "ff": 16},
        {"n": 2, "b": 2, "nt": 4, "d": 8, "h": 2, "ff": 16, "cross": False},
    ] if not hidden else [
        {"n": 3, "b": 2, "nt": 6, "d": 12, "h": 3, "ff": 20},
        {"n": 1, "b": 3, "nt": 4, "ns": 7, "d": 8, "h": 2, "ff": 16},
        {"n": 4, "b": 2, "nt": 5, "ns": 3, "d": 8, "h": 4, "ff": 8, "pad": False},
        {"n": 3, "b": 2, "nt": 5, "d": 8, "h": 2, "ff": 16, "cross": False},
        {"n": 2, "b": 1, "nt": 1, "ns": 2, "d": 8, "h": 1, "ff": 8},
        {"n": 2, "b": 3, "nt": 6, "d": 16, "h": 4, "ff": 16, "cross": False, "pad": False},
    ]
    return [_case(rng, **s) for s in specs]


def _oracle(case: Case) -> Any:
    (n, d, h, ff), cross, kw = case.meta["config"], case.meta["cross"], case.kwargs
    twin = twin_decoder(n, d, h, ff, case.meta["weights"], cross)
    x = kw["x"].double()
    b, nt = x.shape[:2]
    tm = torch_attn_mask(kw["tgt_mask"], b, h, nt, nt)
    with torch.no_grad():
        if not cross:
            return kit.both_modes(twin(x, mask=tm).float())
        mem = kw["memory"].double()
        mm = torch_attn_mask(kw.get("memory_mask"), b, h, nt, mem.shape[1])
        return kit.both_modes(twin(x, mem, tgt_mask=tm, memory_mask=mm).float())


def _manual(case: Case, **knobs: Any) -> Any:
    (n, d, h, ff), cross, kw = case.meta["config"], case.meta["cross"], case.kwargs
    D = loaded64(SkeletonDecoder(n, d, h, ff, cross), case.meta["weights"])
    with torch.no_grad():
        out = decoder64(D, kw["x"].double(), kw["memory"].double() if cross else None, kw["tgt_mask"],
                        kw.get("memory_mask"), **knobs)
    return kit.both_modes(out.float())


_MISTAKES = [
    Mistake("Did you forget the final norm? A pre-LN stack ends with one more LayerNorm (chapter 6): "
            "return self.norm(x) after the last layer.", kit.variant(_manual, final_norm="none")),
    Mistake("Did you apply the final norm after every layer? It comes once, after the last layer; inside the "
            "stack each layer normalises its sub-layers' inputs itself.", kit.variant(_manual, final_norm="every")),
    Mistake("Did you pass the masks on to every layer? Each layer needs tgt_mask and memory_mask.",
            kit.variant(_manual, pass_masks=False)),
    Mistake("Did you feed every layer the decoder's input x instead of the previous layer's output? "
            "x = layer(x, memory, tgt_mask, memory_mask) in a loop.", numeric(kit.variant(_manual, chain=False))),
]

# --------------------------------------------------------------- layout ---

def _layout_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(2, 8, 2, 16, True, None), (3, 8, 2, 16, False, None), (2, 8, 2, 16, True, 0.1)] if not hidden else [
        (1, 12, 3, 20, True, None), (4, 8, 4, 8, True, None), (6, 16, 2, 32, False, None), (2, 6, 1, 6, True, None),
        (3, 8, 2, 16, True, 0.3), (2, 8, 2, 16, False, 0.2)]
    cases = []
    for n, d, h, ff, c, p in specs:
        s = drawn(rng, {"n": n, "d": d, "h": h, "ff": ff, "p": p}, most=8)
        n, d, ff, p = s["n"], s["d"], s["ff"], s["p"]
        cases.append(Case(f"a new Decoder({n}, {d}, {h}, {ff}" + ("" if p is None else f", dropout={p}") +
                          f", cross_attention={c})", (n, d, h, ff),
                          {"cross_attention": c} | ({} if p is None else {"dropout": p})))
    return cases


def _layout(case: Case, shared: bool = False, norm: bool = True, dropout_passed: bool = True) -> Any:
    n = case.args[0]
    if shared and n < 2 or not dropout_passed and "dropout" not in case.kwargs:
        return NOT_APPLICABLE
    table = kit.parameter_table(SkeletonDecoder(*case.args, cross_attention=case.kwargs["cross_attention"]))
    keep = {k: v for k, v in table.items() if (norm or not k.startswith("norm."))
            and not (shared and k.startswith("layers.") and not k.startswith("layers.0."))}
    report = {"parameters": keep, "number of layers": n}
    if "dropout" in case.kwargs:
        report[_P] = [case.kwargs["dropout"] if dropout_passed else 0.0]
    return report


_LAYOUT_MISTAKES = [
    Mistake("Did you put the same layer object in the list num_layers times ([layer] * num_layers)? Each layer "
            "needs its own weights: create a new DecoderLayer for each.", kit.variant(_layout, shared=True)),
    Mistake("Did you forget the final norm? The decoder holds self.norm = LayerNorm(d_model) after its layers.",
            kit.variant(_layout, norm=False)),
    Mistake("Did you pass dropout on to the layers? Each is DecoderLayer(d_model, num_heads, d_ff, dropout, "
            "cross_attention).", kit.variant(_layout, dropout_passed=False)),
]

register(
    __name__,
    Check(name="decoder", cases=_cases, expected=_oracle, mistakes=_MISTAKES,
          hint="x = layer(x, memory, tgt_mask, memory_mask) for each layer in self.layers, then return "
               "self.norm(x). No dropout at p = 0: training and eval mode give the same result."),
    Check(name="decoder_structure", guard=True, cases=_layout_cases, expected=_layout,
          mistakes=_LAYOUT_MISTAKES,
          hint="self.layers = nn.ModuleList of num_layers new DecoderLayer(d_model, num_heads, d_ff, dropout, "
               "cross_attention), self.norm = LayerNorm(d_model); nothing else with parameters."),
)
