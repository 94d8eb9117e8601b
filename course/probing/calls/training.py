"""Probes for chapter 10: teacher forcing, the cross-entropy, the learning-rate schedule, the
training step, the evaluation loop and BERT's masked-token inputs.

The training step and the evaluation loop run on a small network built here (`Net`) whose output
depends on its mode (as with dropout), so a step taken in eval mode, or an evaluation left in
training mode, gives other numbers; at every forward pass it records its mode and whether
gradients were being recorded. Those records, what the student's function returned and the
network's state afterwards are what the calls return: the judge derives every fact from them,
outside the sandbox, with each probe's `observe` (`rate_types`, `step_facts`, `eval_facts`,
`mask_facts`, `rate_facts`): facts read from the record, never an answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..cases import Case
from ..plain import dtype_name
from ..runner import Probe, register

# ------------------------------------------------------- 10.6 masked tokens ---

IGNORE = -100  # the label of a position the loss skips
P_DEFAULT = 0.15  # mask_tokens' p when left out


def mask_draws(fn: Any, case: Case) -> dict[str, Any]:
    """mask_tokens(tokens, mask_id, vocab_size, special_ids, ...) three times: "first" on the case's
    own arguments with seed ``meta["seed"]``, "again" on a copy of the tokens as they were with the
    same seed, and, when the case passes no generator (``meta["global_rng"]``: torch's global one,
    seeded here), "other" with the next seed (None otherwise). Each is what the function returned."""
    tokens = case.args[0].clone()                # as it was, even if the call changes it in place

    def draw(args: tuple, seed: int) -> Any:
        if case.meta["global_rng"]:              # no generator: torch's global one, seeded here
            torch.manual_seed(seed)
            return fn(*args, **case.kwargs)
        return fn(*args, **case.kwargs, generator=torch.Generator().manual_seed(seed))

    first = draw(case.args, case.meta["seed"])
    again = draw((tokens.clone(), *case.args[1:]), case.meta["seed"])
    other = draw((tokens.clone(), *case.args[1:]), case.meta["seed"] + 1) if case.meta["global_rng"] else None
    return {"first": first, "again": again, "other": other}


def mask_once(fn: Any, case: Case) -> Any:
    """One call of mask_tokens with a generator seeded with ``meta["seed"]``: its (inputs, labels)."""
    return fn(*case.args, **case.kwargs, generator=torch.Generator().manual_seed(case.meta["seed"]))


# What the judge reads from those draws (each check's `observe`): the facts the contract promises
# (which positions changed, to what, how often).

def recorded_pair(pair: Any) -> tuple:
    """A recorded (inputs, labels) with its arrays as tensors (anything else as it came)."""
    inputs, labels = pair
    return tuple(torch.from_numpy(t) if isinstance(t, np.ndarray) else t for t in (inputs, labels))


def mask_facts(case: Case, draws: dict[str, Any]) -> dict[str, Any]:
    """What the contract promises, as facts about the kernel's three draws (`mask_draws`): two with
    the same seed and, without a generator, one with another."""
    tokens, mask_id, vocab, specials = case.args
    first, again, other = (None if draws[k] is None else recorded_pair(draws[k]) for k in ("first", "again", "other"))
    inputs, labels = first
    special = torch.isin(tokens, torch.tensor(specials))
    shapes = [(tuple(t.shape), dtype_name(t.dtype)) for t in (inputs, labels)]
    selected = labels != IGNORE
    allowed = torch.tensor([mask_id] + [i for i in range(vocab) if i not in specials])
    return {
        "shapes and dtypes of (inputs, labels)": shapes,
        "labels: the original token or -100": bool(((labels == tokens) | ~selected).all()),
        "every position has a label": bool(selected.all()),
        "special positions never selected": bool(not (selected & special).any()),
        "unselected positions left as they were": bool((inputs[~selected] == tokens[~selected]).all()),
        "selected positions hold the mask, the original or an ordinary token": bool(
            torch.isin(inputs[selected & ~special], allowed).all()),
        "the same generator seed gives the same result": all(torch.equal(a, b) for a, b in zip(first, again)),
        "positions selected": selected_count(case, int(selected.sum())),
        "without a generator, another global seed gives another result": "not checked here" if other is None
        else not all(torch.equal(a, b) for a, b in zip(first, other)),
    }


def selected_count(case: Case, count: int) -> int | str:
    """The exact count where p = 0 or p = 1 decides it (other rates: `mask_tokens_rates`)."""
    return count if case.kwargs.get("p", P_DEFAULT) in (0.0, 1.0) else "not checked here"


def rate_facts(case: Case, drawn: Any) -> dict[str, Any]:
    """The shares the contract fixes, measured on one draw's (inputs, labels) (`mask_once`)."""
    tokens, mask_id, vocab, specials = case.args
    inputs, labels = recorded_pair(drawn)
    ordinary = ~torch.isin(tokens, torch.tensor(specials))
    selected = (labels != IGNORE) & ordinary
    chosen = max(int(selected.sum()), 1)
    was_mask = inputs[selected] == mask_id
    kept = inputs[selected] == tokens[selected]
    replaced = inputs[selected & (inputs != mask_id) & (inputs != tokens)]
    ids = [i for i in range(vocab) if i not in specials]
    counts = torch.tensor([int((replaced == i).sum()) for i in ids])
    per_row = selected.sum(dim=1)
    return {"no random replacement is a special id": not bool(torch.isin(replaced, torch.tensor(specials)).any()),
            "rows select different numbers of positions": bool((per_row != per_row[0]).any()),
            "selected": round(int(selected.sum()) / int(ordinary.sum()), 4),
            "of the selected: mask": round(int(was_mask.sum()) / chosen, 4),
            "of the selected: another token": round(int((~was_mask & ~kept).sum()) / chosen, 4),
            "of the selected: unchanged": round(int(kept.sum()) / chosen, 4),
            "random tokens: every ordinary id drawn, none twice as often as uniform": uniform_or_unchecked(
                case, bool((counts > 0).all() and counts.max() < 2 * len(replaced) / len(ids)))}


