"""Helpers every chapter's checks share: inputs, masks, modules, labels.

A chapter's check module (``course.checks.<topic>``) describes its cases, its
oracle and its known mistakes; the plumbing lives here, written once:

* inputs: `randn`, `causal_mask`, `padding_mask`;
* expected errors: `raises` (the oracle's answer where the contract asks for
  an exception);
* mistakes as the chapter's oracle with knobs: `variant(oracle, **knobs)`,
  returning `NOT_APPLICABLE` where a knob makes no difference to a case;
* modules: `build` (seeded construction), `load_weights` (copy known weights
  in, with a clear error when the student's layer is missing or misshapen),
  `run_modes` (a forward pass in training and in eval mode, without grad),
  `parameter_table` (names, shapes and dtypes);
* labels: `shape_of`, `describe`.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from .framework import NOT_APPLICABLE, Case, Raises

NEG_INF = float("-inf")


# -------------------------------------------------------------- inputs ---

def randn(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    """A float32 tensor of standard normal values drawn from `rng`."""
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


def causal_mask(n: int) -> torch.Tensor:
    """(n, n) additive mask: 0 on and below the diagonal, -inf above it."""
    return torch.triu(torch.full((n, n), NEG_INF), diagonal=1)


def padding_mask(lengths: list[int], n_k: int) -> torch.Tensor:
    """(batch, 1, n_k) additive mask hiding the keys past each sequence's length."""
    keep = torch.arange(n_k)[None, :] < torch.tensor(lengths)[:, None]
    return torch.where(keep, 0.0, NEG_INF)[:, None, :]


def raises(why: str, *names: str) -> Raises:
    """The oracle's answer where the contract asks for an exception
    (ValueError unless other exception types are named)."""
    return Raises(names or ("ValueError",), why)


# ------------------------------------------------------------ mistakes ---

def variant(oracle: Callable[..., Any], **knobs: Any) -> Callable[[Case], Any]:
    """A mistake's output: the chapter's oracle with some knobs turned.

    ``variant(attend, scale="d_k")`` is ``lambda case: attend(case, scale="d_k")``,
    but `NOT_APPLICABLE` where the knobbed oracle expects an exception (an
    expected error is no mistake's output). Where the knobs leave the answer
    as it is, the harness skips the mistake itself: it cannot be told apart.
    """
    def output(case: Case) -> Any:
        wrong = oracle(case, **knobs)
        return NOT_APPLICABLE if isinstance(wrong, Raises) else wrong
    return output


def unless(applies: Callable[[Case], bool], output: Callable[[Case], Any]) -> Callable[[Case], Any]:
    """`output` on the cases where `applies(case)`, `NOT_APPLICABLE` elsewhere."""
    def gated(case: Case) -> Any:
        return output(case) if applies(case) else NOT_APPLICABLE
    return gated


# ------------------------------------------------------------- modules ---

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
    params = dict(module.named_parameters())
    buffers = dict(module.named_buffers())
    for name, value in weights.items():
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


def both_modes(value: Any) -> dict[str, Any]:
    """The expected result of `run_modes` for a module without dropout."""
    return {"eval": value, "train": value}


def parameter_table(module: nn.Module) -> dict[str, tuple[tuple[int, ...], str]]:
    """{parameter name: (shape, dtype)}: what the contract says a module holds."""
    return {name: (tuple(p.shape), str(p.dtype).removeprefix("torch."))
            for name, p in module.named_parameters()}


# --------------------------------------------------------------- labels ---

def shape_of(x: torch.Tensor | np.ndarray) -> str:
    """'(2, 3, 4)'."""
    return str(tuple(x.shape))


def describe(**tensors: torch.Tensor | None) -> str:
    """'q (2, 3, 4), k (2, 5, 4)': the shapes of a case's tensors, for its label."""
    return ", ".join(f"{name} {shape_of(t)}" for name, t in tensors.items() if t is not None)

