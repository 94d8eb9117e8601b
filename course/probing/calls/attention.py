"""Probes for chapter 4: softmax, scaled dot-product attention, the attention head."""

from __future__ import annotations

from typing import Any

from ..cases import Case
from ..kit import SOFTMAX, build, load_weights, parameter_table, run_modes
from ..runner import Probe, register

_NO_FUSED = ("torch.nn.functional.scaled_dot_product_attention", *SOFTMAX)
_ON_SOFTMAX = dict(builds_on=("softmax",), answer="scaled_dot_product_attention")


def _call_head(cls: Any, case: Case) -> Any:
    head = build(cls, *case.args)
    load_weights(head, case.meta["weights"], "The head holds three bias-free nn.Linear layers W_q, W_k, W_v")
    m = case.meta
    return run_modes(head, lambda h: h(m["x"], context=m["context"], mask=m["mask"]))


register(
    Probe("attention.softmax", forbid=SOFTMAX),
    Probe("attention.sdpa", forbid=_NO_FUSED, **_ON_SOFTMAX),
    Probe("attention.sdpa_masked", forbid=_NO_FUSED, **_ON_SOFTMAX),
    Probe("attention.sdpa_fully_masked", forbid=_NO_FUSED, **_ON_SOFTMAX),
    Probe("attention.attention_head", call=_call_head, forbid=_NO_FUSED, builds_on=("scaled_dot_product_attention",),
          answer="AttentionHead"),
    Probe("attention.attention_head_parameters", call=lambda cls, case: parameter_table(build(cls, *case.args))),
)