def uniform_or_unchecked(case: Case, verdict: bool) -> bool | str:
    """Only with few ordinary ids (8 or fewer), where each is drawn hundreds of times."""
    _, _, vocab, specials = case.args
    return verdict if vocab - len(specials) <= 8 else "not checked with many ids"


# ---------------------------------------------------------- 10.3 schedule ---

def lr_values(fn: Any, case: Case) -> list:
    """lr_at(step, max_lr, warmup_steps, total_steps, ...) at each step of ``meta["steps"]``."""
    return [fn(step, *case.args, **case.kwargs) for step in case.meta["steps"]]


#: the key of the fact that every rate came back as a Python float (not an int, a tensor, ...)
EVERY_RATE_A_FLOAT = "every rate a Python float"


def rate_types(case: Case, rates: list) -> dict[str, Any]:
    """The rates `lr_values` recorded, and whether each is a Python float (an int such as a min_lr of 0
    passed through is not: the contract promises floats)."""
    return {"rates": rates, EVERY_RATE_A_FLOAT: all(type(r) is float for r in rates)}


# -------------------------------------------------- the network we train ---

class Net(nn.Module):
    """x (batch, d_in) -> (batch, d_out) through tanh; the hidden layer is halved in eval mode (a mode
    dependence, like dropout's). `unused` never takes part, so it never has a gradient. `calls`
    lists (training mode, gradients enabled) at every forward pass."""

    def __init__(self, seed: int, d_in: int, d_hidden: int, d_out: int, unused: bool) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.first = nn.Linear(d_in, d_hidden)
        self.second = nn.Linear(d_hidden, d_out)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=gen))
        if unused:
            self.unused = nn.Parameter(torch.zeros(3))
        self.calls: list[tuple[bool, bool]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.append((self.training, torch.is_grad_enabled()))
        h = torch.tanh(self.first(x))
        return self.second(h if self.training else 0.5 * h)


def squared_error(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The loss_fn handed to train_step: mean squared error of model(x) against y, a 0-dim tensor."""
    x, y = batch
    return ((model(x) - y) ** 2).mean()


def batches(meta: dict) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One (x (rows, d_in), y (rows, d_out)) per entry of ``meta["rows"]``, from ``meta["seed"] + 1``."""
    gen = torch.Generator().manual_seed(meta["seed"] + 1)
    d_in, _, d_out = meta["dims"]
    scale = meta["scale"]
    return [(scale * torch.randn(rows, d_in, generator=gen), torch.randn(rows, d_out, generator=gen))
            for rows in meta["rows"]]


def net(meta: dict) -> Net:
    return Net(meta["seed"], *meta["dims"], unused=meta["unused"])


# ------------------------------------------------------ 10.4 train step ---

def setup(meta: dict) -> tuple[Net, torch.optim.Optimizer]:
    """The network in eval mode with stale gradients (left from an earlier backward pass), and its
    optimizer (``meta["optimizer"]``: "sgd" or "adamw")."""
    model = net(meta)
    model.eval()
    gen = torch.Generator().manual_seed(meta["seed"] + 2)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=gen)
    if meta["optimizer"] == "sgd":
        return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)


def after_steps(model: Net, returned: list) -> dict[str, Any]:
    """What a run of steps leaves: what each step returned, the network's record of its forward
    passes, its parameters and gradients (None where a parameter has none) and its mode."""
    return {"returned": returned, "calls": list(model.calls),
            "parameters": {n: p.detach().clone() for n, p in model.named_parameters()},
            "gradients": {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()},
            "training": model.training}


