"""Reference solutions of chapter 03_positional_encoding.

Generated from solutions/03_positional_encoding/03_positional_encoding.ipynb (cells tagged 'export') by
`python -m autograder release`. Do not edit: edit the solution notebook.
"""
import math

import torch
from torch import nn


def sinusoidal_encoding(seq_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The sinusoidal position table, float32 of shape (seq_len, d_model).

    Row pos, column 2i: sin(pos / base**(2i / d_model)); column 2i + 1: the cosine of the same
    angle. Computed in float64, cast to float32 once. Raises ValueError for an odd d_model.
    """
    if d_model <= 0 or d_model % 2 != 0:
        raise ValueError(f"d_model must be even (and positive), got {d_model}")
    pos = torch.arange(seq_len, dtype=torch.float64).unsqueeze(1)      # (seq_len, 1)
    i = torch.arange(d_model // 2, dtype=torch.float64).unsqueeze(0)   # (1, d_model / 2): pair index
    angle = pos / base ** (2 * i / d_model)                            # (seq_len, d_model / 2)
    pe = torch.empty(seq_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.to(torch.float32)


def offset_matrix(k: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The (d_model, d_model) float32 matrix M_k with PE[pos + k] = PE[pos] @ M_k (row vectors).

    Block diagonal: rows and columns (2i, 2i + 1) hold [[cos t, -sin t], [sin t, cos t]],
    t = k / base**(2i / d_model). Raises ValueError for an odd d_model.
    """
    if d_model <= 0 or d_model % 2 != 0:
        raise ValueError(f"d_model must be even (and positive), got {d_model}")
    i = torch.arange(d_model // 2, dtype=torch.float64)
    theta = k / base ** (2 * i / d_model)                  # (d_model / 2,): the angle of each pair
    cos, sin = torch.cos(theta), torch.sin(theta)
    even = 2 * torch.arange(d_model // 2)                  # the sine dimensions
    odd = even + 1                                         # the cosine dimensions
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[even, even] = cos                                    # sine   -> new sine
    m[even, odd] = -sin                                    # sine   -> new cosine
    m[odd, even] = sin                                     # cosine -> new sine
    m[odd, odd] = cos                                      # cosine -> new cosine
    return m.to(torch.float32)


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table: x of shape (batch, seq_len, d_model) -> x + PE[:seq_len], same shape."""

    def __init__(self, d_model: int, max_len: int = 5000, base: float = 10000.0) -> None:
        super().__init__()
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model, base))  # (max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, seq_len, d_model) -> (batch, seq_len, d_model)."""
        seq_len = x.size(1)
        if seq_len > self.max_len:
            raise ValueError(f"the sequence has {seq_len} positions, more than max_len = {self.max_len}")
        return x + self.pe[:seq_len]
