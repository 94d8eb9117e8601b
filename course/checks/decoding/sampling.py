"""9.3 the top-k and top-p filters, 9.4 sample (exact draws, and the distribution over many draws)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from course.probing.calls.decoding import DRAWS

from ..framework import NOT_APPLICABLE, Case, Check, Mistake, register
from ..kit import describe, raises, randn, variant
from ._shared import mass_above, oracle_probs, oracle_top_k, oracle_top_p

# ------------------------------------------------------- 9.3 the filters ---

def _with_ties(rng: np.random.Generator, x: torch.Tensor, k: int) -> torch.Tensor:
    """Give each row's (k+1)-th largest logit the value of its k-th: a tie across the boundary."""
    x = x.clone()
    order = x.sort(dim=-1, descending=True).indices
    kth = x.gather(-1, order[..., k - 1:k])
    return x.scatter(-1, order[..., k:k + 1], kth)


def _topk_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 6), 2, ""), ((1, 5), 1, "tie"), ((2, 4), 4, ""), ((2, 5), 0, "")] if not hidden else [
        ((3, 10), 3, ""), ((12,), 5, ""), ((2, 3, 8), 2, ""), ((4, 9), 1, ""), ((3, 7), 3, "tie"), ((2, 6), 6, ""),
        ((2, 5), 9, ""), ((3, 8), 4, "float64"), ((2, 3, 7), 2, "tie"), ((2, 6), -1, ""), ((5, 11), 10, "")]
    cases = []
    for shape, k, kind in specs:
        x = randn(rng, *shape) * 2
        if kind == "tie":
            x = _with_ties(rng, x, k)
        if kind == "float64":
            x = x.double()
        note = {"tie": ", a tie between the k-th and (k+1)-th largest", "float64": ", float64", "": ""}[kind]
        cases.append(Case(describe(logits=x) + f", k={k}" + note, (x, k)))
    return cases


def _topk(case: Case, **knobs: Any) -> Any:
    x, k = case.args
    if k < 1:
        return raises("k must be at least 1")
    if knobs.get("extra", 0) < 0 and k == 1:
        return NOT_APPLICABLE
    return oracle_top_k(x, k, **knobs)


def _filter_probs(oracle: Any) -> Any:
    """A filter that renormalised: returned the kept tokens' log-probabilities instead of their logits."""
    def output(case: Case) -> Any:
        out = oracle(case)
        return torch.log_softmax(out, dim=-1) if isinstance(out, torch.Tensor) else NOT_APPLICABLE
    return output


def _margin_ok(x: torch.Tensor, p: float, margin: float = 2e-3) -> bool:
    """No cumulative mass (with ties counted together) within `margin` of p, and no NaN trouble."""
    probs, above = mass_above(x)
    return bool(((above - p).abs() > margin).all() and ((above + probs - p).abs() > margin).all())


