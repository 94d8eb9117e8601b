"""Probes for 11.3 `GroupedQueryAttention`: its forward pass (with or without a cache given), a
sequence of cached calls (a prefill, then steps), a new module's parameters and its errors.

The helpers here (`forward_report`, `parameters`, `with_count`) serve the block and the model's
probes too (`course.probing.calls.modern.model`). A forward report is the raw return value of each
call, in training and in eval mode (`run_modes`), and the cache the case passed in as it is after
the call (the cache is a tuple, which the harness's `inputs_unchanged` does not look into).
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import torch
from torch import nn

from ...cases import Case
from ...kit import PARAMS, build, load_weights, parameters, run_modes, with_count
from ...runner import Probe, register

#: the keys of the raw reports
RETURNED = "returned"                  # one call: what it returned, (output, cache)
CALLS = "returned by each call, in order"  # a prefill and steps: [(output, cache), ...]
GIVEN = "the cache passed in, after the call"

GQA_LAYOUT = ("The module holds W_q = nn.Linear(d_model, num_heads * d_head, bias=False), W_k and W_v = "
              "nn.Linear(d_model, num_kv_heads * d_head, bias=False) and W_o = nn.Linear(num_heads * d_head, "
              "d_model, bias=False), d_head = d_model // num_heads.")


def forward_report(module: nn.Module, case: Case, chunks: list[int] | None) -> dict[str, Any]:
    """{'eval': report, 'train': report}. The inputs are case.args: (x,) or (x, cache).

    chunks None: one call, module(x) (or module(x, cache)): {RETURNED: what it returned}.
    chunks [n1, n2, ...]: x's positions fed in that many at a time, each call given the cache the
    previous one returned (the first the case's cache, or None): {CALLS: [what each call returned]}.
    With a cache given, the report also holds it as it is after the calls (GIVEN)."""
    def run(m: nn.Module, x: torch.Tensor, cache: Any = None) -> dict[str, Any]:
        given = cache
        if chunks is None:
            report = {RETURNED: m(x) if cache is None else m(x, cache)}
        else:
            calls, start = [], 0
            for n in chunks:
                returned = m(x[:, start:start + n], cache)
                calls.append(copy.deepcopy(returned))   # as it was returned, before later calls
                cache, start = returned[1], start + n
            report = {CALLS: calls}
        return report if given is None else {**report, GIVEN: given}
    return run_modes(module, run, *case.args)


def loaded(make: Callable[[], nn.Module], weights: dict[str, torch.Tensor | None], layout: str) -> nn.Module:
    module = make()
    load_weights(module, weights, layout)
    return module


# ------------------------------------------------- GroupedQueryAttention ---
# meta: init = (d_model, num_heads, num_kv_heads); rope_base (None: the default, not passed);
# weights; chunks (gqa_cache only).

def _build_gqa(cls: Any, meta: dict) -> nn.Module:
    base = meta["rope_base"]
    return build(cls, *meta["init"]) if base is None else build(cls, *meta["init"], rope_base=base)


def _gqa(cls: Any, case: Case) -> dict[str, Any]:
    return forward_report(loaded(lambda: _build_gqa(cls, case.meta), case.meta["weights"], GQA_LAYOUT), case, None)


def _gqa_cached(cls: Any, case: Case) -> dict[str, Any]:
    module = loaded(lambda: _build_gqa(cls, case.meta), case.meta["weights"], GQA_LAYOUT)
    return forward_report(module, case, case.meta["chunks"])


def _gqa_table(cls: Any, case: Case) -> dict[str, Any]:
    return {PARAMS: parameters(build(cls, *case.meta["init"]))}


def _gqa_made(cls: Any, case: Case) -> str:
    """Construct the module (the contract asks for an error, which the call then raises)."""
    build(cls, *case.meta["init"])
    return "a module was created"


# the exercise is the grouping and the cache: PyTorch's fused attention (enable_gqa=True) would do both
FORBID = ("torch.nn.functional.scaled_dot_product_attention",)

register(
    Probe("modern.gqa", call=_gqa, forbid=FORBID, builds_on=("apply_rope",), answer="GroupedQueryAttention"),
    Probe("modern.gqa_cache", call=_gqa_cached, forbid=FORBID, builds_on=("apply_rope",),
          answer="GroupedQueryAttention"),
    Probe("modern.gqa_parameters", call=_gqa_table, observe=with_count),
    Probe("modern.gqa_errors", call=_gqa_made),
)
