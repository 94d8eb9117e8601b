"""6.3: the two residual wirings, post_ln_residual and pre_ln_residual."""

from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course.probing.calls.add_norm import TanhMLP

from ..framework import Case, Check, Mistake, register
from ..kit import describe, variant, randn
from ._shared import _NOTES, _affine, _rows, drawn_shape

# ----------------------------------------------------- 6.3 residual wirings ---

def _residual_case(rng: np.random.Generator, *shape: int, kind: str = "normal",
                   dtype: torch.dtype = torch.float32) -> Case:
    shape = drawn_shape(rng, shape)  # sizes drawn around the spec's
    d = shape[-1]
    hidden_width = 2 * d + 1
    x = _rows(rng, *shape, kind=kind).to(dtype)
    mlp = TanhMLP(randn(rng, d, hidden_width) / d ** 0.5, 0.5 * randn(rng, hidden_width),
                  randn(rng, hidden_width, d) / hidden_width ** 0.5, 0.5 * randn(rng, d))
    norm = nn.LayerNorm(d, eps=float(rng.choice([1e-5, 1e-3])))
    gamma, beta = _affine(rng, d)
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
    mlp, norm = mlp.to(dtype), norm.to(dtype)
    label = (("float64 " if dtype == torch.float64 else "") + describe(x=x) + _NOTES[kind]
             + f", sub-layer: a tanh MLP {d} -> {hidden_width} -> {d}, norm: nn.LayerNorm({d}) with random gain"
             " and bias")
    return Case(label, (x, mlp, norm))


def _residual_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 4), {}), ((1, 5, 6), {})] if not hidden else [
        ((3, 7, 5), {}), ((2, 2, 3, 8), {}), ((6, 12), {}), ((9,), {}), ((2, 4, 16), {"kind": "offset"}),
        ((2, 5, 10), {"dtype": torch.float64})]
    cases = [_residual_case(rng, *shape, **kw) for shape, kw in specs]
    if hidden:  # the contract takes any callables: plain functions too
        x = randn(rng, *drawn_shape(rng, (3, 4, 7)))
        norm = functools.partial(F.layer_norm, normalized_shape=(x.shape[-1],))
        cases.append(Case(describe(x=x) + ", sub-layer: torch.sin, norm: F.layer_norm without gain and bias "
                                          "(plain functions, not modules)", (x, torch.sin, norm)))
    return cases


_WIRINGS = {
    "post": lambda x, f, n: n(x + f(x)),
    "pre": lambda x, f, n: x + f(n(x)),
    "no residual, post": lambda x, f, n: n(f(x)),
    "no residual, pre": lambda x, f, n: f(n(x)),
    "no norm": lambda x, f, n: x + f(x),
    "norm on the branch": lambda x, f, n: x + n(f(x)),
    "norm on x": lambda x, f, n: n(x) + f(x),
    "normalised residual": lambda x, f, n: n(x) + f(n(x)),
    "pre, then norm": lambda x, f, n: n(x + f(n(x))),
}


def _wired(case: Case, wiring: str) -> torch.Tensor:
    x, sublayer, norm = case.args
    with torch.no_grad():
        return _WIRINGS[wiring](x, sublayer, norm)


def _post(case: Case, wiring: str = "post") -> torch.Tensor:
    return _wired(case, wiring)


def _pre(case: Case, wiring: str = "pre") -> torch.Tensor:
    return _wired(case, wiring)


_NO_RESIDUAL = "Did you forget the residual? The input x itself must be added: "
_POST_SLIPS = {
    "pre": "Did you wire it pre-LN? Post-LN (the original) normalises after the addition: norm(x + sublayer(x)).",
    "no residual, post": _NO_RESIDUAL + "norm(x + sublayer(x)).",
    "no norm": "Did you forget the norm? Post-LN returns norm(x + sublayer(x)).",
    "norm on the branch": "Did you normalise only the sub-layer's output? Post-LN normalises the sum: "
                          "norm(x + sublayer(x)).",
    "norm on x": "Did you normalise x before adding? Post-LN normalises the sum: norm(x + sublayer(x)).",
}
_PRE_SLIPS = {
    "post": "Did you wire it post-LN? Pre-LN normalises only the sub-layer's input: x + sublayer(norm(x)).",
    "normalised residual": "Did you add the normalised input instead of the raw one? The residual path carries x "
                           "itself: x + sublayer(norm(x)), not norm(x) + sublayer(norm(x)).",
    "no residual, pre": _NO_RESIDUAL + "x + sublayer(norm(x)).",
    "no norm": "Did you forget the norm? Pre-LN normalises the sub-layer's input: x + sublayer(norm(x)).",
    "norm on the branch": "Did you normalise the sub-layer's output instead of its input? Pre-LN is "
                          "x + sublayer(norm(x)).",
    "pre, then norm": "Did you normalise the sum as well? In a pre-LN block the residual stream is never "
                      "normalised: the block is x + sublayer(norm(x)) (a pre-LN stack has one final LayerNorm, "
                      "after its last block).",
}

register(
    __name__,
    Check(
        name="post_ln_residual", cases=_residual_cases, expected=_post,
        mistakes=[Mistake(hint, variant(_post, wiring=w)) for w, hint in _POST_SLIPS.items()],
        hint="post_ln_residual returns norm(x + sublayer(x)): the sub-layer sees the raw x, and the norm comes "
             "last. Leave x unchanged (no +=) and keep its dtype.",
    ),
    Check(
        name="pre_ln_residual", cases=_residual_cases, expected=_pre,
        mistakes=[Mistake(hint, variant(_pre, wiring=w)) for w, hint in _PRE_SLIPS.items()],
        hint="pre_ln_residual returns x + sublayer(norm(x)): the raw x travels on the residual path, only the "
             "sub-layer's input is normalised. Leave x unchanged (no +=) and keep its dtype.",
    ),
)