def running_rule(x: torch.Tensor, p: float, *, before: bool = False) -> torch.Tensor:
    """The contract's computation, in the logits' dtype: the crossing token is the first whose running sum
    (torch.cumsum of the sorted softmax) is >= p. `before`: the other reading, the mass before each token
    computed as cumsum - probs and tested < p, which can keep one token more where p equals a running sum."""
    probs = torch.softmax(x, dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    running = ranked.cumsum(dim=-1)
    if before:
        last = ((running - ranked) < p).sum(dim=-1, keepdim=True) - 1
    else:
        last = (running < p).sum(dim=-1, keepdim=True).clamp(max=x.shape[-1] - 1)
    return x.masked_fill(probs < ranked.gather(-1, last), float("-inf"))


def _on_boundary(rng: np.random.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, float]:
    """Logits and a p equal to one of the first row's running sums, drawn until the two readings disagree."""
    for _ in range(1000):
        x = (randn(rng, *shape) * 1.5).to(dtype)
        running = torch.softmax(x, dim=-1).sort(dim=-1, descending=True).values.cumsum(dim=-1)
        p = float(running.reshape(-1, shape[-1])[0, int(rng.integers(0, shape[-1] - 2))])
        if not torch.equal(running_rule(x, p), running_rule(x, p, before=True)):
            return x, p
    raise RuntimeError("no boundary case found")


def _boundary(case: Case) -> bool:
    """A case whose p is exactly a running sum (the trusted side's note: the kernel is not told)."""
    return bool(case.aid.get("boundary"))


def _topp_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 6), 0.5, ""), ((1, 5), 0.7, "tie"), ((2, 5), 1.0, ""), ((2, 4), 0.0, "")] if not hidden else [
        ((3, 10), 0.9, ""), ((12,), 0.6, ""), ((2, 3, 8), 0.75, ""), ((4, 9), 0.02, ""), ((3, 7), 0.5, "tie"),
        ((2, 6), 1.0, ""), ((3, 8), 0.8, "float64"), ((2, 3, 7), 0.4, "tie"), ((2, 6), 1.5, ""), ((2, 5), -0.1, ""),
        ((5, 11), 0.95, "")]
    cases = []
    for shape, p, kind in specs:
        for _ in range(200):  # redraw until no cumulative mass sits on the boundary p
            x = randn(rng, *shape) * 1.5
            if kind == "tie":  # tie the token that crosses p with the next one
                probs, above = mass_above(x)
                flat = x.reshape(-1, shape[-1]).clone()
                for r, (pr, ab) in enumerate(zip(probs.reshape(-1, shape[-1]), above.reshape(-1, shape[-1]))):
                    crossing = int(torch.where(ab < p, pr, torch.full_like(pr, 2.0)).argmin())
                    below = torch.where(pr < pr[crossing], pr, torch.full_like(pr, -1.0))
                    if below.max() > 0:
                        flat[r, int(below.argmax())] = flat[r, crossing]
                x = flat.reshape(shape)
            if not 0 < p < 1 or _margin_ok(x, p):
                break
        if kind == "float64":
            x = x.double()
        note = {"tie": ", the token that crosses p tied with the next", "float64": ", float64", "": ""}[kind]
        cases.append(Case(describe(logits=x) + f", p={p:g}" + note, (x, p)))
    for shape, dtype in [((1, 9), torch.float32)] if not hidden else [((2, 10), torch.float32),
                                                                     ((12,), torch.float32), ((1, 8), torch.float64)]:
        x, p = _on_boundary(rng, shape, dtype)
        cases.append(Case(describe(logits=x) + f", p={p!r}: exactly a running sum of the first row's sorted "
                          "probabilities", (x, p), aid={"boundary": True}))
    return cases


def _topp(case: Case, **knobs: Any) -> Any:
    x, p = case.args
    if not 0 < p <= 1:
        return raises("p must be in (0, 1]")
    if p == 1 and knobs:
        return NOT_APPLICABLE
    if _boundary(case):  # only the contract's exact computation decides here; the other slips are judged elsewhere
        return NOT_APPLICABLE if knobs else running_rule(x, p)
    out = oracle_top_p(x, p, **knobs)
    if knobs.get("rule") == "exclusive" and torch.isneginf(out).all(dim=-1).any():
        return NOT_APPLICABLE  # that code may well raise or give NaN: the general hint speaks
    return out


def _topp_order(case: Case) -> Any:
    """Ties broken by sort order: exactly the ranks whose mass before them is < p."""
    x, p = case.args
    if not 0 < p < 1 or _boundary(case):
        return NOT_APPLICABLE
    probs = torch.softmax(x.double(), dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)
    keep_sorted = (sorted_probs.cumsum(-1) - sorted_probs) < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return torch.where(keep, x, torch.full_like(x, float("-inf")))


_ZERO = ("Did you set the removed logits to 0? 0 is an ordinary logit: the softmax would still give those tokens "
         "probability. Use float('-inf'), so that they get exactly 0 and the kept tokens share all the mass.")
_RENORM = ("Did you return log-probabilities (renormalised)? The filter returns the kept logits unchanged and -inf "
           "elsewhere; the softmax in sample renormalises.")

# ------------------------------------------------------------ 9.4 sample ---

def _sample_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((4, 6), 1.0, None, None), ((3, 8), 0.5, 3, None), ((3, 7), 2.0, None, 0.8), ((3, 5), 0.0, None, None),
             ((2, 5), -1.0, None, None)] if not hidden else [
        ((6, 9), 1.0, None, None), ((5, 12), 0.7, 4, None), ((4, 10), 1.5, None, 0.6), ((5, 8), 0.8, 3, 0.7),
        ((4, 7), 0.0, None, None), ((3, 6), 0.0, 2, 0.5), ((8, 11), 3.0, 20, 1.0), ((4, 6), -0.5, None, None),
        ((1, 13), 0.3, None, 0.9), ((4, 9), None, 3, None), ((3, 8), None, None, 0.8)]  # None: temperature left out
    cases = []
    for i, (shape, t, k, p) in enumerate(specs):
        x = randn(rng, *shape) * 1.5
        if t == 0:
            x[0, 1] = x[0, 3] = x[0].max() + 1  # a tie for the maximum: the lowest id wins
        kw = {name: v for name, v in (("temperature", t), ("top_k", k), ("top_p", p)) if v is not None}
        cases.append(Case(describe(logits=x) + ", " + ", ".join(f"{n}={v}" for n, v in kw.items()) +
                          (", a tie for the largest logit" if t == 0 else ""), (x,), kw,
                          meta={"seed": int(rng.integers(2**31))}))
    for shape, kw in [((4, 7), {"temperature": 1.0})] + ([((5, 9), {"top_k": 4})] if hidden else []):
        x = randn(rng, *shape) * 1.5  # generator left out: the draws come from the global generator, seeded
        cases.append(Case(describe(logits=x) + ", " + ", ".join(f"{n}={v}" for n, v in kw.items()) +
                          ", no generator (torch.manual_seed before the call)", (x,), kw,
                          meta={"global seed": int(rng.integers(2**31))}))
    return cases


