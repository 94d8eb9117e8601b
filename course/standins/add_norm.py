"""Stand-in for chapter 6: `LayerNorm` on `F.layer_norm` and `pre_ln_residual` on `torch.add`, which
the chapter's exercises forbid."""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


class LayerNorm(nn.Module):
    """Layer normalisation over the last axis with gain `gamma` (ones) and bias `beta` (zeros)."""

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        if not d_model > 0:
            raise ValueError(f"LayerNorm needs a positive d_model, not {d_model}")
        self.gamma, self.beta, self.eps = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = torch.promote_types(x.dtype, self.gamma.dtype)  # as gamma * x_hat + beta promotes
        return F.layer_norm(x.to(dtype), self.gamma.shape, self.gamma.to(dtype), self.beta.to(dtype), self.eps)


def pre_ln_residual(x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor],
                    norm: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """The pre-LN residual connection of chapter 6."""
    return torch.add(x, sublayer(norm(x)))


__all__ = ["LayerNorm", "pre_ln_residual"]
