"""Reference solutions of chapter 05_multi_head_attention.

Generated from solutions/05_multi_head_attention/05_multi_head_attention.ipynb (cells tagged 'export') by
`python -m autograder release`. Do not edit: edit the solution notebook.
"""
import torch
from torch import nn

from course.reference.attention import scaled_dot_product_attention


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(batch, seq, d_model) -> (batch, num_heads, seq, d_head), d_head = d_model // num_heads.

    Head i gets features i*d_head .. (i+1)*d_head - 1 of every token.
    Raises ValueError if num_heads does not divide d_model.
    """
    batch, seq, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model = {d_model} is not divisible by num_heads = {num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, seq, num_heads, d_head).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(batch, num_heads, seq, d_head) -> (batch, seq, num_heads * d_head); inverse of split_heads."""
    batch, num_heads, seq, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, seq, num_heads * d_head)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with h = num_heads heads of width d_head = d_model // num_heads."""

    def __init__(self, d_model: int, num_heads: int, d_q_in: int | None = None,
                 d_kv_in: int | None = None, bias: bool = True) -> None:
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model = {d_model} is not divisible by num_heads = {num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.W_q = nn.Linear(d_q_in or d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_kv_in or d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_kv_in or d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None,
                value: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """query: (batch, n_q, d_q_in); key, value: (batch, n_k, d_kv_in), default query;
        mask: additive, broadcastable to (batch, n_q, n_k), the same for every head.
        Returns (output (batch, n_q, d_model), weights (batch, num_heads, n_q, n_k))."""
        key = query if key is None else key
        value = key if value is None else value
        q = split_heads(self.W_q(query), self.num_heads)  # (batch, h, n_q, d_head)
        k = split_heads(self.W_k(key), self.num_heads)    # (batch, h, n_k, d_head)
        v = split_heads(self.W_v(value), self.num_heads)  # (batch, h, n_k, d_head)
        if mask is not None:
            mask = mask.unsqueeze(-3)  # (..., n_q, n_k) -> (..., 1, n_q, n_k): broadcasts over the heads
        heads, weights = scaled_dot_product_attention(q, k, v, mask)
        return self.W_o(merge_heads(heads)), weights


def multi_head_from_heads(mha: nn.Module, heads: list[nn.Module], W_o: torch.Tensor) -> nn.Module:
    """Load h chapter-4 AttentionHead(d_in, d_head)s and W_o (row convention, (d_model, d_model))
    into mha = MultiHeadAttention(h * d_head, h, d_q_in=d_in, d_kv_in=d_in, bias=False); return mha."""
    with torch.no_grad():
        for name in ("W_q", "W_k", "W_v"):
            stacked = torch.cat([getattr(head, name).weight for head in heads], dim=0)  # (h * d_head, d_in)
            getattr(mha, name).weight.copy_(stacked)
        mha.W_o.weight.copy_(W_o.T)  # nn.Linear computes x @ weight.T
    return mha
