"""Reference solutions of chapter 07_feed_forward.

Generated from solutions/07_feed_forward/07_feed_forward.ipynb (cells tagged 'export') by
`python -m autograder release`. Do not edit: edit the solution notebook.
"""
import torch
import torch.nn.functional as F
from torch import nn

# for exercise 7.3: chapter 6's LayerNorm and pre_ln_residual, chapter 5's MultiHeadAttention
from course.reference.add_norm import LayerNorm, pre_ln_residual
from course.reference.multi_head_attention import MultiHeadAttention


class FeedForward(nn.Module):
    """Position-wise feed-forward network: linear2(dropout(act(linear1(x)))), act ReLU or GELU."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"unknown activation {activation!r}: use 'relu' or 'gelu'")
        self.activation = F.relu if activation == "relu" else F.gelu   # F.gelu: the exact GELU
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (..., d_model) -> (..., d_model)."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class SwiGLUFeedForward(nn.Module):
    """Gated feed-forward network: w_down(silu(w_gate(x)) * w_up(x)), no biases."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_ff, bias=False)
        self.w_up = nn.Linear(d_model, d_ff, bias=False)
        self.w_down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (..., d_model) -> (..., d_model)."""
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


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
        x = pre_ln_residual(x, lambda h: self.dropout(self.self_attn(h, h, h, mask=mask)[0]), self.norm1)
        return pre_ln_residual(x, lambda h: self.dropout(self.ffn(h)), self.norm2)


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
