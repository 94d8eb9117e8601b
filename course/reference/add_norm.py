"""Reference solutions of chapter 06_add_norm.

Generated from solutions/06_add_norm/06_add_norm.ipynb (cells tagged 'export') by
`python -m autograder release`. Do not edit: edit the solution notebook.
"""
from collections.abc import Callable

import torch
from torch import nn


def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor,
               eps: float = 1e-5) -> torch.Tensor:
    """Normalise each position of x over its last axis, then apply the gain gamma and bias beta.

    x: (..., d_model), floating point; gamma, beta: (d_model,). Returns the shape and dtype of x.
    """
    mean = x.mean(dim=-1, keepdim=True)
    centred = x - mean
    var = (centred ** 2).mean(dim=-1, keepdim=True)  # biased: divide by d_model
    x_hat = centred / torch.sqrt(var + eps)           # eps inside the square root
    return gamma * x_hat + beta


class LayerNorm(nn.Module):
    """Layer normalisation over the last axis, with a learned gain gamma and bias beta,
    each of shape (d_model,)."""

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        if d_model < 1:
            raise ValueError(f"d_model must be at least 1, got {d_model}")
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))   # gain: starts as the identity
        self.beta = nn.Parameter(torch.zeros(d_model))   # bias: starts at zero

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (..., d_model) -> the same shape and dtype."""
        return layer_norm(x, self.gamma, self.beta, self.eps)


def post_ln_residual(x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor],
                     norm: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Post-LN, the original Transformer: norm(x + sublayer(x))."""
    return norm(x + sublayer(x))


def pre_ln_residual(x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor],
                    norm: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Pre-LN, this course: x + sublayer(norm(x)); the residual path carries the raw x."""
    return x + sublayer(norm(x))
