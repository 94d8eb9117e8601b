"""Probes for 11.4 AdamW and 11.5 decay_groups.

`adamw`: the kernel makes the parameters (meta['start']), hands them to the student's optimiser (a plain
list, or parameter groups as meta['groups'] lays them out), sets each step's gradients (meta['grads'];
None: that parameter has no gradient on that step), sets each group's lr before each step where
meta['lr_scale'] gives a schedule, calls step() and records every parameter after every
step, then which parameters have a non-empty entry in the optimiser's `state_dict()`.
`adamw_errors` only constructs the optimiser. `decay_groups` builds a small model from
meta['layout'] (`build_model`) and records the groups returned, each parameter by its name in
model.named_parameters(), and which parameters the call changed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ...cases import Case
from ...runner import Probe, register

#: the keys of adamw's record
AFTER = "parameters after each step"
STATE = "which parameters have state in state_dict() after the last step"
#: a listed object that is not one of the model's parameters
STRANGER = "<not a parameter of the model>"
#: the keys of decay_groups' record
GROUPS, CHANGED = "groups", "parameters of the model the call changed"
#: what constructing an optimiser the contract accepts returns
MADE = "an optimizer was created"

FORBID = ("torch.optim.AdamW", "torch.optim.Adam", "torch.optim.adamw.adamw", "torch.optim.adam.adam",
          "torch.optim._functional.adamw", "torch.optim._functional.adam", "torch._fused_adamw_",
          "torch._fused_adam_")


# ---------------------------------------------------------------- AdamW ---

def _params_and_groups(case: Case) -> tuple[list[nn.Parameter], Any]:
    """The parameters (meta['start']) and what the optimiser is given: the plain list when meta['groups']
    is None, else one dict per group: {"params": [the parameters of its indices], **its settings}."""
    params = [nn.Parameter(t.clone()) for t in case.meta["start"]]
    layout = case.meta["groups"]
    if layout is None:
        return params, params
    return params, [{"params": [params[i] for i in idx], **settings} for idx, settings in layout]


def run_steps(cls: Any, case: Case) -> dict[str, list]:
    """cls(params or groups, **kwargs); then each step: set the gradients, step(); the parameters after it.
    Last, for each parameter (by its index in the list), whether state_dict() holds state for it."""
    params, given = _params_and_groups(case)
    optimizer = cls(given, *case.args, **case.kwargs)
    scale = case.meta.get("lr_scale")                # a schedule: group["lr"] = its first lr * scale[t]
    first = [group["lr"] for group in optimizer.param_groups] if scale else []
    after = []
    for t, grads in enumerate(case.meta["grads"]):
        for group, lr in zip(optimizer.param_groups, first):
            group["lr"] = lr * scale[t]
        for p, g in zip(params, grads):
            p.grad = None if g is None else g.clone()
        optimizer.step()
        after.append([p.detach().clone() for p in params])
    saved = optimizer.state_dict()["state"]        # keyed by position in param_groups, group after group
    index = {id(p): i for i, p in enumerate(p for group in optimizer.param_groups for p in group["params"])}
    return {AFTER: after, STATE: [bool(saved.get(index.get(id(p)))) for p in params]}


def _construct(cls: Any, case: Case) -> str:
    cls([nn.Parameter(torch.zeros(2))], *case.args, **case.kwargs)
    return MADE


# --------------------------------------------------------- decay_groups ---

class Gain(nn.Module):
    """A norm's gain alone: one parameter `weight` (d,)."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))


class Table(nn.Module):
    """A learned positional table: one 2-D parameter `table` (n, d), no nn.Embedding."""

    def __init__(self, n: int, d: int) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.zeros(n, d))


def _make(kind: str, sizes: list) -> nn.Module:
    return {"embedding": lambda: nn.Embedding(*sizes), "linear": lambda: nn.Linear(*sizes[:2], bias=sizes[2]),
            "layernorm": lambda: nn.LayerNorm(*sizes), "gain": lambda: Gain(*sizes),
            "table": lambda: Table(*sizes)}[kind]()


def build_model(meta: dict) -> nn.Module:
    """The model meta['layout'] describes: [path, kind, sizes] in registration order (kind 'same' with
    sizes [another path]: that module again, shared); then meta['ties'], [path, path]: the first module's
    weight becomes the second's (the same Parameter)."""
    torch.manual_seed(0)
    root, made = nn.Module(), {}
    for path, kind, sizes in meta["layout"]:
        *parents, leaf = path.split(".")
        box = root
        for name in parents:
            if not hasattr(box, name):
                box.add_module(name, nn.Module())
            box = getattr(box, name)
        made[path] = made[sizes[0]] if kind == "same" else _make(kind, sizes)
        box.add_module(leaf, made[path])
    for dst, src in meta["ties"]:
        made[dst].weight = made[src].weight
    return root


def _groups(fn: Any, case: Case) -> dict[str, list]:
    """decay_groups(model, weight_decay): each group's params as the parameters' names (first name of a
    shared one), its other keys as returned; then the names of the parameters the call changed (their
    values or requires_grad, or gone from the model)."""
    model = build_model(case.meta)
    named = dict(model.named_parameters())
    names = {id(p): n for n, p in named.items()}
    before = {n: (p.detach().clone(), p.requires_grad) for n, p in named.items()}
    groups = fn(model, *case.args)
    out = []
    for group in groups:
        group = dict(group)
        group["params"] = [names.get(id(p), STRANGER) for p in list(group.get("params", []))]
        out.append(group)
    after = dict(model.named_parameters())
    changed = [n for n, (value, grad) in before.items()
               if n not in after or after[n].requires_grad != grad or not torch.equal(after[n].detach(), value)]
    return {GROUPS: out, CHANGED: changed}


register(
    Probe("modern.adamw", call=run_steps, forbid=FORBID),
    Probe("modern.adamw_errors", call=_construct, forbid=FORBID),
    Probe("modern.decay_groups", call=_groups),
)
