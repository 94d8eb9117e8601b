"""7.4: the `Encoder`, num_layers pre-LN layers and a final LayerNorm: its forward pass against
``nn.TransformerEncoder`` (the layers of `encoder_layer`'s twin and a final ``nn.LayerNorm``) with the
weights copied in, including the outputs on permuted positions (they must be the outputs, permuted
the same way), and a new encoder's parameters (none depends on the sequence length). Mistakes are
`_stacked`, the stack recomposed from the twin's own layers with knobs."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from course.probing.calls.feed_forward import AFTER_COUNT, ENCODER_P, OUT, PERM, permuted
from course.probing.kit import COUNT, PARAMS, count

from .. import kit
from ..framework import Case, Check, Mistake, register
from ..kit import randn, variant
from course.twins import torch_attn_mask
from ._shared import (
    drawn,
    encoder_weights,
    layer_table,
    make_mask,
    mask_label,
    run_twin,
    twin_encoder,
)


def _case(rng: np.random.Generator, *, N: int, b: int, n: int, d: int, h: int, d_ff: int,
          mask: str | None = None) -> Case:
    """A case like the spec, its sizes `drawn` around the spec's."""
    s = drawn(rng, dict(N=N, b=b, n=n, d=d, h=h, d_ff=d_ff))
    N, b, n, d, d_ff = s["N"], s["b"], s["n"], s["d"], s["d_ff"]
    x = randn(rng, b, n, d)
    m = make_mask(rng, mask, b, n)
    perm = torch.from_numpy(rng.permutation(n))
    label = (f"Encoder({N}, {d}, {h}, {d_ff}), x {kit.shape_of(x)}{mask_label(mask)}, and the same with "
             "positions permuted")
    meta = {"init": (N, d, h, d_ff), "perm": perm, "weights": encoder_weights(rng, N, d, h, d_ff)}
    return Case(label, (x,), {} if m is None else {"mask": m}, meta=meta)


def _cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [dict(N=2, b=2, n=4, d=8, h=2, d_ff=32, mask="padding")] if not hidden else [
        dict(N=3, b=3, n=5, d=8, h=2, d_ff=32, mask="padding"), dict(N=1, b=2, n=6, d=12, h=3, d_ff=24),
        dict(N=2, b=2, n=7, d=16, h=4, d_ff=64, mask="causal"), dict(N=4, b=2, n=5, d=8, h=4, d_ff=16, mask="padding"),
        dict(N=2, b=3, n=6, d=6, h=2, d_ff=12, mask="full")]
    return [_case(rng, **s) for s in specs]


def _twin(case: Case) -> nn.TransformerEncoder:
    return twin_encoder(*case.meta["init"], case.meta["weights"])


def _torch_encoder(case: Case) -> Any:
    """nn.TransformerEncoder (pre-LN layers, a final nn.LayerNorm), float64, the weights copied in;
    on the permuted positions, its output permuted."""
    mask = case.kwargs.get("mask")
    out = run_twin(_twin(case), case.args[0], mask, case.meta["init"][2])
    return kit.both_modes({OUT: out, PERM: out[:, case.meta["perm"]]})


