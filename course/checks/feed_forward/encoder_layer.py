"""7.3: the pre-LN `EncoderLayer`: its forward pass against ``nn.TransformerEncoderLayer(norm_first=True,
batch_first=True)`` with the weights copied in (masks of three shapes), a new layer's parameters, and
dropout (training mode only, on each sub-layer's output and inside the FFN). Mistakes are `_wired`, the
layer recomposed from the twin's own sub-modules with knobs, and `_dropped`'s knobs."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course.probing.calls.feed_forward import LAYER_FFN_P, LAYER_P
from course.probing.kit import COUNT, PARAMS, count

from .. import kit
from ..framework import Case, Check, Mistake, register
from ..kit import randn, variant
from course.twins import torch_attn_mask
from ._shared import (
    drawn,
    layer_table,
    layer_weights,
    make_mask,
    mask_label,
    run_twin,
    twin_layer,
)


def _case(rng: np.random.Generator, *, b: int, n: int, d: int, h: int, d_ff: int, mask: str | None = None,
          dropout: float | None = None) -> Case:
    """A case like the spec, its sizes and dropout `drawn` around the spec's."""
    s = drawn(rng, dict(b=b, n=n, d=d, h=h, d_ff=d_ff, dropout=dropout))
    b, n, d, d_ff, dropout = s["b"], s["n"], s["d"], s["d_ff"], s["dropout"]
    x = randn(rng, b, n, d)
    m = make_mask(rng, mask, b, n)
    extra = "" if dropout is None else f", dropout={dropout}"
    label = f"EncoderLayer({d}, {h}, {d_ff}{extra}), x {kit.shape_of(x)}{mask_label(mask)}"
    meta = {"init": (d, h, d_ff), "dropout": dropout, "weights": layer_weights(rng, d, h, d_ff)}
    return Case(label, (x,), {} if m is None else {"mask": m}, meta=meta)


def _twin(case: Case, dtype: torch.dtype = torch.float64) -> nn.TransformerEncoderLayer:
    return twin_layer(*case.meta["init"], case.meta["weights"]).to(dtype)


def _torch_layer(case: Case) -> Any:
    """nn.TransformerEncoderLayer(norm_first=True, batch_first=True) in float64, the weights copied in."""
    x, mask = case.args[0], case.kwargs.get("mask")
    return kit.both_modes(run_twin(_twin(case), x, mask, case.meta["init"][1]))


# ------------------------------------------------------------ forward ---

def _cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [dict(b=1, n=3, d=8, h=2, d_ff=32), dict(b=2, n=5, d=8, h=2, d_ff=16, mask="padding")] if not hidden else [
        dict(b=3, n=5, d=8, h=2, d_ff=32), dict(b=2, n=7, d=12, h=3, d_ff=48, mask="padding"),
        dict(b=4, n=4, d=16, h=4, d_ff=20, mask="padding"), dict(b=2, n=6, d=8, h=4, d_ff=32, mask="causal"),
        dict(b=2, n=5, d=6, h=1, d_ff=5, mask="full"), dict(b=1, n=1, d=8, h=2, d_ff=32),
        dict(b=3, n=9, d=16, h=8, d_ff=64, mask="padding")]
    return [_case(rng, **s) for s in specs]


def _wired(case: Case, *, order: str = "attention first", residual: str = "raw", masked: bool = True,
           norm2: str = "norm2") -> Any:
    """The layer recomposed from the twin's sub-modules, float64. Knobs: the sub-layers' `order`
    ('ffn first', each with its own norm), the `residual` ('raw' x, 'normalised' x, 'none', 'post': the
    post-LN wiring, 'attention output': the FFN reads the attention's output instead of the updated
    stream), the mask not passed to attention, and the FFN's norm ('norm1' shared, 'none')."""
    twin, h, x = _twin(case), case.meta["init"][1], case.args[0].double()
    mask = torch_attn_mask(case.kwargs.get("mask"), x.shape[0], h, x.shape[1], x.shape[1]) if masked else None

    def attn(t: torch.Tensor) -> torch.Tensor:
        return twin.self_attn(t, t, t, attn_mask=mask, need_weights=False)[0]

    def ffn(t: torch.Tensor) -> torch.Tensor:
        return twin.linear2(F.relu(twin.linear1(t)))

    norm_ffn = {"norm2": twin.norm2, "norm1": twin.norm1, "none": nn.Identity()}[norm2]
    steps = [(attn, twin.norm1), (ffn, norm_ffn)]
    with torch.no_grad():
        if residual == "attention output":
            a = attn(twin.norm1(x))
            return kit.both_modes((x + a + ffn(norm_ffn(a))).float())
        for sub, norm in steps if order == "attention first" else steps[::-1]:
            x = _RESIDUALS[residual](x, sub, norm)
    return kit.both_modes(x.float())


