"""10.2 cross-entropy that skips padding, with label smoothing that gives padding no mass."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from course.probing.plain import dtype_name

from ..framework import Case, Check, Mistake, register
from ..kit import describe, raises, randn, unless, variant


def _ce_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    # (logits shape, pad, label_smoothing, padded positions per row, scale, dtype); None: left out, so
    # that each default is exercised while the other argument is given
    # scale "-inf": some logits -inf (classes ruled out, never a target), which the contract allows only with
    # label_smoothing 0 (with label_smoothing > 0 finite logits are a precondition, which these cases respect)
    specs = [((2, 4, 6), None, None, 0, 1.0, torch.float32), ((2, 5, 6), 0, None, 2, 1.0, torch.float32),
             ((2, 5, 6), 0, 0.1, 2, 1.0, torch.float32),
             ((3, 5), None, 0.0, 0, "-inf", torch.float32)] if not hidden else [
        ((3, 7, 11), 0, 0.1, 3, 2.0, torch.float32), ((4, 6, 9), 3, 0.2, 2, 1.0, torch.float64),
        ((2, 5, 7), None, 0.0, 0, "-inf", torch.float64), ((3, 4, 6), 1, None, 1, "-inf", torch.float32),
        ((12, 8), 0, 0.1, 0, 1.0, torch.float32), ((2, 6, 7), None, 0.1, 0, 1.0, torch.float64),
        ((3, 4, 5), 1, 0.0, 1, 1.0, torch.float32), ((2, 5, 8), 0, 1.0, 2, 1.0, torch.float64),
        ((2, 6, 10), 0, 0.1, 2, 1000.0, torch.float32), ((3, 5, 6), 0, -0.1, 1, 1.0, torch.float32),
        ((3, 5, 6), 0, 1.5, 1, 1.0, torch.float32), ("mismatch", 0, 0.1, 0, 1.0, torch.float32),
        ((3, 5, 7), 2, None, 2, 1.0, torch.float64), ((2, 4, 6), None, None, 0, 1.0, torch.float32)]
    cases = []
    for shape, pad, eps, n_pad, scale, dtype in specs:
        ruled = scale == "-inf"
        scale = 1.0 if ruled else scale
        if shape == "mismatch":
            logits, targets = randn(rng, 2, 5, 6), torch.from_numpy(rng.integers(1, 6, size=(2, 4))).long()
        else:
            logits = (scale * randn(rng, *shape)).to(dtype)
            vocab = shape[-1]
            ids = [i for i in range(vocab) if i != pad]
            targets = torch.from_numpy(rng.choice(ids, size=shape[:-1])).long()
            if n_pad:  # each row ends with padding, a different amount per row
                for b in range(shape[0]):
                    targets[b, targets.shape[1] - n_pad - (b % 2):] = pad
            if ruled:  # at each position one class other than the target ruled out, and about a third of the rest
                ruled_out = torch.from_numpy(rng.random(shape) < 0.35)
                other = (targets + torch.from_numpy(rng.integers(1, vocab, size=shape[:-1]))) % vocab
                ruled_out.scatter_(-1, other.unsqueeze(-1), True)
                ruled_out.scatter_(-1, targets.unsqueeze(-1), False)
                if pad is not None:  # a padding position's own target ruled out too: it does not count
                    ruled_out[..., pad] |= targets == pad
                logits = logits.masked_fill(ruled_out, float("-inf"))
        kw = ({"pad": pad} if pad is not None else {}) | ({"label_smoothing": eps} if eps is not None else {})
        label = (describe(logits=logits, targets=targets) + f" ({dtype_name(dtype)})"
                 + (", some logits -inf" if ruled else f", logits scaled by {scale:g}" if scale != 1 else "")
                 + "".join(f", {k}={v}" for k, v in kw.items()))
        cases.append(Case(label, (logits, targets), kw, aid={"scale": scale, "some logits -inf": ruled}))
    return cases


def _ce(case: Case, *, count_pad: bool = False, smooth_over: str = "not pad", one_minus: bool = True,
        reduce: str = "tokens", naive: bool = False, default_pad: int | None = None,
        default_eps: float = 0.0, smooth_always: bool = False) -> Any:
    """In float64: F.cross_entropy with class targets where label_smoothing is 0 (the contract's own clause,
    which also holds for -inf logits), else with probability targets (the smoothed distribution).
    `smooth_always`: the smoothing term computed with label_smoothing 0 too (0 * inf is NaN)."""
    logits, targets = case.args
    pad, eps = case.kwargs.get("pad", default_pad), case.kwargs.get("label_smoothing", default_eps)
    if not 0 <= eps <= 1:
        return raises("label_smoothing must be in [0, 1]")
    if logits.shape[:-1] != targets.shape:
        return raises("logits (..., V) and targets (...) must match")
    vocab = logits.shape[-1]
    x = logits.double().reshape(-1, vocab)
    t = targets.reshape(-1)
    uniform = torch.ones(len(t), vocab, dtype=torch.float64)
    if pad is not None and smooth_over != "all":
        uniform[:, pad] = 0.0
    if smooth_over == "others":                                   # mass only on the wrong classes
        uniform[torch.arange(len(t)), t] = 0.0
    uniform /= uniform.sum(dim=1, keepdim=True)
    q = (1.0 - eps if one_minus else 1.0) * F.one_hot(t, vocab).double() + eps * uniform
    if smooth_always:                                              # (1 - eps) * nll + eps * smoothing term
        log_p = torch.log_softmax(x, dim=-1)
        per_token = -(1.0 - eps) * log_p[torch.arange(len(t)), t] - eps * (log_p * uniform).sum(dim=1)
    elif eps == 0 and not naive:
        per_token = F.cross_entropy(x, t, reduction="none")
    elif naive:                                                    # log(softmax): -inf where it underflows
        log_p = torch.log(torch.softmax(logits.reshape(-1, vocab), dim=-1)).double()
        per_token = (1.0 - eps if one_minus else 1.0) * -log_p[torch.arange(len(t)), t] + eps * -(
            log_p[:, uniform[0] > 0].mean(dim=1) if smooth_over != "others" else (log_p * uniform).sum(dim=1))
    else:
        per_token = F.cross_entropy(x, q, reduction="none")
    counted = torch.ones_like(t, dtype=torch.bool) if pad is None or count_pad else t != pad
    if reduce == "tokens":
        loss = per_token[counted].mean()
    elif reduce == "sum":
        loss = per_token[counted].sum()
    elif reduce == "zeroed":                                       # padding multiplied by 0: 0 * inf is NaN
        loss = (per_token * counted).sum() / counted.sum()
    else:                                                          # mean of each row's mean
        rows = per_token.reshape(targets.shape).reshape(targets.shape[0], -1)
        keep = counted.reshape(targets.shape[0], -1)
        loss = torch.stack([r[k].mean() for r, k in zip(rows, keep)]).mean()
    return loss.to(logits.dtype)


def _padded(case: Case) -> bool:
    pad = case.kwargs.get("pad")
    return pad is not None and bool((case.args[1] == pad).any())


def _smoothed(case: Case) -> bool:
    return case.kwargs.get("label_smoothing", 0.0) > 0


def _ruled_out_unsmoothed(case: Case) -> bool:
    """Some logits are -inf, and there is no smoothing."""
    return case.aid["some logits -inf"] and not _smoothed(case)


register(
    __name__,
    Check(name="cross_entropy", cases=_ce_cases, expected=_ce,
          mistakes=[Mistake("Did you count the padding? Average over the positions whose target is not pad only: "
                            "padding is not a prediction the model must make.",
                            unless(_padded, variant(_ce, count_pad=True))),
                    Mistake("Did you spread the smoothing mass over the padding token too (as "
                            "F.cross_entropy(..., label_smoothing=eps) does)? The contract's uniform part covers the "
                            "classes other than pad: the model should never be taught to predict padding.",
                            unless(lambda c: _smoothed(c) and c.kwargs.get("pad") is not None,
                                   variant(_ce, smooth_over="all"))),
                    Mistake("Did you smooth over the wrong classes only? The uniform part covers every class but "
                            "pad, the true one included (as in PyTorch's label_smoothing).",
                            unless(_smoothed, variant(_ce, smooth_over="others"))),
                    Mistake("Did you forget the (1 - eps) on the true class? q = (1 - eps) * one_hot + eps * "
                            "uniform sums to 1.", unless(_smoothed, variant(_ce, one_minus=False))),
                    Mistake("Did you sum instead of averaging? Return the mean over the counted positions.",
                            variant(_ce, reduce="sum")),
                    Mistake("Did you multiply the padding positions' losses by 0? A padding position whose own "
                            "target is ruled out (-inf) has an infinite loss, and 0 * inf is NaN: select the "
                            "counted positions (loss[counted]) instead.",
                            unless(lambda c: _padded(c) and _ruled_out_unsmoothed(c), variant(_ce, reduce="zeroed"))),
                    Mistake("Did you average each row first, then the rows? Rows count different numbers of "
                            "tokens: average over all counted positions at once.",
                            unless(_padded, variant(_ce, reduce="rows"))),
                    Mistake("Did you take log(softmax(x))? For large logits exp overflows (or the softmax "
                            "underflows to 0 and its log is -inf): use a log-softmax (chapter 9).",
                            unless(lambda c: c.aid.get("scale", 1) > 100, variant(_ce, naive=True))),
                    Mistake("Did you compute the smoothing term with label_smoothing 0 too? A -inf logit (a class "
                            "ruled out) makes it infinite, and 0 * inf is NaN: add it only when label_smoothing > 0.",
                            unless(_ruled_out_unsmoothed, variant(_ce, smooth_always=True))),
                    Mistake("Did you give pad a default of 0? Left out (None), every position counts and the "
                            "smoothing covers all V classes.",
                            unless(lambda c: "pad" not in c.kwargs, variant(_ce, default_pad=0))),
                    Mistake("Did you give label_smoothing a default other than 0.0? Left out, there is no "
                            "smoothing: the plain cross-entropy.",
                            unless(lambda c: "label_smoothing" not in c.kwargs, variant(_ce, default_eps=0.1)))],
          hint="cross_entropy: mean over the positions whose target is not pad of -sum_c q_c log softmax(logits)_c, "
               "q = (1 - eps) one_hot(target) + eps * uniform over the classes other than pad; a 0-dim tensor of the "
               "logits' dtype; label_smoothing outside [0, 1] or mismatched shapes raise ValueError."),
)
