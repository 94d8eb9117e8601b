"""10.3 the learning-rate schedule, 10.4 a training step with gradient clipping, 10.5 evaluation.

The training step and the evaluation loop run on the kernel's small network
(`course.probing.calls.training.Net`) whose output depends on its mode (as with dropout), so a
step taken in eval mode, or an evaluation left in training mode, gives other numbers. The kernel
records what the student's function returned, the network's record of its forward passes (mode,
gradients on) and its state afterwards; the probes' `observe` (`step_facts`, `eval_facts`, in
the same module) derive the facts the answers here describe.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from course.probing.calls.training import (
    EVERY_RATE_A_FLOAT,
    after_steps,
    batches,
    net,
    setup,
    squared_error,
    step_facts,
)
from course.probing.plain import to_plain

from ..framework import Case, Check, Mistake, Raises, register
from ..kit import raises, unless, variant

# ---------------------------------------------------------- 10.3 schedule ---

def _sig(x: float) -> float:
    """x to two significant figures (readable labels)."""
    return float(f"{x:.2g}")


def _lr_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    # (kind, log10 of max_lr's range, warmup_steps range, decay steps range, with min_lr); kinds: "all" asks
    # for steps 0 .. total + 3, "ints" too, with an int max_lr (1 to 3) and min_lr=0 given as an int (the rates
    # must still be floats), "step < 0" for one negative step, "warmup = total" and "warmup < 0" for step 0
    # of a schedule the contract refuses. Every number is drawn from the seed.
    specs = [("all", (-3.5, -2.5), (2, 5), (6, 10), False), ("all", (-1, 0), (2, 4), (5, 9), True),
             ("ints", (0, 0), (0, 3), (3, 6), True)] if not hidden \
        else [("all", (-4, -3), (4, 7), (9, 14), True), ("all", (-0.5, 0.3), (0, 0), (6, 10), False),
              ("ints", (0, 0), (0, 0), (4, 8), True), ("ints", (0, 0), (2, 5), (4, 8), True),
              ("all", (-3, -2.5), (1, 1), (4, 7), True), ("all", (-3.5, -3), (9, 12), (25, 35), True),
              ("all", (-1.3, -0.7), (5, 8), (1, 1), True), ("step < 0", (-3.5, -2.5), (2, 5), (6, 10), False),
              ("warmup = total", (-3.5, -2.5), (6, 12), (0, 0), False),
              ("warmup < 0", (-3.5, -2.5), (-3, -1), (8, 12), False)]
    cases = []
    for kind, (lo, hi), (w_lo, w_hi), (d_lo, d_hi), with_min in specs:
        max_lr = _sig(10 ** rng.uniform(lo, hi))
        warmup = int(rng.integers(w_lo, w_hi + 1))
        total = max(warmup, 0) + int(rng.integers(d_lo, d_hi + 1))
        min_lr = _sig(max_lr * rng.uniform(0.05, 0.2)) if with_min else None
        if kind == "ints":
            max_lr, min_lr = int(rng.integers(1, 4)), 0
        kw = {"min_lr": min_lr} if min_lr is not None else {}
        steps = {"step < 0": [-int(rng.integers(1, 4))], "warmup = total": [0], "warmup < 0": [0]}.get(
            kind, list(range(total + 4)))
        shown = f"steps {steps[0]} .. {steps[-1]}" if len(steps) > 1 else f"step {steps[0]}"
        cases.append(Case(f"{shown} with max_lr={max_lr:g}, warmup_steps={warmup}, total_steps={total}"
                          + (f", min_lr={min_lr:g}" if min_lr is not None else "")
                          + (" (max_lr and min_lr given as ints)" if kind == "ints" else ""),
                          (max_lr, warmup, total), kw, meta={"steps": steps}))
    return cases


def _lr(case: Case, *, warmup: str = "step + 1", decay_from: str = "warmup", clamp: bool = True,
        use_min: bool = True, shape: str = "cosine", default_min: float = 0.0, floor_as_given: bool = False) -> Any:
    """The rates from the formula (Python floats), and whether every one is a float (the probe's
    `rate_types`). `floor_as_given`: past total_steps, min_lr returned as it was given (an int stays one)."""
    max_lr, w, total = case.args
    floor = case.kwargs.get("min_lr", default_min * max_lr)
    lo = floor if use_min else 0.0
    out = []
    for step in case.meta["steps"]:
        if step < 0 or w < 0 or total <= w:
            return raises("need step >= 0 and 0 <= warmup_steps < total_steps")
        if step < w:
            out.append(float(max_lr * {"step + 1": (step + 1) / w, "step": step / w, "of w + 1": (step + 1) / (w + 1),
                                       "<=": (step + 1) / w}[warmup]))
            continue
        if warmup == "<=" and step == w:                          # one warm-up step too many
            out.append(float(max_lr * (step + 1) / w))
            continue
        if step > total and clamp:
            out.append(floor if floor_as_given else float(floor))
            continue
        t = (step - w) / (total - w) if decay_from == "warmup" else step / total
        fall = (1 + math.cos(math.pi * t)) / 2 if shape == "cosine" else 1 - t
        out.append(float(lo + (max_lr - lo) * fall))
    return {"rates": out, EVERY_RATE_A_FLOAT: all(type(r) is float for r in out)}


def _warm(case: Case) -> bool:
    return case.args[1] > 0


def _with_min(case: Case) -> bool:
    return case.kwargs.get("min_lr", 0.0) > 0


def _min_left_out(case: Case) -> bool:
    return "min_lr" not in case.kwargs


def _int_min(case: Case) -> bool:
    return type(case.kwargs.get("min_lr")) is int


# ------------------------------------------------------ 10.4 train step ---

def _step_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    # (dims, rows per batch (one step each), input scale, optimizer, max_grad_norm, an unused parameter)
    specs = [((3, 5, 2), [4, 4], 3.0, "sgd", 1.0, False),
             ((3, 5, 2), [6, 2, 5], 0.3, "sgd", 50.0, True)] if not hidden \
        else [((4, 6, 3), [5, 3, 4], 3.0, "sgd", 0.5, True), ((2, 8, 1), [7, 7], 5.0, "adamw", 1.0, False),
              ((5, 4, 2), [3, 6, 2, 4], 1.0, "sgd", 2.0, False), ((3, 3, 3), [4], 0.2, "adamw", 100.0, True),
              ((3, 5, 2), [4], 1.0, "sgd", 0.0, False)]
    cases = []
    for dims, rows, scale, opt, max_norm, unused in specs:
        meta = {"seed": int(rng.integers(2**31)), "dims": dims, "rows": rows, "scale": scale, "optimizer": opt,
                "max_norm": max_norm, "unused": unused}
        cases.append(Case(f"{len(rows)} step(s) of {opt.upper()} on a {dims[0]}-{dims[1]}-{dims[2]} network "
                          f"(starting in eval mode, with stale gradients){', one parameter unused' if unused else ''}, "
                          f"batches of {rows} rows, inputs scaled by {scale:g}, max_grad_norm={max_norm:g}",
                          meta=meta))
    return cases


def _step(case: Case, *, clip_after: bool = False, zero: bool | str = True, per_param: bool = False,
          norm_after: bool = False, train: bool = True, always: bool = False) -> Any:
    meta = case.meta
    max_norm = meta["max_norm"]
    if max_norm <= 0:
        return raises("max_grad_norm must be positive")
    model, optimizer = setup(meta)
    returned = []
    for batch in batches(meta):
        model.train(train)
        if zero is True:
            optimizer.zero_grad(set_to_none=True)
        loss = squared_error(model, batch)
        loss.backward()
        params = [p for p in model.parameters() if p.grad is not None]
        if clip_after:
            optimizer.step()
        if per_param:
            norms = [torch.nn.utils.clip_grad_norm_([p], max_norm) for p in params]
            norm = torch.linalg.vector_norm(torch.stack(norms))
        elif always:
            norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params]))
            for p in params:
                p.grad.mul_(max_norm / (norm + 1e-6))
        else:
            norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        if not clip_after:
            optimizer.step()
        if zero == "after":                                        # cleared for the next step, too late
            optimizer.zero_grad(set_to_none=True)
        if norm_after:
            norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params]))
        returned.append((loss.item(), norm.item()))
    return step_facts(case, to_plain(after_steps(model, returned)))


def _clipped(case: Case) -> bool:
    """Some step's gradient norm exceeds max_grad_norm (else clipping changes nothing)."""
    out = _step(case)
    return not isinstance(out, Raises) and any(
        n > case.meta["max_norm"] for _, n in out["returned (loss, gradient norm) per step"])


