"""Stand-in for chapter 5: heads split with `Tensor.unflatten` and merged with `Tensor.unbind`, attention
on `torch.softmax`: each is a function its own exercise forbids."""

import torch
from torch import nn


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(batch, seq, d_model) -> (batch, num_heads, seq, d_model // num_heads)."""
    if x.shape[-1] % num_heads:
        raise ValueError(f"{num_heads} heads do not divide the {x.shape[-1]} features")
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(batch, num_heads, seq, d_head) -> (batch, seq, num_heads * d_head)."""
    return torch.cat(x.unbind(1), dim=-1)


class MultiHeadAttention(nn.Module):
    """num_heads heads of width d_model // num_heads; W_q, W_k, W_v, W_o as in chapter 5."""

    def __init__(self, d_model: int, num_heads: int, d_q_in: int | None = None,
                 d_kv_in: int | None = None, bias: bool = True) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"{num_heads} heads do not divide d_model = {d_model}")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        widths = {"W_q": d_q_in or d_model, "W_k": d_kv_in or d_model, "W_v": d_kv_in or d_model, "W_o": d_model}
        for name, width in widths.items():
            self.add_module(name, nn.Linear(width, d_model, bias=bias))

    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None, value: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(output (batch, n_q, d_model), weights (batch, num_heads, n_q, n_k)); mask additive, the same
        for every head."""
        sources = (query, query if key is None else key, value if value is not None else
                   (query if key is None else key))
        q, k, v = (split_heads(proj(t), self.num_heads) for proj, t in zip((self.W_q, self.W_k, self.W_v), sources))
        logits = torch.matmul(q, k.transpose(-1, -2)) / self.d_head ** 0.5
        if mask is not None:
            logits = logits + mask.unsqueeze(-3)                     # one mask for every head
        if (logits == float("-inf")).all(-1).any():
            raise ValueError("every key of some query is masked (-inf): its weights would be NaN")
        attn = torch.softmax(logits, dim=-1)                         # (batch, heads, n_q, n_k)
        return self.W_o(merge_heads(torch.matmul(attn, v))), attn


__all__ = ["MultiHeadAttention", "merge_heads", "split_heads"]
