"""Probes for chapter 2: one-hot vectors, the embedding lookup, the Embedding module.

Where a case plants a bad id (meta "bad"), the call records what the student's code returned or raised
(`outcome`); the probe's `observe` (`clear_error`), run by the judge, reads whether the error message
names the bad id. The module's initialisation is recorded raw (its parameters, attributes, weight and
the weight's gradient after a backward pass); its `observe` (`init_facts`) computes the statistics of
the report (`init_report`, which the trusted side fills in for the weight its oracle draws).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..cases import Case
from ..kit import build, load_weights, parameter_table, run_modes
from ..plain import Raised, raised
from ..runner import Probe, register

# Module cases (embedding_*): args are what forward() is called with (the ids); meta holds the
# constructor's arguments ("size" = (vocab_size, d_model), and "scale", None for its default) and the
# known weights to copy in ("weight", (vocab_size, d_model)).


def outcome(run: Callable[[], Any]) -> dict[str, Any]:
    """``{"returned": run()}``, or ``{"raised": the Raised}`` when run() raised: the exception's types
    and message reach the judge, which reads the message."""
    try:
        return {"returned": run()}
    except Exception as exc:  # the student's error, message included, is what is recorded
        return {"raised": raised(exc)}


class UnclearErrorMessage(Exception):
    """Raised by an `observe` when the student's error does not say what was wrong."""


def clear_error(case: Case, raw: dict, vocab: int | None = None) -> Any:
    """The `observe` of the error checks: what the call returned or raised (`outcome`'s record); where a
    bad id was planted, a ValueError/IndexError whose message omits it (or `vocab`) becomes an
    `UnclearErrorMessage`, so the feedback says what is missing."""
    got, bad = raw["raised"] if "raised" in raw else raw["returned"], case.meta["bad"]
    if bad is None or not isinstance(got, Raised) or not {"ValueError", "IndexError"} & set(got.names):
        return got
    need = (bad,) if vocab is None else (bad, vocab)
    if not all(str(v) in got.message for v in need):
        what = f"the bad id {bad}" if vocab is None else f"the bad id {bad} and the vocabulary size {vocab}"
        raise UnclearErrorMessage(f"your {got.names[0]} says {got.message[:120]!r}, which does not "
                                  f"name {what}")
    return got


def _clear_module_error(case: Case, raw: dict) -> Any:
    """`clear_error` for the module, whose message must name vocab_size as well."""
    return clear_error(case, raw, case.meta["size"][0])


def init_report(params: dict, attrs: dict, weight: torch.Tensor | np.ndarray | None, got_grad: bool) -> dict:
    """What the contract says of a fresh module: its parameters, attributes, the statistics of its weight
    (None: no weight tensor) and whether the output is differentiable with respect to it."""
    w = torch.zeros(1) if weight is None else torch.as_tensor(weight)
    w = w.detach().double()
    return {
        "parameters (name: shape, dtype)": params,
        "attributes vocab_size, d_model, scale": attrs,
        "weight entries have mean near 0": bool(abs(float(w.mean())) < 0.05),
        "weight entries have standard deviation near 1": bool(abs(float(w.std()) - 1.0) < 0.05),
        "the output is differentiable with respect to weight": got_grad,
    }


def init_facts(case: Case, raw: dict) -> dict:
    """The `observe` of embedding_init: the report of the module's recorded parameters, attributes, weight
    and gradient."""
    return init_report(raw["parameters"], raw["attributes"], raw["weight"], raw["weight.grad"] is not None)


def build_module(cls: Callable[..., nn.Module], case: Case) -> nn.Module:
    """Embedding(*meta['size']) (scale=meta['scale'] unless None), seeded, with meta['weight'] copied in."""
    vocab, d = case.meta["size"]
    scale = case.meta.get("scale")
    module = build(cls, vocab, d) if scale is None else build(cls, vocab, d, scale=scale)
    if "weight" in case.meta:
        load_weights(module, {"weight": case.meta["weight"]},
                     "self.weight must be an nn.Parameter of shape (vocab_size, d_model)")
    return module


def _call_one_hot_errors(fn: Callable, case: Case) -> dict[str, Any]:
    return outcome(lambda: fn(*case.args))


def _call_init(cls: Callable, case: Case) -> dict[str, Any]:
    """The fresh module's parameters {name: (shape, dtype)}, its attributes vocab_size, d_model and scale
    (the type's name for a value that is not a bool, int, float or str), its weight (vocab_size, d_model)
    (None if it is not a tensor) and weight.grad after forward(ids).sum().backward() (None if none came)."""
    module = build_module(cls, case)
    weight = getattr(module, "weight", None)
    attrs = {n: getattr(module, n, "no such attribute") for n in ("vocab_size", "d_model", "scale")}
    attrs = {n: v if isinstance(v, (bool, int, float, str)) else type(v).__name__ for n, v in attrs.items()}
    out = module(*case.args)
    if isinstance(out, torch.Tensor) and out.requires_grad and isinstance(weight, torch.Tensor):
        out.sum().backward()
    is_tensor = isinstance(weight, torch.Tensor)
    return {"parameters": parameter_table(module), "attributes": attrs,
            "weight": weight.detach() if is_tensor else None,
            "weight.grad": weight.grad if is_tensor else None}


def _call_errors(cls: Callable, case: Case) -> dict[str, Any]:
    """`outcome` of forward(ids) on the module holding the known weights."""
    try:
        module = build_module(cls, case)
    except (ValueError, IndexError) as err:  # a misshapen weight is not the error this check asks for
        raise RuntimeError(f"the known weights could not be loaded: {err}") from None
    return outcome(lambda: module(*case.args))


_NO_ONE_HOT = ("torch.nn.functional.one_hot",)
_NO_LOOKUP = ("torch.nn.functional.one_hot", "torch.nn.functional.embedding")

register(
    Probe("embedding.one_hot", forbid=_NO_ONE_HOT),
    Probe("embedding.one_hot_errors", call=_call_one_hot_errors, forbid=_NO_ONE_HOT, observe=clear_error),
    Probe("embedding.embed_one_hot", forbid=_NO_LOOKUP, builds_on=("one_hot",), answer="embed_one_hot"),
    Probe("embedding.embed_lookup", forbid=_NO_LOOKUP),
    Probe("embedding.embedding_forward", forbid=("torch.nn.functional.embedding",),
          call=lambda cls, c: run_modes(build_module(cls, c), lambda m, ids: m(ids), *c.args)),
    Probe("embedding.embedding_init", call=_call_init, observe=init_facts),
    Probe("embedding.embedding_errors", call=_call_errors, forbid=("torch.nn.functional.embedding",),
          observe=_clear_module_error),
)