# ------------------------------------------------------- 10.5 evaluate ---

def _eval_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    # (dims, rows per batch, starting mode, batches given as, the batch on which loss_fn raises, the batch on
    # which loss_fn counts no token and returns the mean over none, NaN: None for none, "all" for every batch)
    specs = [((3, 4, 1), [3, 5, 2], "train", "list", None, None), ((2, 3, 2), [4, 4], "eval", "list", None, None),
             ((3, 4, 1), [2, 3, 4], "train", "list", 1, None), ((3, 4, 1), [3, 4, 2], "train", "list", None, 1),
             ((2, 3, 1), [3, 2], "train", "list", None, "all")] if not hidden else [
        ((4, 5, 2), [1, 6, 3, 2], "train", "list", None, None), ((3, 4, 1), [5, 2, 7], "eval", "generator", None, None),
        ((2, 6, 3), [8], "train", "generator", None, None), ((3, 3, 1), [2, 9], "eval", "list", None, None),
        ((3, 3, 1), [], "train", "list", None, None), ((2, 4, 2), [3, 2, 5], "train", "generator", 2, None),
        ((2, 4, 2), [3, 2], "eval", "list", 0, None), ((3, 4, 2), [4, 3, 5, 2], "train", "generator", None, 2),
        ((2, 3, 2), [2, 5, 3], "eval", "list", None, 0), ((2, 3, 1), [3, 2, 4], "train", "generator", None, "all"),
        ((3, 4, 1), [2, 3], "eval", "list", None, "all")]
    cases = []
    for dims, rows, mode, given, fail, empty in specs:
        meta = {"seed": int(rng.integers(2**31)), "dims": dims, "rows": rows, "scale": 1.0, "unused": False,
                "mode": mode, "given": given, "fail": fail, "empty": empty}
        cases.append(Case(f"{len(rows)} held-out batch(es) of {rows} rows as a {given}, the model in {mode} mode"
                          + (f", loss_fn raising RuntimeError on batch {fail}" if fail is not None else "")
                          + (", loss_fn counting 0 tokens in every batch (its loss NaN)" if empty == "all" else
                             f", loss_fn counting 0 tokens in batch {empty} (its loss NaN)" if empty is not None
                             else ""), meta=meta))
    return cases


