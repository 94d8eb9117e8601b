"""6.1: the layer_norm function, on ordinary rows and on hard ones (`layer_norm_stability`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..framework import Case, Check, Mistake, register
from ..kit import describe
from ._shared import _NOTES, ATOL, EPS, RTOL, _affine, _ln_mistakes, _manual, _rows, _unlike, drawn_eps, drawn_shape


def _ln_args(case: Case) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    x, gamma, beta = case.args[:3]
    eps = case.args[3] if len(case.args) > 3 else case.kwargs.get("eps", EPS)
    return x, gamma, beta, eps


def _ln(case: Case, *, eps_ignored: bool = False, **knobs: Any) -> Any:
    """layer_norm(x, gamma, beta, eps) written out; `eps_ignored`: always 1e-5."""
    x, gamma, beta, eps = _ln_args(case)
    return _manual(x, gamma, beta, EPS if eps_ignored else eps, **knobs)


# ---------------------------------------------------- 6.1 layer_norm ---

def _ln_case(rng: np.random.Generator, *shape: int, kind: str = "normal", eps: float | None = None,
             positional: bool = False, dtype: torch.dtype = torch.float32) -> Case:
    """A case like the spec: its sizes and eps drawn around the spec's (`drawn_shape`, `drawn_eps`)."""
    shape, eps = drawn_shape(rng, shape), drawn_eps(rng, eps)
    x = _rows(rng, *shape, kind=kind).to(dtype)
    gamma, beta = (t.to(dtype) for t in _affine(rng, shape[-1]))
    label = ("float64 " if dtype == torch.float64 else "") + describe(x=x, gamma=gamma) + _NOTES[kind]
    if eps is None:
        return Case(label + " (default eps)", (x, gamma, beta))
    if positional:
        return Case(label + f", eps={eps:g} passed positionally", (x, gamma, beta, eps))
    return Case(label + f", eps={eps:g}", (x, gamma, beta), {"eps": eps})


def _ln_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 8), {}), ((4, 6), {"eps": 0.1})] if not hidden else [
        ((3, 7, 5), {}), ((2, 3, 4, 6), {"eps": 1e-3}), ((9,), {}), ((5, 1), {}), ((2, 512), {}),
        ((2, 5, 12), {"dtype": torch.float64}), ((3, 4, 10), {"eps": 0.5, "positional": True}), ((6, 3), {"eps": 2.0})]
    return [_ln_case(rng, *shape, **kw) for shape, kw in specs]


def _stability_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((4, 6), "tiny", {}), ((4, 5), "constant", {}), ((2, 16), "offset", {})] if not hidden else [
        ((2, 6, 64), "offset", {}), ((3, 33), "offset", {"eps": 1e-3}), ((2, 3, 16), "tiny", {}),
        ((5, 7), "tiny", {"eps": 1e-4}), ((6, 10), "constant", {}), ((3, 2, 9), "constant", {"eps": 1e-2}),
        ((4, 24), "tiny", {"dtype": torch.float64})]
    return [_ln_case(rng, *shape, kind=kind, **kw) for shape, kind, kw in specs]


def _ln_oracle(case: Case) -> torch.Tensor:
    """F.layer_norm in float64, cast back to x's dtype."""
    x, gamma, beta, eps = _ln_args(case)
    return F.layer_norm(x.double(), x.shape[-1:], gamma.double(), beta.double(), eps).to(x.dtype)


_EPS_IGNORED = Mistake("Did you ignore the eps argument? Use the eps you are given (default 1e-5).",
                       _unlike(_ln, eps_ignored=True))
_LN_HINT = ("Per position, over the last axis: mean = x.mean(-1, keepdim=True), var = ((x - mean)**2).mean(-1, "
            "keepdim=True) (the biased variance), x_hat = (x - mean) / sqrt(var + eps), return gamma * x_hat + beta, "
            "in x's dtype, for any number of leading dimensions.")

register(
    __name__,
    Check(name="layer_norm", cases=_ln_cases, expected=_ln_oracle,
          mistakes=_ln_mistakes(_ln, offsets=False) + [_EPS_IGNORED], hint=_LN_HINT, rtol=RTOL, atol=ATOL),
    Check(name="layer_norm_stability", cases=_stability_cases, expected=_ln_oracle,
          mistakes=_ln_mistakes(_ln) + [_EPS_IGNORED],
          hint=_LN_HINT + " These rows are hard on purpose: around 1000 (take the mean of (x - mean)**2, not "
                          "mean(x**2) - mean**2), with a variance far below eps, or constant (variance 0).",
          rtol=RTOL, atol=ATOL),
)
