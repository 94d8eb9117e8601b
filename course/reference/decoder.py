"""Reference solutions of chapter 08_decoder.

Generated from solutions/08_decoder/08_decoder.ipynb (cells tagged 'export') by
`python -m autograder release`. Do not edit: edit the solution notebook.
"""
import torch
from torch import nn

from course.reference.add_norm import LayerNorm
from course.reference.feed_forward import Encoder, FeedForward
from course.reference.multi_head_attention import MultiHeadAttention


def causal_mask(n: int, dtype: torch.dtype = torch.float32,
                device: torch.device | str | None = None) -> torch.Tensor:
    """(n, n) additive mask: 0 where key j <= query i, -inf where j > i (the future).

    Raises ValueError if n < 1.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    future = torch.ones(n, n, dtype=torch.bool, device=device).triu(diagonal=1)  # True where j > i
    return torch.zeros(n, n, dtype=dtype, device=device).masked_fill(future, float("-inf"))


class DecoderLayer(nn.Module):
    """Pre-LN decoder layer: masked self-attention, cross-attention to the encoder's output (left out
    when cross_attention=False: a decoder-only layer), feed-forward network; each sub-layer with its
    own LayerNorm and residual connection."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 cross_attention: bool = True) -> None:
        super().__init__()
        self.norm1 = LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        if cross_attention:
            self.norm2 = LayerNorm(d_model)
            self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.norm3 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.dropout = nn.Dropout(dropout)
        self.cross_weights = None  # (batch, num_heads, n_tgt, n_src) of the latest forward pass

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (batch, n_tgt, d_model); memory: (batch, n_src, d_model), the encoder's output;
        tgt_mask: additive, broadcastable to (batch, n_tgt, n_tgt) (causal + target padding);
        memory_mask: additive, broadcastable to (batch, n_tgt, n_src) (source padding).
        Returns (batch, n_tgt, d_model)."""
        has_cross = hasattr(self, "cross_attn")
        if has_cross and memory is None:
            raise ValueError("this layer has cross-attention: pass the encoder's output as memory")
        if not has_cross and memory is not None:
            raise ValueError("a decoder-only layer (cross_attention=False) takes no memory")
        h = self.norm1(x)
        x = x + self.dropout(self.self_attn(h, h, h, mask=tgt_mask)[0])
        if has_cross:
            out, weights = self.cross_attn(self.norm2(x), memory, memory, mask=memory_mask)
            self.cross_weights = weights.detach()
            x = x + self.dropout(out)
        return x + self.dropout(self.ffn(self.norm3(x)))


class Decoder(nn.Module):
    """num_layers pre-LN decoder layers, then a final LayerNorm."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int,
                 dropout: float = 0.0, cross_attention: bool = True) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout, cross_attention)
                                    for _ in range(num_layers))
        self.norm = LayerNorm(d_model)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Arguments as in DecoderLayer.forward. Returns (batch, n_tgt, d_model)."""
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.norm(x)


class Transformer(nn.Module):
    """The encoder-decoder: chapter 7's Encoder and this chapter's Decoder, on embedded sequences."""

    def __init__(self, d_model: int, num_heads: int, num_encoder_layers: int, num_decoder_layers: int,
                 d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src: (batch, n_src, d_model) -> memory (batch, n_src, d_model)."""
        return self.encoder(src, src_mask)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
               memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """tgt: (batch, n_tgt, d_model), memory: (batch, n_src, d_model) -> (batch, n_tgt, d_model)."""
        return self.decoder(tgt, memory, tgt_mask, memory_mask)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor | None = None,
                tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The whole model: decode(tgt, encode(src, src_mask), tgt_mask, memory_mask)."""
        return self.decode(tgt, self.encode(src, src_mask), tgt_mask, memory_mask)
