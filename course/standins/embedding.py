"""Stand-in for chapter 2: `Embedding` on `F.embedding`, which exercise 2.3 forbids."""

import torch
import torch.nn.functional as F
from torch import nn


class Embedding(nn.Module):
    """ids (...) -> vectors (..., d_model); `weight` (vocab_size, d_model) drawn from N(0, 1)."""

    def __init__(self, vocab_size: int, d_model: int, scale: bool = False) -> None:
        super().__init__()
        self.vocab_size, self.d_model, self.scale = vocab_size, d_model, scale
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model).normal_())

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.dtype == torch.bool or ids.dtype.is_floating_point or ids.dtype.is_complex:
            raise TypeError(f"ids of dtype {ids.dtype}: token ids are integers")
        outside = ids[(ids < 0) | (ids >= self.vocab_size)]
        if outside.numel():
            raise IndexError(f"id {int(outside.flatten()[0])} is not in 0 .. {self.vocab_size - 1}, the ids of "
                             f"this table")
        vectors = F.embedding(ids, self.weight)
        return vectors * self.d_model ** 0.5 if self.scale else vectors


__all__ = ["Embedding"]