def _call_step(fn: Any, case: Case) -> dict[str, Any]:
    model, optimizer = setup(case.meta)
    returned = [fn(model, optimizer, squared_error, batch, case.meta["max_norm"]) for batch in batches(case.meta)]
    return after_steps(model, returned)


def step_facts(case: Case, raw: dict[str, Any]) -> dict[str, Any]:
    """What a run of steps leaves, from the kernel's record (`after_steps`). A parameter without a
    gradient shows zeros (cleared gradients may be None, as optimizer.zero_grad() leaves them, or
    zeros)."""
    return {"returned (loss, gradient norm) per step": raw["returned"],
            "forward passes": len(raw["calls"]),
            "parameters after": raw["parameters"],
            "gradients after the last step": {n: np.zeros_like(p) if raw["gradients"][n] is None
                                              else raw["gradients"][n] for n, p in raw["parameters"].items()},
            "in training mode after": raw["training"]}


# ------------------------------------------------------- 10.5 evaluate ---

class LossFnFailed(RuntimeError):
    """What loss_fn raises in the cases that test evaluate's behaviour on an error."""


def _call_evaluate(fn: Any, case: Case) -> dict[str, Any]:
    """evaluate(model, batches, loss_fn) on the network in mode ``meta["mode"]``, the batches as a list
    or a generator (``meta["given"]``), loss_fn raising LossFnFailed on batch ``meta["fail"]`` (None:
    never) and counting no token on batch ``meta["empty"]`` ("all": on every batch; None: on none), where
    it returns a count of 0 and the mean over no row, NaN. Returns what evaluate returned, the message of
    loss_fn's error if it reached the caller (None otherwise), where every batch counts none the message
    of the ValueError evaluate raised (None if it raised none), the network's record of its forward passes
    and its mode afterwards."""
    meta = case.meta
    model = net(meta)
    model.train(meta["mode"] == "train")
    given = batches(meta)
    fail, empty, seen = meta["fail"], meta["empty"], []

    def loss_fn(m: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, int]:
        seen.append(batch)
        if len(seen) - 1 == fail:
            raise LossFnFailed(f"loss_fn failed on batch {fail}")
        x, y = batch
        errors = (m(x) - y) ** 2
        if empty == "all" or len(seen) - 1 == empty:
            return errors[:0].mean(), 0                   # no token counted: the mean over none is NaN
        return errors.mean(), len(x)

    returned, error, refused = None, None, None
    try:
        returned = fn(model, iter(given) if meta["given"] == "generator" else given, loss_fn)
    except LossFnFailed as exc:
        error = str(exc)
    except ValueError as exc:
        if empty != "all" and meta["rows"]:
            raise
        refused = f"ValueError: {exc}"
    return {"returned": returned, "error from loss_fn": error, "ValueError": refused, "calls": list(model.calls),
            "training": model.training}


def eval_facts(case: Case, raw: dict[str, Any]) -> dict[str, Any]:
    """What an evaluation did, from the kernel's record (`_call_evaluate`): the loss it returned, or
    whether loss_fn's error reached the caller, the modes and grad modes of the forward passes, and
    the mode it left the network in. Where no batch counts a token, or there is no batch: whether ValueError
    was raised, after how many forward passes, and the mode the network was left in."""
    mode_after = "train" if raw["training"] else "eval"
    if raw["error from loss_fn"] is not None:
        return {"raised": f"RuntimeError: {raw['error from loss_fn']}", "mode after": mode_after}
    if case.meta["fail"] is not None:
        return {"raised": "nothing", "mode after": mode_after}
    calls = raw["calls"]
    if case.meta["empty"] == "all" or not case.meta["rows"]:
        return {"raised": "nothing" if raw["ValueError"] is None else "ValueError", "forward passes": len(calls),
                "mode after": mode_after}
    return {"loss": raw["returned"], "every forward pass in eval mode": all(not t for t, _ in calls),
            "every forward pass without gradients": all(not g for _, g in calls),
            "forward passes": len(calls), "mode after": mode_after}


register(
    Probe("training.shift_for_teacher_forcing"),
    Probe("training.cross_entropy", forbid=("torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss")),
    Probe("training.lr_at", call=lr_values, observe=rate_types),
    Probe("training.train_step", call=_call_step, inputs_unchanged=False, observe=step_facts,
          forbid=("torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_norm",
                  "torch.nn.utils.clip_grads_with_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_",
                  "torch.nn.utils.clip_grad.clip_grad_norm", "torch.nn.utils.clip_grad._clip_grads_with_norm_")),
    Probe("training.evaluate", call=_call_evaluate, inputs_unchanged=False, observe=eval_facts),
    Probe("training.mask_tokens", call=mask_draws, observe=mask_facts),
    Probe("training.mask_tokens_rates", call=mask_once, observe=rate_facts),
)
