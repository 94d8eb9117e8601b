"""Probes for chapter 6: layer normalisation (the function and the LayerNorm module) and the two
residual wirings.

The residual checks hand the student's functions a sub-layer and a norm: a `TanhMLP` and an
``nn.LayerNorm`` with known weights (both travel as their weights), or plain functions
(``torch.sin``, ``functools.partial(F.layer_norm, ...)``), which travel by name.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .. import cases
from ..cases import Case
from ..kit import ADD, PARAMS, build, load_weights, parameter_table, run_modes
from ..runner import Probe, register

_FORBID = ("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.native_layer_norm")

#: the keys of a new module's report (`_init_report`)
NEW = "forward(x) of the new module"


# ------------------------------------------------------ what the cases carry ---

class TanhMLP(nn.Module):
    """The sub-layer the residual tests wrap: tanh(x W1 + b1) W2 + b2, of width d_model in and out.

    w1 (d_model, hidden), b1 (hidden,), w2 (hidden, d_model), b2 (d_model,)."""

    def __init__(self, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> None:
        super().__init__()
        self.w1, self.b1, self.w2, self.b2 = (nn.Parameter(t) for t in (w1, b1, w2, b2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ self.w1 + self.b1) @ self.w2 + self.b2


def _mlp_state(mlp: TanhMLP) -> dict:
    """Its four weights (their dtype included) and its mode."""
    return {"weights": {name: p.detach() for name, p in mlp.named_parameters()}, "training": mlp.training}


def _mlp_from_state(state: dict) -> TanhMLP:
    return TanhMLP(**state["weights"]).train(state["training"])


def _layer_norm_state(norm: nn.LayerNorm) -> dict:
    """Its constructor's arguments (the dtype of its weights included), weights and mode."""
    dtype = norm.weight.dtype if norm.weight is not None else None
    return cases.module_state(norm, normalized_shape=tuple(norm.normalized_shape), eps=norm.eps,
                              elementwise_affine=norm.elementwise_affine, bias=norm.bias is not None, dtype=dtype)


cases.transportable("add_norm.TanhMLP", TanhMLP, _mlp_state, _mlp_from_state)
cases.transportable("torch.nn.LayerNorm", nn.LayerNorm, _layer_norm_state, cases.module_from_state(nn.LayerNorm))


# ------------------------------------------------------- 6.2 LayerNorm module ---
# Case.args: what forward() is called with (x); meta: the constructor's arguments and the weights to copy in.

def _build(cls: Any, case: Case) -> nn.Module:
    """LayerNorm(d_model), or LayerNorm(d_model, eps=eps) where the case gives an eps."""
    eps = case.meta["eps"]
    return build(cls, case.meta["d_model"]) if eps is None else build(cls, case.meta["d_model"], eps=eps)


def _call_module(cls: Any, case: Case) -> dict[str, Any]:
    """{'eval': y, 'train': y'}: forward(x) with the case's gamma and beta, y of x's shape."""
    module = _build(cls, case)
    load_weights(module, case.meta["weights"], "The module holds two nn.Parameter tensors, gamma and beta, "
                                               "each of shape (d_model,)")
    return run_modes(module, lambda m, x: m(x), *case.args)


def _init_report(cls: Any, case: Case) -> dict[str, Any]:
    """A new module's parameter table and its forward(x) (x's shape), as it was initialised."""
    module = _build(cls, case)
    with torch.no_grad():
        return {PARAMS: parameter_table(module), NEW: module(case.args[0])}


def _made(cls: Any, case: Case) -> str:
    """Construct the module (the contract asks for an error, which the call then raises)."""
    _build(cls, case)
    return "a module was created"


register(
    Probe("add_norm.layer_norm", forbid=_FORBID),
    Probe("add_norm.layer_norm_stability", forbid=_FORBID),
    Probe("add_norm.layer_norm_module", call=_call_module, forbid=_FORBID, builds_on=("layer_norm",),
          answer="LayerNorm"),
    Probe("add_norm.layer_norm_module_init", call=_init_report, forbid=_FORBID, builds_on=("layer_norm",),
          answer="LayerNorm"),
    Probe("add_norm.layer_norm_module_errors", call=_made),
    Probe("add_norm.post_ln_residual", forbid=ADD),
    Probe("add_norm.pre_ln_residual", forbid=ADD),
)
