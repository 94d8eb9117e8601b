"""6.2: the LayerNorm module: its forward pass, a new module's parameters, and its constructor's errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course.probing.calls.add_norm import NEW
from course.probing.kit import PARAMS

from .. import kit
from ..framework import NOT_APPLICABLE, Case, Check, Mistake, register
from ..kit import variant
from ._shared import _NOTES, ATOL, EPS, RTOL, _affine, _ln_mistakes, _manual, _rows, _unlike, drawn_eps, drawn_shape

# --------------------------------------------------- 6.2 LayerNorm module ---
# Case.args: what forward() is called with (x); meta: the constructor's arguments and the weights to copy in
# (none for a new module, which keeps its own initial values).

def _module_case(rng: np.random.Generator, *shape: int, kind: str = "normal", eps: float | None = None,
                 weights: bool = True) -> Case:
    """A case like the spec: its sizes and eps drawn around the spec's (`drawn_shape`, `drawn_eps`)."""
    shape, eps = drawn_shape(rng, shape), drawn_eps(rng, eps)
    d = shape[-1]
    x = _rows(rng, *shape, kind=kind)
    label = f"LayerNorm({d}{'' if eps is None else f', eps={eps:g}'}), x {kit.shape_of(x)}{_NOTES[kind]}"
    if not weights:
        return Case("a new " + label, (x,), meta={"d_model": d, "eps": eps})
    gamma, beta = _affine(rng, d)
    return Case(label, (x,), meta={"d_model": d, "eps": eps, "weights": {"gamma": gamma, "beta": beta}})


def _module_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 4), {}), ((3, 6), {"kind": "tiny", "eps": 1e-3})] if not hidden else [
        ((4, 5, 7), {}), ((2, 2, 3, 16), {"eps": 1e-3}), ((10,), {}), ((3, 1), {}), ((1, 2, 512), {}),
        ((2, 6, 64), {"kind": "offset"}), ((3, 32), {"kind": "tiny"}), ((4, 8), {"kind": "constant", "eps": 0.1}),
        ((5, 6), {"eps": 3.0})]
    return [_module_case(rng, *shape, **kw) for shape, kw in specs]


def _module_oracle(case: Case) -> Any:
    eps = EPS if case.meta["eps"] is None else case.meta["eps"]
    ref = nn.LayerNorm(case.meta["d_model"], eps=eps, dtype=torch.float64)
    with torch.no_grad():
        ref.weight.copy_(case.meta["weights"]["gamma"])
        ref.bias.copy_(case.meta["weights"]["beta"])
        return kit.both_modes(ref(case.args[0].double()).float())


def _module_manual(case: Case, *, eps_ignored: bool = False, **knobs: Any) -> Any:
    eps = EPS if eps_ignored or case.meta["eps"] is None else case.meta["eps"]
    out = _manual(case.args[0], case.meta["weights"]["gamma"], case.meta["weights"]["beta"], eps, **knobs)
    return NOT_APPLICABLE if out is NOT_APPLICABLE else kit.both_modes(out)


def _init_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 6), None)] if not hidden else [((3, 5), None), ((2, 4, 9), 1e-3), ((1, 7, 1), None),
                                                    ((2, 2, 64), 0.5)]
    return [_module_case(rng, *shape, eps=eps, weights=False) for shape, eps in specs]


def _init_expected(case: Case, *, shape: str = "d", dtype: str = "float32", kind: str = "parameter",
                   swapped: bool = False) -> dict:
    """A new module: gamma = 1 and beta = 0, so forward is the plain normalisation. Knobs: the parameters'
    shape ('1' or '1,1,d') and dtype, stored as plain tensors or buffers (`kind`), initial values swapped."""
    d, eps = case.meta["d_model"], case.meta["eps"]
    x = case.args[0]
    size = {"d": (d,), "1": (1,), "1,1,d": (1, 1, d)}[shape]
    table = {name: (size, dtype) for name in ("gamma", "beta")} if kind == "parameter" else {}
    out = F.layer_norm(x.double(), (d,), eps=EPS if eps is None else eps).float()
    if swapped:
        out = torch.ones_like(out)  # gamma = 0 and beta = 1
    out = out * torch.ones(size)  # what a gain of that shape does to the output's shape
    return {PARAMS: table, NEW: out.to(getattr(torch, dtype)) if kind == "parameter" else out}


_INIT_SLIPS = [  # (hint, `_init_expected` knobs)
    (("Did you initialise gamma to zeros and beta to ones? A new LayerNorm starts as the plain normalisation: "
      "gamma = torch.ones(d_model), beta = torch.zeros(d_model)."), {"swapped": True}),
    (("Did you store gamma and beta as plain tensors (or buffers)? They are learned: wrap them in nn.Parameter so "
      "that the optimiser sees them."), {"kind": "plain"}),
    ("gamma and beta hold one number per feature: shape (d_model,), not (1,).", {"shape": "1"}),
    ("gamma and beta have shape (d_model,): one number per feature, shared by every position (not (1, 1, d_model)).",
     {"shape": "1,1,d"}),
    ("gamma and beta are float32 (nn.Parameter(torch.ones(d_model)) is), not float64.", {"dtype": "float64"}),
]
_MODULE_HINT = ("forward(x) is your layer_norm(x, self.gamma, self.beta, self.eps): same shape and dtype as x, any "
                "leading dimensions. The module has no dropout, so training and eval mode must agree: "
                + kit.same_in_both_modes() + " If your layer_norm fails its own tests, fix it first.")


def _error_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    """LayerNorm(d_model) with d_model < 1: 0 (the boundary) and a small negative size, in a drawn order, and
    (hidden) a large negative size; eps passed or not, drawn."""
    sizes = [0, -int(rng.integers(1, 4))] + ([-int(rng.integers(10, 100))] if hidden else [])
    cases = []
    for d in rng.permutation(sizes).tolist():
        eps = None if rng.random() < 0.4 else float(rng.choice([1e-6, 1e-4, 1e-3, 1e-2, 0.1]))
        cases.append(Case(f"LayerNorm({d}{'' if eps is None else f', eps={eps:g}'})", meta={"d_model": d, "eps": eps}))
    return cases


register(
    __name__,
    Check(name="layer_norm_module", cases=_module_cases, expected=_module_oracle,
          mistakes=[*_ln_mistakes(_module_manual),
                    Mistake("Did you pass eps on? LayerNorm(d_model, eps) must normalise with that eps, not the "
                            "default.", _unlike(_module_manual, eps_ignored=True))],
          hint=_MODULE_HINT, rtol=RTOL, atol=ATOL),
    Check(name="layer_norm_module_init", guard=True, cases=_init_cases, expected=_init_expected,
          mistakes=[Mistake(hint, variant(_init_expected, **knobs)) for hint, knobs in _INIT_SLIPS],
          hint="A new LayerNorm(d_model) holds exactly two parameters, gamma = ones and beta = zeros, each an "
               "nn.Parameter of shape (d_model,) in float32, and no others."),
    Check(name="layer_norm_module_errors", guard=True, cases=_error_cases,
          expected=lambda c: kit.raises("d_model must be at least 1"),
          hint="Check d_model first in __init__ and raise ValueError when it is smaller than 1 (a LayerNorm over "
               "no features has nothing to normalise)."),
)
