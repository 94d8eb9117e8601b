"""Probes for chapter 11: how the kernel calls the student's RMSNorm, apply_rope,
GroupedQueryAttention, AdamW, decay_groups, ModernDecoderLayer and ModernLM on a case."""

from . import (  # noqa: F401, I001  (each module registers its probes)
    norm,
    rope,
    attention,
    optim,
    model,
    costs,
)