def _eval(case: Case, *, train: bool = False, grad: bool = False, restore: bool | str = True,
          weighted: bool = True, restore_on_error: bool = True, raise_at_empty: bool = False,
          raise_before_restore: bool = False) -> Any:
    """What evaluate's record shows. Knobs: the mode and grad mode of the loop, the mode restored (`restore`:
    True, False, or the mode set whatever it was), the batch means `weighted` by their counts, the mode
    restored when loss_fn raises; `raise_at_empty`: ValueError at the first batch that counts no token;
    `raise_before_restore`: ValueError (no token counted at all) raised before the mode is restored."""
    meta = case.meta
    if meta["fail"] is not None:                                    # the error propagates, the mode is restored
        after = meta["mode"] if restore is True and restore_on_error else "eval"
        return {"raised": f"RuntimeError: loss_fn failed on batch {meta['fail']}", "mode after": after}
    looped = "train" if train else "eval"                           # the mode the loop ran in
    after = meta["mode"] if restore is True else restore if restore else looped
    empty, rows = meta["empty"], meta["rows"]
    if not rows:                                                    # no batch: ValueError, the mode restored
        return {"raised": "ValueError", "forward passes": 0, "mode after": looped if raise_before_restore else after}
    if raise_at_empty and empty is not None and empty != "all":
        raise ValueError("a batch counts no token")
    if empty == "all":                          # every batch runs, the mode is restored, then ValueError
        return {"raised": "ValueError", "forward passes": 1 if raise_at_empty else len(rows),
                "mode after": looped if raise_before_restore else after}
    model = net(meta)
    model.train(train)
    with torch.set_grad_enabled(grad):
        losses = [(squared_error(model, b).item(), 0 if i == empty else len(b[0]))
                  for i, b in enumerate(batches(meta))]
    counted = [(v, n) for v, n in losses if n]                      # a batch that counts no token adds nothing
    if weighted:
        loss = sum(v * n for v, n in counted) / sum(n for _, n in counted)
    else:
        loss = sum(v for v, _ in counted) / len(counted)
    return {"loss": loss, "every forward pass in eval mode": not train,
            "every forward pass without gradients": not grad, "forward passes": len(losses), "mode after": after}


