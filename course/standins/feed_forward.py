"""Stand-in for chapter 7: the feed-forward networks on `torch.addmm`, the encoder layer's residual
connections on `torch.add` and the encoder's final norm on `F.layer_norm`, which the chapter's
exercises forbid. The parameters are named as in chapter 7."""

import torch
import torch.nn.functional as F
from torch import nn

from course.reference.add_norm import LayerNorm
from course.reference.multi_head_attention import MultiHeadAttention


def _dense(x: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """layer(x) for x of any leading shape, as one matrix product with the bias added in."""
    bias = layer.bias if layer.bias is not None else x.new_zeros(layer.out_features)
    flat = torch.addmm(bias, x.reshape(-1, x.shape[-1]), layer.weight.t())
    return flat.reshape(*x.shape[:-1], layer.out_features)


class FeedForward(nn.Module):
    """linear2 after the activation (ReLU or the exact GELU) and dropout of linear1."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation {activation!r}: expected 'relu' or 'gelu'")
        self.activation = {"relu": F.relu, "gelu": F.gelu}[activation]
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _dense(self.dropout(self.activation(_dense(x, self.linear1))), self.linear2)


class SwiGLUFeedForward(nn.Module):
    """The gated network: w_down of silu(w_gate x) times w_up x, no biases."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        for name, (d_in, d_out) in {"w_gate": (d_model, d_ff), "w_up": (d_model, d_ff),
                                    "w_down": (d_ff, d_model)}.items():
            self.add_module(name, nn.Linear(d_in, d_out, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _dense(F.silu(_dense(x, self.w_gate)) * _dense(x, self.w_up), self.w_down)


class EncoderLayer(nn.Module):
    """The pre-LN encoder layer: norm1, self_attn, norm2, ffn, dropout."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm1, self.self_attn = LayerNorm(d_model), MultiHeadAttention(d_model, num_heads)
        self.norm2, self.ffn = LayerNorm(d_model), FeedForward(d_model, d_ff, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.norm1(x)
        x = torch.add(x, self.dropout(self.self_attn(h, h, h, mask=mask)[0]))
        return torch.add(x, self.dropout(self.ffn(self.norm2(x))))


class Encoder(nn.Module):
    """num_layers encoder layers (`layers`), then a final LayerNorm (`norm`)."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.layers = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.norm = LayerNorm(d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        h = x
        for block in self.layers:
            h = block(h, mask)
        return F.layer_norm(h, self.norm.gamma.shape, self.norm.gamma, self.norm.beta, self.norm.eps)


__all__ = ["Encoder", "EncoderLayer", "FeedForward", "SwiGLUFeedForward"]
