"""What the chapter's checks share: the tolerances, the inputs (rows of several kinds, a gain and a bias),
layer norm written out with knobs for the usual slips (`_manual`) and the mistakes built from them."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from ..framework import NOT_APPLICABLE, Mistake
from ..kit import drawn_shape, grown, randn, unlike, variant  # noqa: F401  (this package's checks import them from here)

EPS = 1e-5
# float32 layer norm is good to about 1e-5 of the rows' spread; rows around 1000 with a spread of 8 lose a
# few times more (one float32 step at 1000 is 6e-5), so the absolute tolerance is 1e-4.
RTOL, ATOL = 1e-4, 1e-4


# ------------------------------------------------------------- inputs ---

def drawn_eps(rng: np.random.Generator, eps: float | None) -> float | None:
    """eps halved, kept or doubled (drawn); None (the default, not passed) stays None."""
    return None if eps is None else float(eps * rng.choice([0.5, 1.0, 2.0]))


def _rows(rng: np.random.Generator, *shape: int, kind: str = "normal") -> torch.Tensor:
    """x of `shape`: standard normal rows, or rows around 1000 with spread 8 ('offset'), rows of spread
    ~1e-3 ('tiny': the variance is far below eps), or some rows constant ('constant', with exact values)."""
    x = randn(rng, *shape)
    if kind == "offset":
        return 1000.0 + 8.0 * x
    if kind == "tiny":
        return 1e-3 * x
    if kind == "constant":
        flat = x.reshape(-1, shape[-1])
        for i in range(0, flat.shape[0], 2):
            flat[i] = float(rng.integers(-6, 7)) / 4  # every other row constant: 1.25, -0.5, ...
    return x


_NOTES = {"normal": "", "offset": ", rows around 1000", "tiny": ", rows of spread ~1e-3 (variance far below eps)",
          "constant": ", every other row constant"}


def _affine(rng: np.random.Generator, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A gain around 1 and a bias around 0, neither trivial (so swapping them shows)."""
    return 1.0 + 0.5 * randn(rng, d), 0.5 * randn(rng, d)


# ---------------------------------------------------------- the maths ---

def _manual(x: torch.Tensor, gamma: torch.Tensor | None, beta: torch.Tensor | None, eps: float, *,
            denom: str = "sqrt(var+eps)", correction: int = 0, dims: str = "last", centre: bool = True,
            one_pass: bool = False, affine: str = "gamma, beta") -> Any:
    """Layer norm written out in x's dtype; the knobs are the usual slips. NOT_APPLICABLE where
    the wrong axes do not exist (that code raises: the general hint speaks)."""
    axes = {"last": (-1,), "first": (0,), "all": tuple(range(x.dim())), "last two": (-2, -1)}[dims]
    if max(len(axes), 1) > x.dim() or (dims == "last two" and x.dim() < 2):
        return NOT_APPLICABLE
    with warnings.catch_warnings():  # the unbiased variance of one number warns (and is NaN)
        warnings.simplefilter("ignore")
        mean = x.mean(dim=axes, keepdim=True)
        var = ((x * x).mean(dim=axes, keepdim=True) - mean * mean if one_pass
               else x.var(dim=axes, keepdim=True, correction=correction))
    std = var.sqrt()
    scale = {"sqrt(var+eps)": lambda: (var + eps).sqrt(), "sqrt(var)+eps": lambda: std + eps,
             "sqrt(var)": lambda: std, "var+eps": lambda: var + eps, "sqrt(std+eps)": lambda: (std + eps).sqrt()}
    x_hat = ((x - mean) if centre else x) / scale[denom]()
    if gamma is None or affine == "none":
        return x_hat
    return {"gamma, beta": lambda: x_hat * gamma + beta, "swapped": lambda: x_hat * beta + gamma,
            "no beta": lambda: x_hat * gamma}[affine]()


def _unlike(oracle: Any, **knobs: Any) -> Any:
    """`variant(oracle, **knobs)` where it is outside the checks' tolerance (`kit.unlike`)."""
    return unlike(oracle, variant(oracle, **knobs), RTOL, ATOL)


_SLIPS = [  # (hint, `_manual` knobs)
    (("Did you put eps outside the square root? The denominator is sqrt(var + eps), not sqrt(var) + eps: the two "
      "differ where the variance is small compared with eps."), {"denom": "sqrt(var)+eps"}),
    ("Did you forget eps? A constant row has variance 0, and 0 / sqrt(0) is NaN: divide by sqrt(var + eps).",
     {"denom": "sqrt(var)"}),
    (("Did you use the unbiased variance (torch.var's default, dividing by d_model - 1)? Layer norm divides by "
      "d_model: x.var(dim=-1, unbiased=False), or the mean of (x - mean)**2."), {"correction": 1}),
    (("Did you normalise over the first axis (dim=0)? Layer norm normalises each position over its features: the "
      "last axis, dim=-1, with keepdim=True."), {"dims": "first"}),
    (("Did you normalise over the whole tensor? Each position (each row along the last axis) gets its own mean and "
      "variance: dim=-1, keepdim=True."), {"dims": "all"}),
    (("Did you normalise over the last two axes (the whole sequence)? Each position gets its own mean and variance, "
      "over its d_model features only: dim=-1."), {"dims": "last two"}),
    (("Did you divide by the standard deviation's square root? The denominator is sqrt(var + eps), with var the "
      "mean of (x - mean)**2."), {"denom": "sqrt(std+eps)"}),
    ("Did you forget the square root? Divide by sqrt(var + eps), not by var + eps.", {"denom": "var+eps"}),
    ("Did you forget to subtract the mean? x_hat = (x - mean) / sqrt(var + eps).", {"centre": False}),
    ("Did you swap gamma and beta? The output is gamma * x_hat + beta: gamma scales, beta shifts.",
     {"affine": "swapped"}),
    ("Did you forget the gain and the bias? Return gamma * x_hat + beta.", {"affine": "none"}),
    ("Did you forget to add beta? Return gamma * x_hat + beta.", {"affine": "no beta"}),
]
_ONE_PASS = (("Did you compute the variance as mean(x**2) - mean(x)**2? For rows around 1000 both terms are near "
              "10^6 and float32 loses the difference (catastrophic cancellation): take the mean of (x - mean)**2 "
              "instead."), {"one_pass": True})


def _ln_mistakes(oracle: Any, offsets: bool = True) -> list[Mistake]:
    """The slips as `oracle` (a function of a case and `_manual`'s knobs) with knobs; the one-pass
    variance only for checks whose cases have rows around 1000 (`offsets`)."""
    return [Mistake(hint, _unlike(oracle, **knobs)) for hint, knobs in [_ONE_PASS] * offsets + _SLIPS]
