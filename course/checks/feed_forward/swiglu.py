"""7.2: `SwiGLUFeedForward`, the gated variant: w_down(silu(w_gate(x)) * w_up(x)), without biases.
Oracle: the formula in float64 with PyTorch's ``F.silu``; mistakes are `_swiglu` with knobs."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from course.probing.kit import COUNT, PARAMS

from .. import kit
from ..framework import Case, Check, Mistake, register
from ..kit import randn, variant
from ._shared import drawn_d_ff, drawn_ffn, grown

_ACTS = {"silu": F.silu, "sigmoid": torch.sigmoid, "relu": F.relu, "gelu": F.gelu, "none": lambda t: t}
_NAMES = ("w_gate", "w_up", "w_down")


def _weights(rng: np.random.Generator, d: int, d_ff: int) -> dict[str, torch.Tensor]:
    shapes = {"w_gate": (d_ff, d), "w_up": (d_ff, d), "w_down": (d, d_ff)}
    return {f"{n}.weight": randn(rng, *s) / s[1] ** 0.5 for n, s in shapes.items()}


def _case(rng: np.random.Generator, shape: tuple[int, ...], d_ff: int) -> Case:
    """A case like the spec: x's shape and d_ff drawn around the spec's."""
    shape, d_ff = drawn_ffn(rng, shape, d_ff)
    d = shape[-1]
    x = 2.0 * randn(rng, *shape)
    return Case(f"SwiGLUFeedForward({d}, {d_ff}), x {kit.shape_of(x)}", (x,),
                meta={"d_model": d, "d_ff": d_ff, "weights": _weights(rng, d, d_ff)})


def _cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 8), 16), ((5, 6), 4)] if not hidden else [
        ((3, 4, 8), 24), ((2, 2, 3, 6), 10), ((12,), 32), ((1, 7, 16), 40), ((2, 5, 4), 3), ((2, 9, 12), 32)]
    return [_case(rng, shape, d_ff) for shape, d_ff in specs]


def _swiglu(case: Case, *, act: str = "silu", on: str = "gate", combine: str = "product") -> Any:
    """w_down(act(x W_gate^T) * (x W_up^T)) in float64. Knobs: the activation, the branch it goes `on`
    ('gate', 'up', 'product': after multiplying), how the branches `combine` ('product', 'sum', 'gate only')."""
    x, w = case.args[0].double(), {k: v.double() for k, v in case.meta["weights"].items()}
    f = _ACTS[act]
    gate, up = x @ w["w_gate.weight"].T, x @ w["w_up.weight"].T
    if on == "gate":
        gate = f(gate)
    elif on == "up":
        up = f(up)
    hidden = {"product": lambda: gate * up, "sum": lambda: gate + up, "gate only": lambda: gate}[combine]()
    if on == "product":
        hidden = f(hidden)
    return kit.both_modes((hidden @ w["w_down.weight"].T).float())


_MISTAKES = [
    Mistake("Did you put the activation on the wrong branch? The gate is silu(w_gate(x)); w_up(x) stays linear: "
            "w_down(silu(w_gate(x)) * w_up(x)).", variant(_swiglu, on="up")),
    Mistake("Did you apply SiLU after multiplying? Only the gate branch goes through it: "
            "w_down(silu(w_gate(x)) * w_up(x)).", variant(_swiglu, on="product")),
    Mistake("Did you gate with a sigmoid? That is the original GLU; SwiGLU's gate is SiLU (Swish), "
            "silu(z) = z * sigmoid(z).", variant(_swiglu, act="sigmoid")),
    Mistake("Did you gate with ReLU? That is ReGLU; SwiGLU uses SiLU: F.silu(w_gate(x)).",
            variant(_swiglu, act="relu")),
    Mistake("Did you gate with GELU? That is GEGLU; SwiGLU uses SiLU: F.silu(w_gate(x)).",
            variant(_swiglu, act="gelu")),
    Mistake("Did you forget the activation? silu(w_gate(x)) * w_up(x), not w_gate(x) * w_up(x).",
            variant(_swiglu, act="none")),
    Mistake("Did you add the branches? They are multiplied element-wise: silu(w_gate(x)) * w_up(x).",
            variant(_swiglu, combine="sum")),
    Mistake("Did you leave out w_up? The hidden vector is silu(w_gate(x)) * w_up(x): the gate multiplies a second "
            "linear branch.", variant(_swiglu, combine="gate only")),
]

# ------------------------------------------------------------- layers ---

def _layer_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(8, 16), (6, 4)] if not hidden else [(16, 40), (5, 3), (512, 1365), (1, 2)]
    cases = []
    for d, f in specs:
        new_d = grown(rng, d, most=8)
        f = drawn_d_ff(rng, d, new_d, f, most=8)
        cases.append(Case(f"a new SwiGLUFeedForward({new_d}, {f})", meta={"d_model": new_d, "d_ff": f}))
    return cases


def _layers(case: Case, *, bias: bool = False, hidden: str = "d_ff") -> dict:
    d = case.meta["d_model"]
    f = {"d_ff": case.meta["d_ff"], "d_model": d}[hidden]
    table = {"w_gate.weight": ((f, d), "float32"), "w_up.weight": ((f, d), "float32"),
             "w_down.weight": ((d, f), "float32")}
    if bias:
        table |= {"w_gate.bias": ((f,), "float32"), "w_up.bias": ((f,), "float32"), "w_down.bias": ((d,), "float32")}
    return {PARAMS: dict(sorted(table.items())), COUNT: 3 * d * f + (2 * f + d) * bias}


register(
    __name__,
    Check(name="swiglu_forward", cases=_cases, expected=_swiglu, mistakes=_MISTAKES,
          hint="forward(x) = w_down(F.silu(w_gate(x)) * w_up(x)) for x of any shape (..., d_model), float32, x left "
               "unchanged. No dropout: " + kit.same_in_both_modes()),
    Check(name="swiglu_layers", guard=True, cases=_layer_cases, expected=_layers,
          mistakes=[Mistake("Did you give the layers biases? SwiGLU's three projections have none (bias=False): "
                            "3 * d_model * d_ff parameters.", variant(_layers, bias=True)),
                    Mistake("Did you ignore d_ff? w_gate and w_up map d_model to d_ff features, w_down maps them back.",
                            variant(_layers, hidden="d_model"))],
          hint="Exactly three float32 nn.Linear layers without bias: w_gate and w_up (d_model -> d_ff), w_down "
               "(d_ff -> d_model)."),
)
