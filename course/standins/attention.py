"""Stand-in for chapter 4: attention on `torch.softmax`, which the chapter's exercises forbid."""

import torch
from torch import nn


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
            mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    logits = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if mask is not None:
        logits = logits + mask
    if (logits == float("-inf")).all(-1).any():
        raise ValueError("every key of some query is masked (-inf): its weights would be NaN")
    attn = torch.softmax(logits, dim=-1)
    return torch.matmul(attn, v), attn


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(softmax(q k^T / sqrt(d_k) + mask) v, the weights); mask additive (0 allowed, -inf not).
    Raises ValueError where a query has every key masked."""
    return _attend(q, k, v, mask)


class AttentionHead(nn.Module):
    """One head: bias-free projections W_q, W_k (d_in -> d_k) and W_v (d_in -> d_v, default d_k)."""

    def __init__(self, d_in: int, d_k: int, d_v: int | None = None) -> None:
        super().__init__()
        for name, width in (("W_q", d_k), ("W_k", d_k), ("W_v", d_v or d_k)):
            self.add_module(name, nn.Linear(d_in, width, bias=False))

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        source = x if context is None else context
        return _attend(self.W_q(x), self.W_k(source), self.W_v(source), mask)


__all__ = ["AttentionHead", "scaled_dot_product_attention"]
