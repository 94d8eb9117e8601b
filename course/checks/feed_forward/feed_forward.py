"""7.1: the position-wise feed-forward network `FeedForward`: its forward pass (ReLU and GELU),
a new module's layers, dropout in training mode only, and the activation's errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from course.probing.calls.feed_forward import FFN_P
from course.probing.kit import COUNT, PARAMS

from .. import kit
from ..framework import Case, Check, Mistake, register
from ..kit import randn, unless, variant
from ._shared import ACTIVATIONS, drawn_d_ff, drawn_ffn, drawn_p, ffn64, ffn_weights, grown


def _title(d: int, d_ff: int, dropout: float | None = None, activation: str | None = None) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in (("dropout", dropout), ("activation", activation)) if v is not None)
    return f"FeedForward({d}, {d_ff}{extra})"


def _ffn_case(rng: np.random.Generator, shape: tuple[int, ...], d_ff: int, activation: str | None = None,
              dropout: float | None = None, scale: float = 1.0) -> Case:
    """A case like the spec: x's shape, d_ff and dropout drawn around the spec's."""
    (shape, d_ff), dropout = drawn_ffn(rng, shape, d_ff), drawn_p(rng, dropout)
    d = shape[-1]
    x = scale * randn(rng, *shape)
    meta = {"d_model": d, "d_ff": d_ff, "activation": activation, "dropout": dropout,
            "weights": ffn_weights(rng, d, d_ff)}
    return Case(f"{_title(d, d_ff, dropout, activation)}, x {kit.shape_of(x)}", (x,), meta=meta)


# ------------------------------------------------------------ forward ---

def _forward_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 8), 32, None), ((4, 6), 24, "gelu")] if not hidden else [
        ((3, 5, 8), 32, None), ((2, 2, 3, 6), 10, "relu"), ((12,), 48, "gelu"), ((1, 7, 16), 64, "gelu"),
        ((2, 4, 5), 3, None), ((3, 1, 4), 16, "gelu"), ((2, 9, 12), 48, "relu")]
    return [_ffn_case(rng, shape, d_ff, act, scale=2.0) for shape, d_ff, act in specs]


def _ffn(case: Case, *, act: str | None = None, **knobs: Any) -> Any:
    act = act or case.meta["activation"] or "relu"
    return kit.both_modes(ffn64(case.args[0], case.meta["weights"], act=act, **knobs).float())


def _wanted(case: Case) -> str:
    return case.meta["activation"] or "relu"


_FORWARD_MISTAKES = [
    Mistake("Did you apply the activation after the second linear layer? FFN(x) = linear2(act(linear1(x))): the "
            "activation sits between the two layers, and the output is not passed through it.",
            variant(_ffn, where="after")),
    Mistake("Did you apply the activation after both linear layers? Only the hidden layer goes through it: "
            "linear2(act(linear1(x))).", variant(_ffn, where="both")),
    Mistake("Did you forget the activation? Without it the two linear layers collapse into one linear map.",
            variant(_ffn, act="none")),
    Mistake("Did you ignore the activation argument? activation='gelu' asks for GELU (F.gelu), not ReLU.",
            unless(lambda c: _wanted(c) == "gelu", variant(_ffn, act="relu"))),
    Mistake("Did you use GELU by default? The default, activation='relu', is the original ReLU.",
            unless(lambda c: _wanted(c) == "relu", variant(_ffn, act="gelu"))),
    Mistake("Did you use GELU's tanh approximation? The contract asks for the exact GELU, x * Phi(x) with the "
            "normal distribution's CDF (F.gelu(x), approximate='none', as nn.TransformerEncoderLayer uses).",
            unless(lambda c: _wanted(c) == "gelu", variant(_ffn, act="gelu-tanh"))),
]

# ------------------------------------------------------------- layers ---

def _layer_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(8, 32, None, None), (6, 10, 0.1, "gelu")] if not hidden else [
        (16, 64, None, None), (5, 3, 0.2, None), (12, 48, 0.0, "relu"), (1, 4, None, "gelu"), (512, 2048, 0.1, None),
        (7, 7, 0.5, "gelu")]
    cases = []
    for d, d_ff, p, act in specs:
        new_d = grown(rng, d, most=8)
        d_ff, p = drawn_d_ff(rng, d, new_d, d_ff, most=8), drawn_p(rng, p)
        cases.append(Case("a new " + _title(new_d, d_ff, p, act), meta={"d_model": new_d, "d_ff": d_ff, "dropout": p,
                                                                          "activation": act}))
    return cases


def _layers(case: Case, *, hidden: str = "d_ff", bias: bool = True, p: str = "given") -> dict:
    d = case.meta["d_model"]
    h = {"d_ff": case.meta["d_ff"], "d_model": d}[hidden]
    table = {"linear1.weight": ((h, d), "float32"), "linear2.weight": ((d, h), "float32")}
    if bias:
        table |= {"linear1.bias": ((h,), "float32"), "linear2.bias": ((d,), "float32")}
    given = case.meta["dropout"] or 0.0
    return {PARAMS: dict(sorted(table.items())), COUNT: 2 * d * h + (h + d) * bias,
            FFN_P: given if p == "given" else 0.0}


_LAYER_MISTAKES = [
    Mistake("Did you forget the biases? Both layers are nn.Linear with bias=True: the network has "
            "2 * d_model * d_ff + d_ff + d_model parameters.", variant(_layers, bias=False)),
    Mistake("Did you ignore d_ff? The hidden layer has d_ff units: linear1 = nn.Linear(d_model, d_ff), "
            "linear2 = nn.Linear(d_ff, d_model).", variant(_layers, hidden="d_model")),
    Mistake("Did you pass the dropout probability on? self.dropout = nn.Dropout(dropout).", variant(_layers, p="zero")),
]

# ------------------------------------------------------------ dropout ---

def _dropout_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 8), 32, 0.5, None)] if not hidden else [
        ((3, 4, 8), 32, 0.1, None), ((2, 5, 6), 24, 0.5, "gelu"), ((7, 10), 40, 0.3, None),
        ((2, 2, 2, 4), 9, 0.25, None)]
    return [_ffn_case(rng, shape, d_ff, act, dropout=p) for shape, d_ff, p, act in specs]


def _dropped(case: Case, *, where: str = "hidden", in_eval: bool = False) -> dict:
    """What the module gives in each mode, with torch.manual_seed(0) before each pass (as the tests
    run it): in training mode nn.Dropout(p) on the hidden activations. Knobs: dropout `where` else
    ('input', 'output', or 'none': not in training mode either), and applied in eval mode too."""
    x, w, m = case.args[0], case.meta["weights"], case.meta
    f, p = ACTIVATIONS[m["activation"] or "relu"], m["dropout"]

    def forward(training: bool) -> torch.Tensor:
        torch.manual_seed(0)
        drop = (lambda t: F.dropout(t, p, True)) if training else (lambda t: t)
        h = F.linear(drop(x) if where == "input" else x, w["linear1.weight"], w["linear1.bias"])
        h = f(h)
        out = F.linear(drop(h) if where == "hidden" else h, w["linear2.weight"], w["linear2.bias"])
        return drop(out) if where == "output" else out

    train = forward(where != "none")
    return {"eval": forward(in_eval) if where != "none" else train, "train": train}


_DROPOUT_MISTAKES = [
    Mistake("Did you apply dropout in eval mode too? F.dropout(h, p) drops whatever the mode: use the module "
            "self.dropout = nn.Dropout(p) (or pass training=self.training), which does nothing after .eval().",
            variant(_dropped, in_eval=True)),
    Mistake("Did you forget dropout? In training mode self.dropout must act on the hidden activations.",
            variant(_dropped, where="none")),
    Mistake("Did you apply dropout to the output? It acts on the hidden activations, between the activation and "
            "linear2: linear2(dropout(act(linear1(x)))), as in nn.TransformerEncoderLayer.",
            variant(_dropped, where="output")),
    Mistake("Did you apply dropout to the input? It acts on the hidden activations: "
            "linear2(dropout(act(linear1(x)))).", variant(_dropped, where="input")),
]

# ------------------------------------------------------------- errors ---

_UNKNOWN = (("tanh", "sigmoid", "elu", "softplus"),   # other activations
            ("silu", "swish", "mish"),                 # the gated variants' activations
            ("gelu_tanh", "gelu-tanh", "gelu_new"),    # GELU's approximation, under names that contain 'gelu'
            ("swiglu", "geglu", "reglu"))              # gated units, not activations


def _error_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    """A new FeedForward with an unknown activation: one of other activations (visible); one of each kind, in a
    drawn order (hidden); d_model and d_ff drawn."""
    names = [str(rng.choice(_UNKNOWN[0]))] if not hidden else [str(rng.choice(k)) for k in _UNKNOWN]
    cases = []
    for i in rng.permutation(len(names)):
        d = int(rng.integers(2, 17))
        d_ff = 4 * d if rng.random() < 0.5 else int(rng.integers(1, 65))
        cases.append(Case("a new " + _title(d, d_ff, None, names[i]),
                          meta={"d_model": d, "d_ff": d_ff, "activation": names[i]}))
    return cases


_HINT = ("forward(x) = linear2(dropout(act(linear1(x)))) with act ReLU (activation='relu', the default) or the exact "
         "GELU (activation='gelu'), for x of any shape (..., d_model), returning float32 of the same shape and "
         "leaving x unchanged. With dropout=0 training and eval mode must agree: " + kit.same_in_both_modes())

register(
    __name__,
    Check(name="ffn_forward", cases=_forward_cases, expected=_ffn, mistakes=_FORWARD_MISTAKES, hint=_HINT),
    Check(name="ffn_layers", guard=True, cases=_layer_cases, expected=_layers, mistakes=_LAYER_MISTAKES,
          hint="linear1 = nn.Linear(d_model, d_ff), linear2 = nn.Linear(d_ff, d_model), both with bias, float32, "
               "self.dropout = nn.Dropout(dropout), and no other parameters."),
    Check(name="ffn_dropout", cases=_dropout_cases, expected=_dropped, mistakes=_DROPOUT_MISTAKES,
          hint="Use self.dropout = nn.Dropout(dropout) once, on the hidden activations: "
               "linear2(self.dropout(act(linear1(x)))). The tests seed PyTorch (torch.manual_seed(0)) before each "
               "forward pass, so your dropout draws the same mask as theirs."),
    Check(name="ffn_errors", guard=True, cases=_error_cases,
          expected=lambda case: kit.raises(f"unknown activation {case.meta['activation']!r}: use 'relu' or 'gelu'"),
          hint="In __init__, raise ValueError when activation is neither 'relu' nor 'gelu'."),
)