def _generator(case: Case) -> torch.Generator | None:
    """The generator the case's draw uses: its own seeded one, or (generator left out) the global
    one, seeded as the probe seeds it."""
    if "global seed" in case.meta:
        torch.manual_seed(case.meta["global seed"])
        return None
    return torch.Generator().manual_seed(case.meta["seed"])


def _draw(case: Case, **knobs: Any) -> Any:
    x = case.args[0]
    t, k, p = case.kwargs.get("temperature", 1.0), case.kwargs.get("top_k"), case.kwargs.get("top_p")
    if t < 0:
        return raises("temperature must be >= 0")
    if t == 0:
        return NOT_APPLICABLE if knobs else x.argmax(dim=-1)
    probs = oracle_probs(x, t, k, p, **knobs).float()
    return torch.multinomial(probs, 1, generator=_generator(case))[:, 0]


def _fixed_generator(case: Case) -> Any:
    """A sample that draws from a generator of its own (seed 0) when none is given."""
    if "global seed" not in case.meta:
        return NOT_APPLICABLE
    x, kw = case.args[0], case.kwargs
    probs = oracle_probs(x, kw.get("temperature", 1.0), kw.get("top_k"), kw.get("top_p")).float()
    return torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(0))[:, 0]


def _temperature_zero_divides(case: Case) -> Any:
    if case.kwargs.get("temperature", 1.0) != 0:
        return NOT_APPLICABLE
    raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")


def _dist_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    # (temperature, top_k, top_p, mirror): a mirrored case ranks the logits in the reverse order of the
    # case before it, so the tokens it keeps are ones the case before drops and no single token id is
    # in the support of every case (a sampler that always returns one id fails sample_support somewhere)
    specs = [(0.5, None, None, False), (1.0, 3, None, False), (1.0, None, 0.6, True)] if not hidden else [
        (2.0, None, None, False), (0.7, 4, None, False), (1.0, 2, 0.9, True), (1.3, None, 0.75, False),
        (0.5, None, 0.9, False), (1.0, 6, None, False)]
    cases, order = [], np.arange(8)
    for t, k, p, mirror in specs:
        order = 7 - order if mirror else rng.permutation(8)
        base = torch.linspace(2.0, -1.5, 8)[torch.from_numpy(order)]  # well separated logits
        kw = {"temperature": t} | ({"top_k": k} if k is not None else {}) | ({"top_p": p} if p is not None else {})
        cases.append(Case(f"{DRAWS} draws from logits {[round(v, 2) for v in base.tolist()]}, " +
                          ", ".join(f"{n}={v}" for n, v in kw.items()), (base,), kw,
                          meta={"seed": int(rng.integers(2**31))}))
    return cases


def _dist(case: Case, **knobs: Any) -> Any:
    x, kw = case.args[0], case.kwargs
    if knobs.get("k_extra") and kw.get("top_k") is None or knobs.get("p_rule") and kw.get("top_p") is None:
        return NOT_APPLICABLE
    return oracle_probs(x[None], kw["temperature"], kw.get("top_k"), kw.get("top_p"), **knobs)[0]


_AFTER = ("Did you apply the temperature after the softmax? Dividing probabilities by T changes nothing once "
          "they are renormalised: divide the logits by T, then take the softmax.")
_K_EXTRA = "Did you keep k + 1 tokens? top-k keeps the k most likely tokens (ties with the k-th too)."
_EXCLUSIVE = ("Did you drop the token that crosses p? Top-p keeps the smallest set whose mass reaches p: the token "
              "that takes the running sum to p or beyond is kept.")
_ONE_MORE = ("Did you keep one token too many? Stop at the token that takes the running sum to p: the next one "
             "is removed.")