_RESIDUALS = {  # how a sub-layer and its norm are wired into the stream x
    "raw": lambda x, sub, norm: x + sub(norm(x)),
    "normalised": lambda x, sub, norm: norm(x) + sub(norm(x)),
    "none": lambda x, sub, norm: sub(norm(x)),
    "post": lambda x, sub, norm: norm(x + sub(x)),
}


_MISTAKES = [
    Mistake("Did you put the feed-forward network before attention? A layer attends first, then transforms: "
            "x = x + attn(norm1(x)), then x = x + ffn(norm2(x)).", variant(_wired, order="ffn first")),
    Mistake("Did you add the normalised input instead of the raw one? The residual stream carries x itself: "
            "x + sublayer(norm(x)), not norm(x) + sublayer(norm(x)) (chapter 6).",
            variant(_wired, residual="normalised")),
    Mistake("Did you feed the FFN the attention's output? It reads the updated stream: x = x + a, then "
            "x + ffn(norm2(x)), not x + ffn(norm2(a)).", variant(_wired, residual="attention output")),
    Mistake("Did you forget the residual connections? Each sub-layer's output is added to its input: "
            "x + sublayer(norm(x)).", variant(_wired, residual="none")),
    Mistake("Did you wire it post-LN? This course's layer is pre-LN: x + sublayer(norm(x)), the norm on the "
            "sub-layer's input, never on the sum.", variant(_wired, residual="post")),
    Mistake("Did you pass the mask on to self-attention? self.self_attn(h, h, h, mask=mask).",
            variant(_wired, masked=False)),
    Mistake("Did you use norm1 for both sub-layers? Each sub-layer has its own LayerNorm: norm2 before the FFN.",
            variant(_wired, norm2="norm1")),
    Mistake("Did you forget the norm before the FFN? x + ffn(norm2(x)).", variant(_wired, norm2="none")),
]
_HINT = ("forward(x, mask=None) = pre-LN: h = norm1(x); x = x + dropout(self_attn(h, h, h, mask=mask)[0]); "
         "return x + dropout(ffn(norm2(x))). The mask is additive, broadcastable to (batch, seq, seq). Do not "
         "change x in place (x = x + ..., not x += ...). If your FeedForward fails its tests, fix it first. With "
         "dropout=0 training and eval mode must agree: " + kit.same_in_both_modes("layer"))

# ------------------------------------------------------------- layers ---

def _layer_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(8, 2, 32, None), (6, 3, 10, 0.1)] if not hidden else [
        (16, 4, 64, None), (12, 3, 7, 0.2), (512, 8, 2048, 0.1), (4, 1, 16, 0.3)]
    cases = []
    for d, h, f, p in specs:
        s = drawn(rng, dict(d=d, h=h, d_ff=f, dropout=p), most=8)
        d, f, p = s["d"], s["d_ff"], s["dropout"]
        cases.append(Case(f"a new EncoderLayer({d}, {h}, {f}" + ("" if p is None else f", dropout={p}") + ")",
                          meta={"init": (d, h, f), "dropout": p}))
    return cases


def _layers(case: Case, *, hidden: str = "d_ff", norm2: bool = True, ffn_p: bool = True) -> dict:
    d, _, f = case.meta["init"]
    table = layer_table(d, {"d_ff": f, "d_model": d}[hidden], norm2=norm2)
    p = case.meta["dropout"] or 0.0
    return {PARAMS: dict(sorted(table.items())), COUNT: count(table), LAYER_P: p, LAYER_FFN_P: p if ffn_p else 0.0}


_LAYER_MISTAKES = [
    Mistake("Did you ignore d_ff? ffn = FeedForward(d_model, d_ff, dropout): its hidden layer has d_ff units.",
            variant(_layers, hidden="d_model")),
    Mistake("Did you create only one LayerNorm? Each sub-layer has its own: norm1 before attention, norm2 before "
            "the FFN.", variant(_layers, norm2=False)),
    Mistake("Did you pass dropout on to the FeedForward? ffn = FeedForward(d_model, d_ff, dropout).",
            variant(_layers, ffn_p=False)),
]

# ------------------------------------------------------------ dropout ---

def _dropout_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [dict(b=2, n=4, d=8, h=2, d_ff=32, dropout=0.5)] if not hidden else [
        dict(b=3, n=5, d=8, h=2, d_ff=16, dropout=0.1, mask="padding"), dict(b=2, n=6, d=12, h=3, d_ff=24, dropout=0.3),
        dict(b=1, n=7, d=16, h=4, d_ff=40, dropout=0.5, mask="causal")]
    return [_case(rng, **s) for s in specs]


