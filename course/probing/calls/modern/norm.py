"""Probes for 11.1, RMSNorm: its forward pass (with known gains copied in) and a new module.

meta: d_model, eps (None: the default, not passed) and, for the forward pass, the gain `weight`.
The output's dtype is recorded by name beside it (`DTYPE`): a bfloat16 tensor reaches the judge as
float32 values, so its dtype would otherwise be lost.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ...cases import Case
from ...kit import PARAMS, build, load_weights, parameter_table, run_modes
from ...plain import dtype_name
from ...runner import Probe, register

#: the keys of a forward pass's report, and of a new module's
OUT, DTYPE = "output", "output dtype"
NEW = "a new module's forward(x)"

FORBID = ("torch.nn.functional.rms_norm", "torch.rms_norm")
_LAYOUT = "RMSNorm(d_model, eps) holds one parameter, weight (d_model,), and no bias"


def output_dtype(y: Any) -> str | None:
    """'float32' for a float32 tensor; None for anything that is not a tensor."""
    return dtype_name(y.dtype) if isinstance(y, torch.Tensor) else None


def output_and_dtype(y: Any) -> dict[str, Any]:
    """{OUT: y, DTYPE: its dtype's name}."""
    return {OUT: y, DTYPE: output_dtype(y)}


def _build(cls: Any, case: Case) -> nn.Module:
    eps = case.meta["eps"]
    return build(cls, case.meta["d_model"]) if eps is None else build(cls, case.meta["d_model"], eps=eps)


def _forward(cls: Any, case: Case) -> dict[str, Any]:
    """In each mode {OUT: forward(x), DTYPE: its dtype}, the gain meta['weight'] copied in."""
    module = _build(cls, case)
    load_weights(module, {"weight": case.meta["weight"]}, _LAYOUT)
    return run_modes(module, lambda m, x: output_and_dtype(m(x)), *case.args)


def _new(cls: Any, case: Case) -> dict[str, Any]:
    """A new module's parameter table (sorted by name) and its forward(x) in eval mode."""
    module = _build(cls, case)
    table = dict(sorted(parameter_table(module).items()))
    module.eval()
    with torch.no_grad():
        return {PARAMS: table, NEW: output_and_dtype(module(*case.args))}


register(
    Probe("modern.rmsnorm", call=_forward, forbid=FORBID),
    Probe("modern.rmsnorm_parameters", call=_new, forbid=FORBID),
)
