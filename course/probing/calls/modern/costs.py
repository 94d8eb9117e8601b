"""Probes for 11.8, model_costs(config, context, batch=1, bytes_per_value=2): what a ModernLM costs,
computed from its configuration.

Each check calls it on a `ModernConfig` of the case's fields (the student's own dataclass, as 11.7's
probes build it) and records the quantities it judges: the parameter count (`costs_parameters`), the
bytes of the weights, of AdamW's moments and of the KV cache (`costs_memory`), and the training FLOPs
per token (`costs_flops`).
"""

from __future__ import annotations

from typing import Any, Callable

from ...cases import Case
from ...runner import Probe, register
from .model import config_of

PARAMETERS, WEIGHT_BYTES, ADAMW_BYTES, KV_BYTES, FLOPS = (
    "parameters", "weight_bytes", "adamw_bytes", "kv_cache_bytes", "train_flops_per_token")
#: what each check reads of the returned dict
READS = {"costs_parameters": (PARAMETERS,), "costs_memory": (WEIGHT_BYTES, ADAMW_BYTES, KV_BYTES),
         "costs_flops": (FLOPS,)}


def _reading(keys: tuple[str, ...]) -> Callable[[Callable, Case], Any]:
    def call(fn: Callable, case: Case) -> dict[str, Any]:
        """meta: config (every field of ModernConfig); args: context, and batch and bytes_per_value when given.
        The dict's values at `keys` (a missing key raises, in the contract's words), as returned."""
        out = fn(config_of(fn, case.meta["config"]), *case.args, **case.kwargs)
        if not isinstance(out, dict):
            raise TypeError(f"model_costs must return a dict, got a {type(out).__name__}")
        missing = [k for k in keys if k not in out]
        if missing:
            raise KeyError(f"the dict model_costs returns has no key {missing[0]!r}")
        return {k: out[k] for k in keys}
    return call


register(*(Probe(f"modern.{name}", call=_reading(keys)) for name, keys in READS.items()))
