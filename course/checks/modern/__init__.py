"""Checks for chapter 11: the modern decoder-only model (RMSNorm, rotary positions, grouped-query
attention with a KV cache, AdamW and its parameter groups, the block and the model).

Oracles are PyTorch's own where it has one: ``F.rms_norm``, complex multiplication for the
rotation, ``F.scaled_dot_product_attention(..., enable_gqa=True)``, ``torch.optim.AdamW``; the block
and the model are recomposed from those. Each module's docstring says its oracle and its mistakes.
"""

from . import (  # noqa: F401, I001  (each module registers its checks, in the notebook's order)
    norm,
    rope,
    attention,
    optim,
    model,
    costs,
)
