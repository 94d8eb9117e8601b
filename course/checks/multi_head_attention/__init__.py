"""Checks for chapter 5: splitting heads, merging them, multi-head attention, and a
multi-head module assembled from single heads.

Oracles:

* `split_heads` / `merge_heads`: a different formulation of the same layout
  (``torch.split`` + ``torch.stack`` and ``torch.unbind`` + ``torch.cat``), so
  no reshape or transpose of ours is trusted.
* the module's layers: the parameter shapes and dtypes (float32) and the
  attributes ``num_heads`` and ``d_head`` the contract lists.
* `MultiHeadAttention`: ``torch.nn.MultiheadAttention`` in float64 with the
  weights copied in (per-head weights from ``average_attn_weights=False``),
  cast back to float32. PyTorch's module cannot take queries whose width
  differs from ``d_model``; there the oracle is `_mha64`, an independent
  float64 einsum implementation that never splits tensors by reshaping (it
  indexes the weight matrices head by head); the reference answer must agree
  with both. The mask follows chapter 4's contract (broadcastable to
  ``(batch, n_q, n_k)``); PyTorch gets it with the head axis inserted, as an
  ``attn_mask`` of shape ``(n_q, n_k)`` or ``(batch * num_heads, n_q, n_k)``.
  No dropout: the same answer in training and in eval mode.
* `multi_head_from_heads`: the module's weights, once loaded, holding the
  single heads' rows (chapter 4's reference `AttentionHead`) in head order and
  ``W_o.T``; its parameter table unchanged, the heads left as they were, and
  the module itself returned.

Mistakes are `_split`, `_merge`, `_layers` and `_mha64` with knobs turned.
"""

from . import (  # noqa: F401, I001  (each module registers its checks, in the notebook's order)
    split_heads,
    merge_heads,
    mha_layers,
    mha_forward,
    multi_head_from_heads,
)
