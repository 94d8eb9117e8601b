"""Stand-in for chapter 0: `linear_rows` on `F.linear`, which exercise 0.1 forbids."""

import torch
import torch.nn.functional as F


def linear_rows(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """y = x W + b for every row of x. x: (..., d_in), W: (d_in, d_out), b: (d_out,)."""
    return F.linear(x, W.t(), b)


__all__ = ["linear_rows"]
