"""Reference solutions of chapter 04_attention.

Generated from solutions/04_attention/04_attention.ipynb (cells tagged 'export') by
`python -m autograder release`. Do not edit: edit the solution notebook.
"""
import math

import torch
import torch.nn as nn


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of `x` along `dim`.

    x: any shape, floating point. Returns the same shape and dtype; entries along `dim` sum to 1.
    """
    shifted = x - x.amax(dim=dim, keepdim=True)  # the largest entry becomes 0: no overflow
    e = torch.exp(shifted)                        # exp(-inf) = 0: masked entries vanish
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d_k) + mask) v, over the last two axes.

    q: (..., n_q, d_k), k: (..., n_k, d_k), v: (..., n_k, d_v);
    mask: additive float mask broadcastable to (..., n_q, n_k): 0 where allowed, -inf where not.
    Returns (output (..., n_q, d_v), weights (..., n_q, n_k)).
    Raises ValueError if a query row has every key masked.
    """
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., n_q, n_k)
    if mask is not None:
        scores = scores + mask
    if torch.isneginf(scores).all(dim=-1).any():
        raise ValueError("a query row is fully masked: every key is -inf, so its softmax would be NaN")
    weights = softmax(scores, dim=-1)  # each query's weights over the keys sum to 1
    return weights @ v, weights


class AttentionHead(nn.Module):
    """One head of scaled dot-product attention with learned, bias-free projections.

    W_q, W_k: d_in -> d_k; W_v: d_in -> d_v (d_v = d_k when None).
    """

    def __init__(self, d_in: int, d_k: int, d_v: int | None = None) -> None:
        super().__init__()
        self.W_q = nn.Linear(d_in, d_k, bias=False)
        self.W_k = nn.Linear(d_in, d_k, bias=False)
        self.W_v = nn.Linear(d_in, d_v or d_k, bias=False)

    def forward(
        self, x: torch.Tensor, context: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x: (batch, n_q, d_in); context: (batch, n_k, d_in), or None for self-attention;
        mask: additive, broadcastable to (batch, n_q, n_k).
        Returns (output (batch, n_q, d_v), weights (batch, n_q, n_k))."""
        source = x if context is None else context
        q, k, v = self.W_q(x), self.W_k(source), self.W_v(source)
        return scaled_dot_product_attention(q, k, v, mask)
