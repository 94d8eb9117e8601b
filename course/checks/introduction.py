"""Checks for chapter 0: the warm-up exercise on the row-vector convention."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .framework import Case, Check, Mistake, register
from .kit import describe, randn


def _linear_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    shapes = [(2, 3, 4, 5), (1, 1, 3, 3)] if not hidden else \
             [(3, 7, 5, 2), (2, 1, 6, 6), (4, 9, 1, 3), (1, 5, 8, 4)]
    cases = []
    for b, n, d_in, d_out in shapes:
        x, w, bias = randn(rng, b, n, d_in), randn(rng, d_in, d_out), randn(rng, d_out)
        cases.append(Case(describe(x=x, W=w), (x, w, bias)))
    if hidden:  # one unbatched input: the same code must handle (seq, d_in)
        x, w, bias = randn(rng, 4, 3), randn(rng, 3, 2), randn(rng, 2)
        cases.append(Case("unbatched " + describe(x=x, W=w), (x, w, bias)))
        cases.append(Case("float64 " + describe(x=x, W=w), (x.double(), w.double(), bias.double())))
    return cases


def _square_transposed(case: Case) -> torch.Tensor:
    x, w, b = case.args
    return x @ w.T + b


register(
    __name__,
    Check(
        name="linear_rows",
        cases=_linear_cases,
        expected=lambda c: F.linear(c.args[0], c.args[1].T, c.args[2]),  # PyTorch's own layer maths
        mistakes=[
            Mistake("Did you forget to add the bias b?", lambda c: c.args[0] @ c.args[1]),
            Mistake("Did you multiply by W transposed? With row vectors the product is x @ W, "
                    "W of shape (d_in, d_out).", _square_transposed),
            Mistake("Did you subtract the bias instead of adding it?",
                    lambda c: c.args[0] @ c.args[1] - c.args[2]),
        ],
        hint="With row vectors, each row of x is one token: y = x @ W + b, with W of shape "
             "(d_in, d_out). Use @ (or torch.matmul) so leading batch dimensions broadcast.",
    ),
)
