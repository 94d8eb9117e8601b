"""Reference solutions of chapter 07_feed_forward.

PROVISIONAL: the interface later chapters build on, written before the chapter's
notebook. `python -m autograder release 07_feed_forward` replaces this file with
the cells tagged 'export' of solutions/07_feed_forward/07_feed_forward.ipynb,
which must keep these names, signatures and parameter names.
"""
import torch
from torch import nn

from course.reference.add_norm import LayerNorm
from course.reference.multi_head_attention import MultiHeadAttention


class FeedForward(nn.Module):
    """Position-wise feed-forward network: linear2(dropout(relu(linear1(x))))."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (..., d_model) -> (..., d_model)."""
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))


class EncoderLayer(nn.Module):
    """Pre-LN encoder layer: x + MHA(LN(x)), then + FFN(LN(.))."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm1 = LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.norm2 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (batch, seq, d_model); mask: additive, broadcastable to (batch, seq, seq)
        (e.g. a padding mask (batch, 1, seq)). Returns (batch, seq, d_model)."""
        h = self.norm1(x)
        x = x + self.dropout(self.self_attn(h, h, h, mask=mask)[0])
        return x + self.dropout(self.ffn(self.norm2(x)))


class Encoder(nn.Module):
    """num_layers pre-LN encoder layers, then a final LayerNorm."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout)
                                    for _ in range(num_layers))
        self.norm = LayerNorm(d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (batch, seq, d_model); mask as in EncoderLayer. Returns (batch, seq, d_model)."""
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)