def _unequal(case: Case) -> bool:
    return len(set(case.meta["rows"])) > 1


register(
    __name__,
    Check(name="lr_at", cases=_lr_cases, expected=_lr,
          mistakes=[Mistake("Is your warm-up one step late? Step 0 must already train: lr = max_lr * (step + 1) / "
                            "warmup_steps, reaching max_lr at step warmup_steps - 1 (CS336 starts at 0, "
                            "max_lr * step / warmup_steps: another convention than this contract's).",
                            unless(_warm, variant(_lr, warmup="step"))),
                    Mistake("Did you divide by warmup_steps + 1? The warm-up reaches max_lr at step warmup_steps - 1: "
                            "lr = max_lr * (step + 1) / warmup_steps (nanoGPT divides by warmup_steps + 1: "
                            "another convention than this contract's).",
                            unless(_warm, variant(_lr, warmup="of w + 1"))),
                    Mistake("Did you warm up through step warmup_steps (step <= warmup_steps)? The warm-up covers "
                            "steps 0 .. warmup_steps - 1; at step warmup_steps the rate is max_lr, where the "
                            "cosine starts.", unless(_warm, variant(_lr, warmup="<="))),
                    Mistake("Did you start the decay at step 0? The cosine runs from max_lr at step warmup_steps to "
                            "min_lr at step total_steps: t = (step - warmup_steps) / (total_steps - warmup_steps).",
                            unless(_warm, variant(_lr, decay_from="zero"))),
                    Mistake("Did the cosine go on after total_steps? Past the end the rate stays at min_lr.",
                            variant(_lr, clamp=False)),
                    Mistake("Did you decay to 0 instead of min_lr?", unless(_with_min, variant(_lr, use_min=False))),
                    Mistake("Did you decay linearly? The schedule is a cosine: (1 + cos(pi * t)) / 2.",
                            variant(_lr, shape="linear")),
                    Mistake("Did you default min_lr to a tenth of max_lr? Left out, min_lr is 0.0: the rate decays "
                            "to 0.", unless(_min_left_out, variant(_lr, default_min=0.1))),
                    Mistake("Did you return min_lr as it was given after total_steps? The rate is a Python float at "
                            "every step, also when min_lr is given as the int 0: return float(min_lr).",
                            unless(_int_min, variant(_lr, floor_as_given=True)))],
          hint="lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0): max_lr * (step + 1) / warmup_steps "
               "during the warm-up; then min_lr + (max_lr - min_lr) * (1 + cos(pi * t)) / 2 with t = (step - warmup) / "
               "(total - warmup) up to total_steps; min_lr after it. A Python float at every step, whatever the "
               "arguments' types. Raises ValueError unless step >= 0 and 0 <= warmup_steps < total_steps."),
    Check(name="train_step", cases=_step_cases, expected=_step,
          mistakes=[Mistake("Did you clip after optimizer.step()? Clipping must change the gradients BEFORE the "
                            "step uses them: backward, clip, step.", unless(_clipped, variant(_step, clip_after=True))),
                    Mistake("Did you forget to clear the old gradients? backward() adds to .grad: call "
                            "optimizer.zero_grad() (or model.zero_grad()) before it.", variant(_step, zero=False)),
                    Mistake("Did you clear the gradients after optimizer.step()? The model may arrive with stale "
                            "gradients, which your first step then adds in: clear them before loss.backward().",
                            variant(_step, zero="after")),
                    Mistake("Did you clip each parameter's gradient on its own? The norm is the L2 norm of ALL "
                            "gradients together (one vector), and every gradient is scaled by the same factor.",
                            unless(_clipped, variant(_step, per_param=True))),
                    Mistake("Did you return the norm after clipping? Return the norm measured before clipping (it is "
                            "what you would log to see how often clipping happens).",
                            unless(_clipped, variant(_step, norm_after=True))),
                    Mistake("Did you forget model.train()? The model may arrive in eval mode (after an evaluation): "
                            "dropout and the like must be on while training.", variant(_step, train=False)),
                    Mistake("Did you always rescale the gradients to norm max_grad_norm? Clip only when the norm is "
                            "larger; smaller gradients are left alone.",
                            unless(lambda c: not _clipped(c), variant(_step, always=True)))],
          hint="train_step: model.train(); clear the gradients; loss = loss_fn(model, batch); loss.backward(); norm = "
               "L2 norm of all the gradients together (parameters without a gradient skipped); if norm > "
               "max_grad_norm multiply every gradient by max_grad_norm / (norm + 1e-6); optimizer.step(); return "
               "(loss.item(), norm before clipping as a float). max_grad_norm <= 0 raises ValueError."),
    Check(name="evaluate", cases=_eval_cases, expected=_eval,
          mistakes=[Mistake("Did you leave the model in training mode? Call model.eval() before evaluating: "
                            "dropout must be off on held-out data.", variant(_eval, train=True)),
                    Mistake("Did you record gradients? Evaluate under torch.no_grad(): no graph is needed, and it "
                            "costs memory and time.", variant(_eval, grad=True)),
                    Mistake("Did you leave the model in eval mode? Put it back in the mode it arrived in "
                            "(model.train(was_training)), or the next training steps run without dropout.",
                            unless(lambda c: c.meta["mode"] == "train" and c.meta["fail"] is None
                                   and c.meta["empty"] != "all", variant(_eval, restore=False))),
                    Mistake("Did you call model.train() at the end whatever the mode was? Restore the mode the "
                            "model arrived in: model.train(was_training).",
                            unless(lambda c: c.meta["mode"] == "eval", variant(_eval, restore="train"))),
                    Mistake("Did you restore the mode only when evaluation succeeds? If loss_fn raises, the error "
                            "must reach the caller with the model back in the mode it arrived in: restore it in a "
                            "finally block.", unless(lambda c: c.meta["fail"] is not None and c.meta["mode"] == "train",
                                                     variant(_eval, restore_on_error=False))),
                    Mistake("Did you divide by a count of zero? When the batches count no token at all there is "
                            "nothing to average: raise ValueError.",
                            unless(lambda c: c.meta["empty"] == "all" or not c.meta["rows"], lambda c: 0.0 / 0)),
                    Mistake("Did you raise ValueError at the first batch that counts no token? Such a batch adds "
                            "nothing (its loss is not read); only when no batch at all counted a token, after the "
                            "loop, is there nothing to average.",
                            unless(lambda c: c.meta["empty"] is not None, variant(_eval, raise_at_empty=True))),
                    Mistake("Did you raise ValueError before restoring the model's mode? When no batch counted a "
                            "token the error must reach the caller with the model back in the mode it arrived in: "
                            "restore it first (a finally block does).",
                            unless(lambda c: (c.meta["empty"] == "all" or not c.meta["rows"])
                                   and c.meta["mode"] == "train", variant(_eval, raise_before_restore=True))),
                    Mistake("Did you average the batch means? Batches count different numbers of tokens: weight each "
                            "batch's mean by its count, sum(mean_b * count_b) / sum(count_b).",
                            unless(_unequal, variant(_eval, weighted=False)))],
          hint="evaluate: remember model.training, call model.eval(), loop once over the batches under "
               "torch.no_grad() adding mean * count and count (a batch whose count is 0 adds nothing: its loss, "
               "NaN, is not read), restore the mode, return the total over the count as a float; no batches raise "
               "ValueError, and so, after the loop and with the mode restored, do batches that count no token; an "
               "error from loss_fn reaches the caller with the model back in its mode (try/finally)."),
)
