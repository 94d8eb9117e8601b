"""Reference solutions of chapter 02_embedding.

Generated from solutions/02_embedding/02_embedding.ipynb (cells tagged 'export') by
`python -m autograder release`. Do not edit: edit the solution notebook.
"""
import math

import torch
from torch import nn


def one_hot(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """One-hot float32 vectors. ids: integer tensor (...) -> (..., vocab_size).

    Raises ValueError naming the first id outside [0, vocab_size).
    """
    bad = (ids < 0) | (ids >= vocab_size)
    if bad.any():
        first = int(ids[bad].reshape(-1)[0])
        raise ValueError(f"id {first} is out of range for vocab_size {vocab_size} "
                         f"(valid ids are 0 .. {vocab_size - 1})")
    return (ids.unsqueeze(-1) == torch.arange(vocab_size, device=ids.device)).to(torch.float32)


def embed_one_hot(ids: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """Embed by matrix product. ids: (...) integers, E: (vocab_size, d_model) -> (..., d_model)."""
    return one_hot(ids, E.shape[0]) @ E


def embed_lookup(ids: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """Embed by row lookup. ids: (...) integers, E: (vocab_size, d_model) -> (..., d_model)."""
    return E[ids]


class Embedding(nn.Module):
    """A learned table of token vectors: ids (...) -> vectors (..., d_model)."""

    def __init__(self, vocab_size: int, d_model: int, scale: bool = False) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.scale = scale
        self.weight = nn.Parameter(torch.randn(vocab_size, d_model))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids: integer tensor (...) with values in [0, vocab_size) -> (..., d_model) float."""
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise TypeError(f"token ids must be an integer tensor, got dtype {ids.dtype}")
        bad = (ids < 0) | (ids >= self.vocab_size)
        if bad.any():
            first = int(ids[bad].reshape(-1)[0])
            raise IndexError(f"token id {first} is out of range for an embedding with "
                             f"vocab_size {self.vocab_size} (valid ids are 0 .. {self.vocab_size - 1})")
        x = self.weight[ids]
        if self.scale:
            x = x * math.sqrt(self.d_model)
        return x
