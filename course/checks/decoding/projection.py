"""9.1 the output projection (untied and tied to an embedding), 9.2 log-softmax."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .. import kit
from ..framework import NOT_APPLICABLE, Case, Check, Mistake, register
from ..kit import describe, randn, variant

# ------------------------------------------------- 9.1 OutputProjection ---

def _proj_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 4), 7)] if not hidden else [((3, 5, 8), 11), ((6,), 5), ((2, 2, 3, 16), 13), ((4, 1, 4), 3)]
    cases = []
    for shape, vocab in specs:
        d = shape[-1]
        x = randn(rng, *shape)
        w, b = randn(rng, vocab, d), randn(rng, vocab)
        cases.append(Case(f"OutputProjection({d}, {vocab}), " + describe(x=x), (x,),
                          meta={"d_model": d, "vocab": vocab, "weights": {"weight": w, "bias": b}}))
    return cases


def _proj(case: Case, *, bias: bool = True) -> Any:
    w, b = case.meta["weights"]["weight"].double(), case.meta["weights"]["bias"].double()
    out = case.args[0].double() @ w.T + (b if bias else 0)
    return kit.both_modes(out.float())


def _tied_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 4), 6)] if not hidden else [((2, 5, 8), 10), ((7,), 3), ((1, 4, 6), 9)]
    cases = []
    for shape, vocab in specs:
        d = shape[-1]
        cases.append(Case(f"OutputProjection({d}, {vocab}, embedding=Embedding({vocab}, {d})), " +
                          describe(x=randn(rng, *shape)), (randn(rng, *shape),),
                          meta={"d_model": d, "vocab": vocab, "before": randn(rng, vocab, d),
                                "after": randn(rng, vocab, d)}))
    return cases


def _tied(case: Case, *, copied: bool = False) -> dict:
    w = case.meta["before" if copied else "after"].double()
    return {"logits": (case.args[0].double() @ w.T).float(), "weight is the embedding's Parameter": not copied,
            "parameters": 2}


def _new_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    # "new": a plain module ("d_model 1": of width 1); "d wrong": tied to an Embedding(vocab, d') with
    # d' != d_model; "transposed": to an Embedding(d_model, vocab) (d_model != vocab), the weight's shape
    # read the wrong way round. Sizes drawn from the seed.
    # Two plain modules of different sizes among the visible cases: no one fixed answer fits both.
    kinds = ["new", "new"] if not hidden else ["new", "d_model 1", "d wrong", "transposed"]
    cases, drawn = [], set()
    for kind in kinds:
        d, v = (int(i) for i in rng.choice(np.arange(2, 13), size=2, replace=False))
        while (d, v) in drawn:
            d, v = (int(i) for i in rng.choice(np.arange(2, 13), size=2, replace=False))
        drawn.add((d, v))
        d, bad = (1 if kind == "d_model 1" else d), None
        if kind == "d wrong":
            bad = (v, int(rng.choice([i for i in range(1, 13) if i != d])))
        elif kind == "transposed":
            bad = (d, v)
        cases.append(Case(f"a new OutputProjection({d}, {v})" + (f" tied to an Embedding{bad}" if bad else ""),
                          meta={"d_model": d, "vocab": v, "bad": bad}))
    return cases


def _new_expected(case: Case) -> Any:
    d, v, bad = case.meta["d_model"], case.meta["vocab"], case.meta["bad"]
    if bad:
        return kit.raises("the embedding's weight must have shape (vocab_size, d_model) to be tied")
    return {"parameters": {"weight": ((v, d), "float32"), "bias": ((v,), "float32")}, "bias": torch.zeros(v)}


# ------------------------------------------------------- 9.2 log-softmax ---

_OVERFLOW = ("exp overflows to inf for logits around 100 and above (and underflows to 0 far below): subtract the "
             "maximum first, x - m - log(sum(exp(x - m))).")


def _lsm_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 5), {}, 1.0), ((3, 4), {"dim": 0}, 1.0), ((2, 6), {}, 1000.0)] if not hidden else [
        ((4, 7), {}, 1.0), ((2, 3, 9), {}, 5.0), ((11,), {}, 1.0), ((3, 5, 4), {"dim": 1}, 1.0),
        ((5, 6), {"dim": 0}, 300.0), ((2, 8), {}, 2000.0), ((3, 13), {}, -1500.0), ((2, 4, 3), {"dim": -2}, 1.0),
        ((4, 6), {"dtype": torch.float64}, 800.0)]
    cases = []
    for shape, kw, scale in specs:
        kw = dict(kw)
        dtype = kw.pop("dtype", torch.float32)
        x = (scale * randn(rng, *shape)).to(dtype) if scale > 0 else (scale + randn(rng, *shape)).to(dtype)
        note = "" if scale == 1.0 else (f", logits around {scale:g}" if scale < 0 else f", logits of size ~{scale:g}")
        cases.append(Case(("float64 " if dtype == torch.float64 else "") + describe(logits=x) + note +
                          (f", dim={kw['dim']}" if kw else ""), (x,), kw))
    return cases


def _lsm(case: Case, *, dim: int | None = None, kind: str = "right") -> Any:
    x = case.args[0]
    axis = case.kwargs.get("dim", -1) if dim is None else dim
    if axis >= x.dim():
        return NOT_APPLICABLE
    if kind == "naive":
        e = x.exp()
        return torch.log(e / e.sum(dim=axis, keepdim=True))
    if kind == "no max":
        return x - torch.log(x.exp().sum(dim=axis, keepdim=True))
    if kind == "softmax":
        return torch.softmax(x.double(), dim=axis).to(x.dtype)
    if kind == "no log-sum":
        return x - x.amax(dim=axis, keepdim=True)
    return torch.log_softmax(x.double(), dim=axis).to(x.dtype)


register(
    __name__,
    Check(name="output_projection", cases=_proj_cases, expected=_proj,
          mistakes=[Mistake("Did you forget the bias? logits = x @ weight.T + bias.", variant(_proj, bias=False))],
          hint="OutputProjection(d_model, vocab_size) holds weight (vocab_size, d_model) and bias (vocab_size,) as "
               "nn.Parameter; forward returns x @ weight.T + bias for x of any number of leading dimensions, the "
               "same in training and in eval mode."),
    Check(name="output_projection_tied", cases=_tied_cases, expected=_tied,
          mistakes=[Mistake("Did you copy the embedding's weight (clone, or a new nn.Parameter of its values)? Tying "
                            "means sharing: self.weight = embedding.weight, the very same Parameter, so that training "
                            "either layer changes both.", variant(_tied, copied=True))],
          hint="With embedding=..., set self.weight = embedding.weight (the same nn.Parameter object, not a copy); "
               "the bias is still the projection's own, starting at zeros."),
    Check(name="output_projection_new", guard=True, cases=_new_cases, expected=_new_expected,
          hint="A new OutputProjection(d_model, vocab_size) holds exactly two float32 parameters, weight "
               "(vocab_size, d_model) and bias (vocab_size,) initialised to zeros; tying to an embedding whose weight "
               "is not (vocab_size, d_model) raises ValueError."),
    Check(name="log_softmax", cases=_lsm_cases, expected=_lsm,
          mistakes=[Mistake("Did you compute log(exp(x) / sum(exp(x))) directly? " + _OVERFLOW,
                            variant(_lsm, kind="naive")),
                    Mistake("Did you forget to subtract the maximum? " + _OVERFLOW, variant(_lsm, kind="no max")),
                    Mistake("Did you take the softmax over the wrong axis? Use the dim you are given (default -1, "
                            "the vocabulary axis).", variant(_lsm, dim=-1)),
                    Mistake("Did you take the softmax over the first axis? Use the dim you are given (default -1).",
                            variant(_lsm, dim=0)),
                    Mistake("Did you return the softmax? log_softmax returns log-probabilities (all <= 0).",
                            variant(_lsm, kind="softmax")),
                    Mistake("Did you forget to subtract log(sum(exp(x - m)))? Subtracting the maximum alone does "
                            "not normalise.", variant(_lsm, kind="no log-sum"))],
          hint="log_softmax(x, dim) = x - m - log(sum(exp(x - m), dim)) with m = x.amax(dim, keepdim=True): the same "
               "shape and dtype as x, finite for logits in the thousands."),
)
