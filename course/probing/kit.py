"""Helpers the probes (the kernel side of the checks) share to run a student's module.

`build` (seeded construction), `load_weights` (copy known weights in, with a
clear error when the student's layer is missing or misshapen), `run_modes`
(a forward pass in training and in eval mode, without grad) and
`parameter_table` (names, shapes and dtypes): each returns the student's raw
outputs, which the judge compares outside the sandbox. `randn`: seeded normal
values, for the cases' inputs and weights (the checks' and `course.twins`').
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from .pieces import TRACED
from .plain import dtype_name


def randn(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    """A float32 tensor of standard normal values drawn from `rng`."""
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


def build(cls: Callable[..., nn.Module], *args: Any, **kwargs: Any) -> nn.Module:
    """Construct the student's module with a fixed seed (its own random
    initialisation is then the same on every run)."""
    torch.manual_seed(0)
    return cls(*args, **kwargs)


def load_weights(module: nn.Module, weights: dict[str, torch.Tensor | None], why: str = "") -> None:
    """Copy known weights into the student's module, by dotted parameter name.

    ``{"W_q.weight": w, "W_q.bias": None}``: None means the contract says
    that parameter does not exist (e.g. ``bias=False``). Raises a clear
    AttributeError/ValueError (which becomes the feedback) when the module's
    layout differs from the contract's; `why` is added to it.
    """
    # a tensor shared by two modules (a tied embedding) is listed under both names, whichever was made first
    params = dict(module.named_parameters(remove_duplicate=False))
    buffers = dict(module.named_buffers(remove_duplicate=False))
    traced = [prefix for prefix, m in module.named_modules() if prefix and getattr(type(m), TRACED, False)]
    for name, value in weights.items():
        if any(name.startswith(prefix + ".") for prefix in traced):  # an earlier piece's layout is judged in
            _load_leniently(params.get(name, buffers.get(name)), value)  # its own exercise, not this one's
            continue
        have = params.get(name, buffers.get(name))
        if value is None:
            if have is not None:
                raise ValueError(f"the module has a parameter {name}, which the contract leaves out. {why}")
            continue
        if have is None:
            raise AttributeError(f"the module has no parameter {name} (found: "
                                 f"{', '.join(sorted(params)) or 'none'}). {why}")
        if tuple(have.shape) != tuple(value.shape):
            raise ValueError(f"{name} has shape {tuple(have.shape)}, the contract says "
                             f"{tuple(value.shape)}. {why}")
        with torch.no_grad():
            have.copy_(value)


def _load_leniently(have: torch.Tensor | None, value: torch.Tensor | None) -> None:
    """Copy a weight into an earlier piece's parameter where the two fit; leave it where they do not."""
    if have is not None and value is not None and tuple(have.shape) == tuple(value.shape):
        with torch.no_grad():
            have.copy_(value)


def run_modes(module: nn.Module, forward: Callable[..., Any], *inputs: Any) -> dict[str, Any]:
    """``forward(module, *inputs)`` in eval mode and in training mode, without grad.

    A module whose contract has no dropout must give the same result in
    both: checking both catches randomness a student added in training mode
    only. The training pass runs first, on copies of `inputs`; the eval pass
    gets the case's own, so a forward that changes its input in place
    (``x += pe``) is reported as such by the harness's `inputs_unchanged`
    check. Eval comes first in the result (and in `both_modes`): a module
    wrong in both modes is reported under 'eval', one wrong only in training
    mode under 'train', which a hint can name.
    """
    results = {}
    for mode in ("train", "eval"):
        module.train(mode == "train")
        torch.manual_seed(0)
        with torch.no_grad():
            results[mode] = forward(module, *(copy.deepcopy(inputs) if mode == "train" else inputs))
    return {"eval": results["eval"], "train": results["train"]}


def parameter_table(module: nn.Module) -> dict[str, tuple[tuple[int, ...], str]]:
    """{parameter name: (shape, dtype)}: what the contract says a module holds."""
    return {name: (tuple(p.shape), dtype_name(p.dtype))
            for name, p in module.named_parameters()}


#: the key of a parameter report's table, and of the count `with_count` adds on the judge's side
#: PyTorch's softmax, by every name: what chapter 4's exercises (and chapter 5's attention) do by hand
SOFTMAX = ("torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax", "torch.Tensor.softmax",
           "torch.log_softmax", "torch.nn.functional.log_softmax", "torch.Tensor.log_softmax")
#: PyTorch's own attention and Transformer layers, fast paths included (``nn.MultiheadAttention``,
#: ``nn.TransformerEncoderLayer``, ``nn.TransformerDecoderLayer``, ``nn.Transformer``): what chapters 5-8 build
#: by hand, and what `course.twins` loads the course's weights into
TORCH_ATTENTION = ("torch.nn.functional.scaled_dot_product_attention",
                   "torch.nn.functional.multi_head_attention_forward", "torch._native_multi_head_attention",
                   "torch._transformer_encoder_layer_fwd")
#: the sum as a function: the residual connections of chapters 6 and 7 are written with `+` (which
#: PyTorch dispatches as `Tensor.add`, so that one stays allowed)
ADD = ("torch.add",)

PARAMS = "parameters (name: shape, dtype)"
COUNT = "number of parameters"


def parameters(module: nn.Module) -> dict[str, tuple[tuple[int, ...], str]]:
    """The module's parameter table, sorted by name."""
    return dict(sorted(parameter_table(module).items()))


def count(table: dict[str, tuple]) -> int:
    """The number of parameters of a parameter table {name: (shape, dtype)}."""
    return sum(math.prod(shape) for shape, _ in table.values())


def with_count(case: Any, raw: dict) -> dict:
    """`observe` of the parameter checks: the raw report (a parameter table under PARAMS, and what
    else the probe read off the module), with the number of parameters the table adds up to."""
    return {**raw, COUNT: count(raw[PARAMS])}
