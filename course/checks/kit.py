"""Helpers every chapter's checks share: inputs, masks, modules, labels.

A chapter's check module (``course.checks.<topic>``) describes its cases, its
oracle and its known mistakes; the plumbing lives here, written once:

* hints: `same_in_both_modes` (the sentence for a module with no dropout);
* inputs: `even`, `grown`, `drawn_shape`, `drawn_p`, `randn`, `causal_mask`, `padding_mask`; a draw
  that shows its clause whatever the seed: `drawn_until`;
* expected errors: `raises` (the oracle's answer where the contract asks for
  an exception);
* mistakes as the chapter's oracle with knobs: `variant(oracle, **knobs)`,
  returning `NOT_APPLICABLE` where a knob makes no difference to a case, `unless` (a mistake shown
  on some cases only), `unlike` (one shown only where it is outside the tolerance);
* modules: `both_modes` (the expected result of `run_modes`), and, from
  `course.probing.kit` (the kernel runs them): `build`, `load_weights`,
  `run_modes`, `parameter_table`;
* labels: `shape_of`, `describe`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from course.probing.cases import Case
from course.probing.kit import build, load_weights, parameter_table, randn, run_modes  # noqa: F401  (as kit.*)
from course.twins import padding_mask  # noqa: F401  (the chapters' checks use it as kit.padding_mask)

from course.probing.plain import to_plain

from .framework import NOT_APPLICABLE, Raises, mismatch

NEG_INF = float("-inf")


# --------------------------------------------------------------- hints ---

def same_in_both_modes(what: str = "module") -> str:
    """A hint's sentence for a module run in eval and in training mode (`run_modes`'s keys) that has no
    dropout, or dropout 0: the two results must agree."""
    return f"if only key 'train' differs, your {what} behaves differently in training mode."


# -------------------------------------------------------------- inputs ---

def even(rng: np.random.Generator, low: int, high: int) -> int:
    """Twice a whole number drawn from low..high - 1: an even size, or an offset that keeps a size's parity."""
    return 2 * int(rng.integers(low, high))


def grown(rng: np.random.Generator, n: int, most: int = 4) -> int:
    """n plus an even offset drawn from 0..most (an odd size stays odd); sizes 0 and 1, edge cases, stay."""
    return n if n <= 1 else n + even(rng, 0, most // 2 + 1)


def drawn_shape(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape like `shape`, every size above 1 `grown`: each case's kind (the number of dimensions, sizes of 1,
    odd sizes, a wide last axis) stays, its sizes change with the seed."""
    return tuple(grown(rng, n) for n in shape)


def drawn_p(rng: np.random.Generator, p: float | None) -> float | None:
    """A dropout probability moved by -0.05, 0 or 0.05 (drawn); None (not passed) and 0 stay."""
    return p if not p else round(p + float(rng.choice([-0.05, 0.0, 0.05])), 2)


def drawn_until(draw: Callable[[], Any], shows: Callable[[Any], bool], what: str, tries: int = 200) -> Any:
    """The first of `draw()`'s values for which `shows(value)`: a case meant to exercise one clause
    of a contract (float32 angles going wrong, an argument that changes the answer) exercises it on
    every draw of the grader's seed, not on most. Raises RuntimeError (a bug in the check) if no draw
    shows `what`."""
    for _ in range(tries):
        value = draw()
        if shows(value):
            return value
    raise RuntimeError(f"no draw in {tries} shows {what}: the case generator cannot make its case")


def causal_mask(n: int) -> torch.Tensor:
    """(n, n) additive mask: 0 on and below the diagonal, -inf above it."""
    return torch.triu(torch.full((n, n), NEG_INF), diagonal=1)


def raises(why: str, *names: str) -> Raises:
    """The oracle's answer where the contract asks for an exception
    (ValueError unless other exception types are named)."""
    return Raises(names or ("ValueError",), why)


# ------------------------------------------------------------ mistakes ---

def variant(oracle: Callable[..., Any], **knobs: Any) -> Callable[[Case], Any]:
    """A mistake's output: the chapter's oracle with some knobs turned.

    ``variant(attend, scale="d_k")`` is ``lambda case: attend(case, scale="d_k")``,
    but `NOT_APPLICABLE` where the knobbed oracle expects an exception (an
    expected error is no mistake's output). Where the knobs leave the answer
    as it is, the harness skips the mistake itself: it cannot be told apart.
    """
    def output(case: Case) -> Any:
        wrong = oracle(case, **knobs)
        return NOT_APPLICABLE if isinstance(wrong, Raises) else wrong
    return output


def unless(applies: Callable[[Case], bool], output: Callable[[Case], Any]) -> Callable[[Case], Any]:
    """`output` on the cases where `applies(case)`, `NOT_APPLICABLE` elsewhere."""
    def gated(case: Case) -> Any:
        return output(case) if applies(case) else NOT_APPLICABLE
    return gated


def unlike(oracle: Callable[[Case], Any], wrong: Callable[[Case], Any], rtol: float, atol: float
           ) -> Callable[[Case], Any]:
    """The mistake `wrong`, NOT_APPLICABLE where it is within (rtol, atol) of `oracle` (eps outside the
    root on rows of variance 1, say), not only equal to it: the slip does not show there, and naming it
    for an answer wrong in another way would mislead."""
    def output(case: Case) -> Any:
        out = wrong(case)
        if out is NOT_APPLICABLE or isinstance(out, Raises) or \
                mismatch(to_plain(out), to_plain(oracle(case)), rtol, atol) is not None:
            return out
        return NOT_APPLICABLE
    return output


# ------------------------------------------------------------- modules ---

def both_modes(value: Any) -> dict[str, Any]:
    """The expected result of `run_modes` for a module without dropout."""
    return {"eval": value, "train": value}


# --------------------------------------------------------------- labels ---

def shape_of(x: torch.Tensor | np.ndarray) -> str:
    """'(2, 3, 4)'."""
    return str(tuple(x.shape))


def describe(**tensors: torch.Tensor | None) -> str:
    """'q (2, 3, 4), k (2, 5, 4)': the shapes of a case's tensors, for its label."""
    return ", ".join(f"{name} {shape_of(t)}" for name, t in tensors.items() if t is not None)