def _stacked(case: Case, *, final_norm: bool = True, reuse_first: bool = False, masked: bool = True,
             norm_each: bool = False, reverse: bool = False, causal: bool = False) -> Any:
    """The stack recomposed from the twin's own layers, on x and on the permuted x. Knobs: no final norm,
    the first layer reused num_layers times, the mask not passed on, the final norm after every layer,
    the layers in reverse order, a causal mask added."""
    twin, h = _twin(case), case.meta["init"][2]
    layers = list(twin.layers)
    layers = [layers[0]] * len(layers) if reuse_first else layers[::-1] if reverse else layers

    def run(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, n = x.shape[0], x.shape[1]
        m = torch_attn_mask(mask, b, h, n, n) if masked else None
        if causal:
            m = (0 if m is None else m) + kit.causal_mask(n).double()
        x = x.double()
        with torch.enable_grad():
            for layer in layers:
                x = layer(x, src_mask=m)
                x = twin.norm(x) if norm_each else x
            x = twin.norm(x) if final_norm and not norm_each else x
        return x.detach().float()

    x, mask = case.args[0], case.kwargs.get("mask")
    return kit.both_modes({OUT: run(x, mask), PERM: run(*permuted(x, mask, case.meta["perm"]))})


_MISTAKES = [
    Mistake("Did you forget the final LayerNorm? A pre-LN stack never normalises its residual stream, so the "
            "encoder ends with one: return self.norm(x) after the last layer (chapter 6).",
            variant(_stacked, final_norm=False)),
    Mistake("Did you run the same layer num_layers times? Each layer has its own weights: loop over self.layers "
            "(an nn.ModuleList of num_layers separate EncoderLayers).", variant(_stacked, reuse_first=True)),
    Mistake("Did you pass the mask on to every layer? x = layer(x, mask).", variant(_stacked, masked=False)),
    Mistake("Did you apply the final norm after every layer? In a pre-LN stack the stream is normalised once, "
            "after the last layer.", variant(_stacked, norm_each=True)),
    Mistake("Did you run the layers in reverse order? self.layers[0] is the bottom layer, applied first.",
            variant(_stacked, reverse=True)),
    Mistake("Did you add a causal mask? An encoder is bidirectional: every position sees every other one, except "
            "where the given mask hides keys (its output on permuted positions is its output, permuted).",
            variant(_stacked, causal=True)),
]

# ------------------------------------------------------------- layers ---

def _layer_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(2, 8, 2, 32, None), (3, 6, 3, 10, 0.1)] if not hidden else [
        (1, 16, 4, 64, None), (4, 12, 3, 7, 0.2), (6, 64, 8, 256, 0.1), (2, 4, 1, 16, 0.3)]
    cases = []
    for N, d, h, f, p in specs:
        s = drawn(rng, dict(N=N, d=d, h=h, d_ff=f, dropout=p), most=8)
        N, d, f, p = s["N"], s["d"], s["d_ff"], s["dropout"]
        cases.append(Case(f"a new Encoder({N}, {d}, {h}, {f}" + ("" if p is None else f", dropout={p}") + ")",
                          meta={"init": (N, d, h, f), "dropout": p, "x": [randn(rng, 1, n, d) for n in (3, 11)]}))
    return cases


def _layers(case: Case, *, shared: bool = False, final_norm: bool = True, p: bool = True) -> dict:
    N, d, _, f = case.meta["init"]
    table = {}
    for i in range(1 if shared else N):
        table |= layer_table(d, f, f"layers.{i}.")
    if final_norm:
        table |= {"norm.gamma": ((d,), "float32"), "norm.beta": ((d,), "float32")}
    return {PARAMS: dict(sorted(table.items())), COUNT: count(table), AFTER_COUNT: count(table),
            ENCODER_P: [(case.meta["dropout"] or 0.0) if p else 0.0] * N}


_LAYER_MISTAKES = [
    Mistake("Did you put one layer object in the list num_layers times ([layer] * num_layers)? They then share "
            "their weights: create a new EncoderLayer for each entry.", variant(_layers, shared=True)),
    Mistake("Did you forget the final LayerNorm? self.norm = LayerNorm(d_model), applied after the last layer.",
            variant(_layers, final_norm=False)),
    Mistake("Did you pass dropout on to the layers? EncoderLayer(d_model, num_heads, d_ff, dropout).",
            variant(_layers, p=False)),
]

register(
    __name__,
    Check(name="encoder", cases=_cases, expected=_torch_encoder, mistakes=_MISTAKES,
          hint="forward(x, mask=None): x = layer(x, mask) for each layer in self.layers, bottom first, then return "
               "self.norm(x). If your EncoderLayer fails its tests, fix it first. With dropout=0 training and eval "
               "mode must agree: " + kit.same_in_both_modes("encoder")),
    Check(name="encoder_parameters", guard=True, cases=_layer_cases, expected=_layers, mistakes=_LAYER_MISTAKES,
          hint="layers = nn.ModuleList of num_layers new EncoderLayer(d_model, num_heads, d_ff, dropout), norm = "
               "LayerNorm(d_model), nothing else with parameters, and nothing created in forward."),
)
