"""Stand-in for chapter 3: `PositionalEncoding`, its table made with complex numbers (`torch.polar`),
which the chapter's exercises forbid."""

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    """x (batch, seq_len, d_model) -> x + PE[:seq_len]; the float32 buffer `pe` is (max_len, d_model)."""

    def __init__(self, d_model: int, max_len: int = 5000, base: float = 10000.0) -> None:
        super().__init__()
        if d_model <= 0 or d_model % 2:
            raise ValueError(f"the table needs an even, positive d_model, not {d_model}")
        self.max_len = max_len
        turns = torch.outer(torch.arange(max_len, dtype=torch.float64),
                            base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model))
        unit = torch.polar(torch.ones_like(turns), turns)              # cos + i sin of every angle
        table = torch.view_as_real(unit).flip(-1).reshape(max_len, d_model)  # sin, cos, sin, cos, ...
        self.register_buffer("pe", table.float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] > self.max_len:
            raise ValueError(f"{x.shape[1]} positions do not fit in max_len = {self.max_len}")
        return x + self.pe[: x.shape[1]]


__all__ = ["PositionalEncoding"]