register(
    __name__,
    Check(name="top_k_filter", cases=_topk_cases, expected=_topk,
          mistakes=[Mistake(_K_EXTRA, variant(_topk, extra=1)),
                    Mistake("Did you keep k - 1 tokens? The k-th largest logit is kept too (its index is k - 1).",
                            variant(_topk, extra=-1)),
                    Mistake(_ZERO, variant(_topk, fill=0.0)),
                    Mistake("Did you keep exactly k tokens (by index)? A token tied with the k-th largest logit is "
                            "kept too: keep every logit >= the k-th largest value.", variant(_topk, break_ties=True)),
                    Mistake(_RENORM, _filter_probs(_topk))],
          hint="top_k_filter keeps every logit >= the k-th largest of its row (torch.topk(logits, k).values[..., -1:]) "
               "and sets the others to -inf, in a new tensor of the same shape and dtype; k >= vocab keeps all, "
               "k < 1 raises ValueError."),
    Check(name="top_p_filter", cases=_topp_cases, expected=_topp,
          mistakes=[Mistake(_EXCLUSIVE, variant(_topp, rule="exclusive")),
                    Mistake(_ONE_MORE, variant(_topp, rule="one more")),
                    Mistake(_ZERO, variant(_topp, fill=0.0)),
                    Mistake("Did you break a tie by sort order? Tokens as likely as the one that crosses p are kept "
                            "too: keep every token whose probability is >= the crossing token's.", _topp_order),
                    Mistake(_RENORM, _filter_probs(_topp)),
                    Mistake("Where p equals a running sum exactly: did you test the mass *before* each token, "
                            "cumsum - probs < p? In floating point that can keep one token more. The contract's "
                            "crossing token is the first whose running sum (torch.cumsum of the sorted "
                            "probabilities) is >= p.",
                            lambda case: running_rule(*case.args, before=True) if _boundary(case) else NOT_APPLICABLE)],
          hint="top_p_filter: sort the probabilities (softmax of the row) in decreasing order; the token that "
               "takes the running sum (torch.cumsum) to p or beyond is the last kept; keep every token at least "
               "as likely as it, set the others to -inf. p = 1 keeps all; p outside (0, 1] raises ValueError."),
    Check(name="sample", cases=_sample_cases, expected=_draw,
          mistakes=[Mistake(_AFTER, variant(_draw, after_softmax=True)),
                    Mistake(_EXCLUSIVE, variant(_draw, p_rule="exclusive")),
                    Mistake("Did you give temperature another default than 1.0? Left out, it is 1.0: sample from "
                            "the (filtered) distribution itself, not greedily.",
                            lambda case: case.args[0].argmax(dim=-1) if "temperature" not in case.kwargs
                            else NOT_APPLICABLE),
                    Mistake("Did you divide by a temperature of 0? Temperature 0 means greedy: return "
                            "logits.argmax(dim=-1).", _temperature_zero_divides),
                    Mistake("Did you make a generator of your own when none is given? generator=None means "
                            "PyTorch's global generator (pass generator=None on to torch.multinomial), so that "
                            "torch.manual_seed decides the draws.", _fixed_generator)],
          hint="sample: temperature < 0 raises ValueError; temperature 0 returns logits.argmax(-1); otherwise divide "
               "the logits by the temperature, apply top_k_filter then top_p_filter (when given), take the softmax "
               "and draw once with torch.multinomial(probs, 1, generator=generator)[:, 0]: (batch,) int64 (generator "
               "None: the global generator)."),
    Check(name="sample_distribution", cases=_dist_cases, expected=_dist, rtol=0.0, atol=0.03,
          mistakes=[Mistake(_AFTER, variant(_dist, after_softmax=True)),
                    Mistake(_K_EXTRA, variant(_dist, k_extra=1)),
                    Mistake(_EXCLUSIVE, variant(_dist, p_rule="exclusive")),
                    Mistake(_ONE_MORE, variant(_dist, p_rule="one more"))],
          hint=f"Over {DRAWS} draws each token must appear with its probability (within 0.03) under the temperature "
               "and the filters."),
    # atol 0 and a huge rtol: |frequency - p| <= 1e9 p, so a token of probability 0 must never be drawn, while
    # a kept token's frequency is sample_distribution's to judge
    Check(name="sample_support", cases=_dist_cases, expected=_dist, rtol=1e9, atol=0.0, exact_dtype=False,
          hint=f"Over {DRAWS} seeded draws, no token outside what top-k and top-p keep may ever be drawn: filter the "
               "(temperature-scaled) logits to -inf before the softmax."),
)