def _dropped(case: Case, *, branch: bool = True, ffn: bool = True, after_sum: bool = False,
             in_eval: str = "", missing: str = "") -> dict:
    """Both modes with torch.manual_seed(0) before each pass, as the tests run them, in float32: in training
    mode dropout(p) on the attention's output, on the FFN's hidden activations and on the FFN's output, in that
    order. Knobs: no dropout on the sub-layers' outputs (`branch`) or in the FFN, dropout applied to the sum
    (`after_sum`), dropout in eval mode too (`in_eval`: 'all', or 'branch': self.dropout's only, the FFN's
    module switching off), or self.dropout `missing` on one sub-layer's output only ('attention' or 'ffn')."""
    twin, p, h = _twin(case, torch.float32), case.meta["dropout"], case.meta["init"][1]
    x, mask = case.args[0], case.kwargs.get("mask")
    mask = None if mask is None else torch_attn_mask(mask, x.shape[0], h, x.shape[1], x.shape[1]).float()

    def forward(training: bool, in_ffn: bool = True) -> torch.Tensor:
        torch.manual_seed(0)
        drop = (lambda t: F.dropout(t, p, True)) if training else (lambda t: t)
        on_branch = drop if branch and not after_sum else (lambda t: t)
        on_sum = drop if after_sum else (lambda t: t)
        y = twin.norm1(x)
        a = twin.self_attn(y, y, y, attn_mask=mask, need_weights=False)[0].contiguous()  # the mask follows memory
        y = on_sum(x + (a if missing == "attention" else on_branch(a)))                   # order: as chapter 5's
        hidden = F.relu(twin.linear1(twin.norm2(y)))
        out = twin.linear2(drop(hidden) if ffn and in_ffn else hidden)
        return on_sum(y + (out if missing == "ffn" else on_branch(out)))

    with torch.no_grad():
        train = forward(True)
        return {"eval": forward(bool(in_eval), in_ffn=in_eval == "all"), "train": train}


_DROPOUT_MISTAKES = [
    Mistake("Did you apply dropout in eval mode too? Use the modules (self.dropout, the FFN's own), which do "
            "nothing after .eval(); F.dropout(t, p) drops whatever the mode.", variant(_dropped, in_eval="all")),
    Mistake("Did you apply dropout in eval mode too? Use self.dropout (an nn.Dropout), which does nothing after "
            ".eval(); F.dropout(t, p) drops whatever the mode.", variant(_dropped, in_eval="branch")),
    Mistake("Did you forget dropout? In training mode it acts on each sub-layer's output before the addition "
            "(self.dropout) and on the FFN's hidden activations.", variant(_dropped, branch=False, ffn=False)),
    Mistake("Did you forget self.dropout on the sub-layers' outputs? x + self.dropout(sublayer(norm(x))), for "
            "attention and for the FFN.", variant(_dropped, branch=False)),
    Mistake("Did you leave out self.dropout on the attention's output? x = x + self.dropout(self_attn(h, h, h, "
            "mask=mask)[0]).", variant(_dropped, missing="attention")),
    Mistake("Did you leave out self.dropout on the FFN's output? x + self.dropout(ffn(norm2(x))).",
            variant(_dropped, missing="ffn")),
    Mistake("Did you pass dropout on to the FeedForward? ffn = FeedForward(d_model, d_ff, dropout) drops its "
            "hidden activations in training mode.", variant(_dropped, ffn=False)),
    Mistake("Did you apply dropout after adding the residual? Only the sub-layer's output is dropped: "
            "x + dropout(sublayer(norm(x))); the residual stream x passes untouched.",
            variant(_dropped, after_sum=True)),
]

register(
    __name__,
    Check(name="encoder_layer", cases=_cases, expected=_torch_layer, mistakes=_MISTAKES, hint=_HINT),
    Check(name="encoder_layer_parameters", guard=True, cases=_layer_cases, expected=_layers,
          mistakes=_LAYER_MISTAKES,
          hint="norm1 = LayerNorm(d_model), self_attn = MultiHeadAttention(d_model, num_heads), norm2 = "
               "LayerNorm(d_model), ffn = FeedForward(d_model, d_ff, dropout), dropout = nn.Dropout(dropout), and "
               "nothing else with parameters."),
    Check(name="encoder_layer_dropout", cases=_dropout_cases, expected=_dropped,
          mistakes=_DROPOUT_MISTAKES,
          hint="In training mode: x = x + self.dropout(attention output), then x + self.dropout(ffn(norm2(x))), with "
               "the FFN dropping its hidden activations; in eval mode, no dropout. The tests seed PyTorch "
               "(torch.manual_seed(0)) before each pass, so your dropout draws the same masks as theirs."),
)
