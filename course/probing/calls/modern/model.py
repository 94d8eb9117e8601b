"""Probes for 11.6 `ModernDecoderLayer` and 11.7 `ModernLM`: forward passes with known weights (one call,
or a prefill and steps through the cache) and a new module's parameters.

`ModernLM` takes a `ModernConfig`, the dataclass of the student's own answer cell: the probe builds it
from the fields the case gives (every field, so no default matters), found beside the student's class
(a plain namespace with those fields where there is none). The model's parameter table lists a tied
weight under both its names; `_lm_facts` (run by the judge) counts it once.
"""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace
from typing import Any

from torch import nn

from ...cases import Case
from ...kit import COUNT, PARAMS, build, count, parameters, with_count
from ...plain import dtype_name
from ...runner import Probe, register
from .attention import forward_report, loaded

#: what the model's parameter report adds: whether the output layer's weight is the embedding's Parameter
TIED = "output.weight is embedding.weight"

LAYER_LAYOUT = ("The layer holds norm1 and norm2 (RMSNorm(d_model, eps)), attn (GroupedQueryAttention(d_model, "
                "num_heads, num_kv_heads, rope_base)) and ffn (chapter 7's SwiGLUFeedForward(d_model, d_ff)).")
LM_LAYOUT = ("The model holds embedding = nn.Embedding(vocab_size, d_model), layers (an nn.ModuleList of num_layers "
             "ModernDecoderLayer), norm = RMSNorm(d_model, eps) and output = nn.Linear(d_model, vocab_size, "
             "bias=False), its weight the embedding's when tie_embeddings.")


# ---------------------------------------------------- ModernDecoderLayer ---
# meta: init = (d_model, num_heads, num_kv_heads, d_ff); rope_base and eps (None: the default, not
# passed); weights. layer_parameters: init only.

def _build_layer(cls: Any, meta: dict) -> nn.Module:
    given = {"rope_base": meta["rope_base"], "eps": meta["eps"]}
    return build(cls, *meta["init"], **{k: v for k, v in given.items() if v is not None})


def _layer(cls: Any, case: Case) -> dict[str, Any]:
    return forward_report(loaded(lambda: _build_layer(cls, case.meta), case.meta["weights"], LAYER_LAYOUT), case,
                          None)


def _layer_table(cls: Any, case: Case) -> dict[str, Any]:
    return {PARAMS: parameters(build(cls, *case.meta["init"]))}


# -------------------------------------------------------------- ModernLM ---

#: exercise 11.7's model holds exercise 11.6's layers and exercise 11.1's norm
_ON_LAYERS = dict(builds_on=("ModernDecoderLayer", "RMSNorm"), answer="ModernLM")
# meta: config (every field of ModernConfig); weights (the output layer's only when untied); chunks
# (lm_cache only). lm_parameters: config only.

def config_of(cls: Any, fields: dict) -> Any:
    """ModernConfig(**fields), the class found beside the student's ModernLM (or model_costs, 11.8)."""
    make = getattr(sys.modules.get(getattr(cls, "__module__", ""), None), "ModernConfig", None)
    if make is None:
        owner = cls if isinstance(cls, types.FunctionType) else getattr(cls, "__init__", None)
        make = getattr(owner, "__globals__", {}).get("ModernConfig")
    return SimpleNamespace(**fields) if make is None else make(**fields)


def _tying(model: nn.Module, tied: bool) -> None:
    """Raise, with the contract's words, when the output layer's weight is (not) the embedding's."""
    if (model.output.weight is model.embedding.weight) != tied:
        raise ValueError("with tie_embeddings=True the output layer's weight must be the embedding's Parameter "
                         "(self.output.weight = self.embedding.weight)" if tied else
                         "with tie_embeddings=False the output layer has a weight of its own, not the embedding's")


def _build_lm(cls: Any, meta: dict) -> nn.Module:
    model = build(cls, config_of(cls, meta["config"]))
    _tying(model, meta["config"]["tie_embeddings"])
    return model


def _lm(cls: Any, case: Case) -> dict[str, Any]:
    model = loaded(lambda: _build_lm(cls, case.meta), case.meta["weights"], LM_LAYOUT)
    return forward_report(model, case, case.meta["chunks"] if "chunks" in case.meta else None)


def _lm_table(cls: Any, case: Case) -> dict[str, Any]:
    """Every parameter under every name it has (a tied weight twice), and whether the weight is tied."""
    model = build(cls, config_of(cls, case.meta["config"]))
    table = {name: (tuple(p.shape), dtype_name(p.dtype))
             for name, p in model.named_parameters(remove_duplicate=False)}
    return {PARAMS: dict(sorted(table.items())), TIED: model.output.weight is model.embedding.weight}


def _lm_facts(case: Case, raw: dict) -> dict:
    """`observe` of lm_parameters: the number of parameters, a tied weight counted once."""
    table = raw[PARAMS]
    tied_size = count({"output.weight": table["output.weight"]}) if raw[TIED] and "output.weight" in table else 0
    return {**raw, COUNT: count(table) - tied_size}


register(
    Probe("modern.layer", call=_layer, builds_on=("RMSNorm", "GroupedQueryAttention"), answer="ModernDecoderLayer"),
    Probe("modern.layer_parameters", call=_layer_table, observe=with_count,
          builds_on=("RMSNorm", "GroupedQueryAttention"),
          answer="ModernDecoderLayer"),
    Probe("modern.lm", call=_lm, **_ON_LAYERS),
    Probe("modern.lm_cache", call=_lm, **_ON_LAYERS),
    Probe("modern.lm_parameters", call=_lm_table, observe=_lm_facts, **_ON_LAYERS),
)
