"""11.4 `AdamW(params, lr, betas, eps, weight_decay)` and 11.5 `decay_groups(model, weight_decay)`.

AdamW's oracle is ``torch.optim.AdamW`` (foreach=False) on the same parameters, groups and gradients,
step for step; its mistakes are `_adamw`, the update written out, with knobs: L2 decay in the gradient
(Adam with weight_decay), bias correction a step off or left out, the defaults' weight decay for every
group, decay after the update or without lr, eps inside the root, a gradient of None taken as zeros, one
step count for all parameters. Most cases run in float64, where the update is exact to ~1e-15; one runs
30 steps in float32 (measured: within 3e-7 of torch's, against rtol 1e-4 of values near 1).

decay_groups' oracle reads the rule off the model the kernel builds from the same layout
(`build_model`): nn.Linear weights decay unless an nn.Embedding shares them; its mistakes are other
rules (nanoGPT's two-or-more dimensions, everything but biases, ...).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from course.probing.calls.modern.optim import AFTER, CHANGED, GROUPS, MADE, STATE, build_model, run_steps
from course.probing.plain import dtype_name

from .. import kit
from ..framework import Case, Check, Mistake, register
from ..kit import randn, variant

RTOL, ATOL = 1e-4, 1e-6

# ---------------------------------------------------------------- AdamW ---
# One spec per case: (parameter shapes, steps, dtype, gradient scale, group layout or None, constructor
# kwargs, the share of (parameter, step) pairs without a gradient). Layouts give each group its parameters'
# indices and its own settings; the drawn numbers fill them in.


def _sig(x: float) -> float:
    return float(f"{x:.2g}")


def _case(rng: np.random.Generator, shapes: list[tuple[int, ...]], steps: int, *, dtype: torch.dtype = torch.float64,
          scale: float = 1.0, groups: list | None = None, kwargs: dict | None = None, missing: float = 0.0,
          note: str = "", lr_scale: list[float] | None = None) -> Case:
    shapes = [tuple(n + int(rng.integers(0, 3)) for n in s) for s in shapes]
    start = [randn(rng, *s).to(dtype) for s in shapes]
    grads = []
    for t in range(steps):
        row = [scale * randn(rng, *s).to(dtype) for s in shapes]
        grads.append([None if rng.random() < missing else g for g in row])
    if missing:  # parameter 0 has no gradient on the first step, the last parameter none on step 2
        grads[0][0], grads[min(1, steps - 1)][-1] = None, None
    kwargs = dict(kwargs or {})
    kw_text = ", ".join(f"{k}={v}" for k, v in kwargs.items()) or "defaults"
    group_text = "" if groups is None else f", {len(groups)} groups with their own " + \
        "/".join(sorted({k for _, s in groups for k in s}))
    label = (f"{steps} steps on {len(shapes)} {dtype_name(dtype)} parameters {shapes}, AdamW("
             f"{kw_text}){group_text}, gradients of size ~{scale:g}"
             + (", some parameters without a gradient on some steps" if missing else "") + note)
    meta = {"start": start, "groups": groups, "grads": grads} | ({"lr_scale": lr_scale} if lr_scale else {})
    return Case(label, (), kwargs, meta=meta)


def _cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    def lr() -> float:
        return _sig(10 ** rng.uniform(-2.5, -1.5))

    def wd() -> float:
        return _sig(rng.uniform(0.05, 0.3))
    visible = [
        _case(rng, [(3, 4), (4,)], 5, kwargs={"lr": lr(), "weight_decay": wd()}),
        _case(rng, [(3, 4), (4,)], 30, scale=1e-4, note=" (every setting left to its default)"),
        _case(rng, [(2, 3), (3,), (5,)], 6, kwargs={"lr": lr(), "weight_decay": wd()}, missing=0.1,
              groups=[[[0], {}], [[1, 2], {"weight_decay": 0.0, "lr": lr()}]]),
        _case(rng, [(3, 4), (4,)], 12, kwargs={"lr": lr(), "weight_decay": wd()},
              groups=[[[0], {}], [[1], {"lr": lr()}]],
              lr_scale=[1 + t / 4 if t < 6 else 2.5 - (t - 5) / 4 for t in range(12)],
              note=" (each group's lr set before every step, as a schedule does)"),
    ]
    if not hidden:
        return visible
    return visible + [
        _case(rng, [(4, 3), (2,)], 8),
        _case(rng, [(3, 5), (5,)], 6, scale=1e-4, kwargs={"lr": lr()}, note=" (near eps)"),
        _case(rng, [(3, 3), (3,)], 8, kwargs={"lr": _sig(rng.uniform(0.05, 0.2)), "weight_decay":
                                               _sig(rng.uniform(0.3, 0.8))}, note=" (large lr * weight_decay)"),
        _case(rng, [(2, 4), (4,), (3, 2), (2,)], 12, missing=0.25, kwargs={"lr": lr(), "weight_decay": wd()},
              groups=[[[0, 2], {"betas": (0.8, 0.95), "eps": 1e-6}], [[1], {"weight_decay": 0.0}],
                      [[3], {"lr": lr(), "weight_decay": 0.5, "betas": (0.5, 0.9)}]]),
        _case(rng, [(4, 6), (6,)], 30, dtype=torch.float32, kwargs={"lr": lr(), "weight_decay": wd()}),
        _case(rng, [(3, 2), (2,)], 5, kwargs={"lr": lr(), "betas": (0.0, 0.99), "eps": 1e-6, "weight_decay": 0.0}),
        _case(rng, [(2, 2, 3)], 40, missing=0.3, kwargs={"lr": lr(), "weight_decay": wd(), "betas": (0.85, 0.98)}),
    ]


def _settings(case: Case) -> tuple[list[nn.Parameter], list[dict], dict]:
    """The parameters, and the groups as the optimiser sees them: every setting filled in."""
    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01} | case.kwargs
    params = [nn.Parameter(t.clone()) for t in case.meta["start"]]
    layout = case.meta["groups"] or [[list(range(len(params))), {}]]
    return params, [{"params": [params[i] for i in idx], **defaults, **s} for idx, s in layout], defaults


def _oracle(case: Case) -> dict[str, list]:
    """torch.optim.AdamW, step for step."""
    return run_steps(lambda given, **kw: torch.optim.AdamW(given, foreach=False, **kw), case)


def _adamw(case: Case, *, l2: bool = False, shift: int = 0, correct: bool = True, decay_from: str = "group",
           decay: str = "before", eps_inside: bool = False, none: str = "skip", count: str = "own",
           kept: str = "state", lr_once: bool = False) -> Any:
    """AdamW written out. Knobs: `l2` (weight_decay * p added to the gradient, no decoupled decay), the bias
    correction's step `shift`ed or not `correct`ed at all, the weight decay of the constructor's defaults
    for every group (`decay_from`), decay 'after' the update or 'without lr', `eps_inside` the root, a
    gradient of `none` taken as 'zeros', one step `count` for 'all' parameters, the moments `kept` 'elsewhere'
    than self.state (so state_dict() saves none), the learning rate read `lr_once` (a schedule's changes
    ignored)."""
    params, groups, defaults = _settings(case)
    state: dict[int, dict] = {}
    calls = 0
    after = []
    with torch.no_grad():
        scale = case.meta.get("lr_scale")
        for grads in case.meta["grads"]:
            calls += 1
            given = {id(p): g for p, g in zip(params, grads)}
            for group in groups:
                lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
                lr = lr * scale[calls - 1] if scale and not lr_once else lr
                wd = group["weight_decay"] if decay_from == "group" else defaults["weight_decay"]
                for p in group["params"]:
                    g = given[id(p)]
                    if g is None:
                        if none == "skip":
                            continue
                        g = torch.zeros_like(p)
                    s = state.setdefault(id(p), {"t": 0, "m": torch.zeros_like(p), "v": torch.zeros_like(p)})
                    s["t"] += 1
                    t = (s["t"] if count == "own" else calls) + shift
                    if l2:
                        g = g + wd * p
                    s["m"] = b1 * s["m"] + (1 - b1) * g
                    s["v"] = b2 * s["v"] + (1 - b2) * g * g
                    m_hat, v_hat = (s["m"] / (1 - b1 ** t), s["v"] / (1 - b2 ** t)) if correct else (s["m"], s["v"])
                    step = lr * m_hat / ((v_hat + eps).sqrt() if eps_inside else v_hat.sqrt() + eps)
                    if not l2 and decay == "before":
                        p.mul_(1 - lr * wd)
                    if not l2 and decay == "without lr":
                        p.mul_(1 - wd)
                    p.sub_(step)
                    if not l2 and decay == "after":
                        p.mul_(1 - lr * wd)
            after.append([p.detach().clone() for p in params])
    return {AFTER: after, STATE: [kept == "state" and id(p) in state for p in params]}


def _slip(**knobs: Any) -> Callable[[Case], Any]:
    return kit.unlike(_oracle, variant(_adamw, **knobs), RTOL, ATOL)


_MISTAKES = [
    Mistake("Did you add weight_decay * p to the gradient? That is Adam's L2 penalty, which Adam then rescales; "
            "AdamW decays the weights directly: p -= lr * weight_decay * p, apart from the Adam step.", _slip(l2=True)),
    Mistake("Is your bias correction a step off? After t steps (t = 1 on the first) divide m by 1 - beta1**t and v "
            "by 1 - beta2**t: count the step before correcting.", _slip(shift=1)),
    Mistake("Did you leave out the bias correction? m_hat = m / (1 - beta1**t), v_hat = v / (1 - beta2**t): "
            "without it the first steps are far too small.", _slip(correct=False)),
    Mistake("Did you decay every group with the constructor's weight_decay? Each group has its own settings: read "
            "group['weight_decay'] (0.0 for the no-decay group), and group['lr'], group['betas'], group['eps'].",
            _slip(decay_from="defaults")),
    Mistake("Did you decay after the Adam step? torch's AdamW multiplies p by 1 - lr * weight_decay first, then "
            "subtracts the step.", _slip(decay="after")),
    Mistake("Did you forget lr in the decay? Each step multiplies p by 1 - lr * weight_decay.",
            _slip(decay="without lr")),
    Mistake("Did you put eps inside the square root? The step is lr * m_hat / (sqrt(v_hat) + eps).",
            _slip(eps_inside=True)),
    Mistake("Did you take a missing gradient as zeros? A parameter whose .grad is None is skipped: no decay, no "
            "moment update, its step count unchanged.", _slip(none="zeros")),
    Mistake("Did you count steps per optimizer instead of per parameter? Each parameter's bias correction uses its "
            "own step count (state[p]['step']), which does not advance on steps where it had no gradient.",
            _slip(count="all")),
    # the schedule's first factor is 1: reading lr in __init__ and at the first step give the same answers
    Mistake("Did you read the learning rate once? A scheduler changes group['lr'] between steps: read every "
            "setting from the group at each step().", _slip(lr_once=True)),
    Mistake("Did you keep m, v and the step count outside self.state? Keep them in self.state[p], a dict per "
            "parameter, which state_dict() saves: optimiser state kept elsewhere is lost when a run is checkpointed "
            "and resumed.", _slip(kept="elsewhere")),
]


def _error_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    lr, wd = _sig(10 ** rng.uniform(-4, -2)), _sig(rng.uniform(0.01, 0.2))
    settings = [{"lr": -lr}, {"betas": (1.0, 0.999)}, {"weight_decay": -wd}]
    if hidden:
        settings += [{"eps": -_sig(10 ** rng.uniform(-9, -6))}, {"betas": (0.9, 1.0)}, {"betas": (-0.1, 0.999)},
                     {"lr": lr, "betas": (0.9, 1.5)}]
    settings.append({"lr": 0.0, "betas": (0.0, 0.0), "eps": 0.0, "weight_decay": 0.0})  # the boundary itself is allowed
    cases = [Case(f"AdamW(params, {', '.join(f'{k}={v}' for k, v in kw.items())})", (), kw) for kw in settings]
    return [cases[i] for i in rng.permutation(len(cases))]


def _errors(case: Case) -> Any:
    kw = case.kwargs
    if kw.get("lr", 0) < 0 or kw.get("eps", 0) < 0 or kw.get("weight_decay", 0) < 0 or \
            not all(0 <= b < 1 for b in kw.get("betas", (0.9, 0.999))):
        return kit.raises("lr, eps and weight_decay must be >= 0 and betas in [0, 1)")
    return MADE


# --------------------------------------------------------- decay_groups ---

def _lm(rng: np.random.Generator, blocks: int) -> tuple[list, list]:
    """A modern LM: embedding, blocks of (gain, attention without biases, gain, SwiGLU), a final gain, an
    output layer tied to the embedding."""
    v, d, f = int(rng.integers(11, 30)), kit.even(rng, 2, 5), int(rng.integers(5, 12))
    layout = [["embedding", "embedding", [v, d]]]
    for b in range(blocks):
        layout += [[f"layers.{b}.norm1", "gain", [d]]]
        layout += [[f"layers.{b}.attn.{w}", "linear", [d, d, False]] for w in ("W_q", "W_k", "W_v", "W_o")]
        layout += [[f"layers.{b}.norm2", "gain", [d]], [f"layers.{b}.ffn.w_gate", "linear", [d, f, False]],
                   [f"layers.{b}.ffn.w_up", "linear", [d, f, False]],
                   [f"layers.{b}.ffn.w_down", "linear", [f, d, False]]]
    layout += [["norm", "gain", [d]], ["output", "linear", [d, v, False]]]
    return layout, [["output", "embedding"]]


def _gpt(rng: np.random.Generator, blocks: int, tied: bool) -> tuple[list, list]:
    """A GPT-2-like model: token embedding, a learned positional table, blocks of (LayerNorm, linear layers
    with biases), a final LayerNorm, an output layer without bias, tied or not."""
    v, d, n = int(rng.integers(11, 30)), kit.even(rng, 2, 5), int(rng.integers(6, 20))
    layout = [["tok", "embedding", [v, d]], ["pos", "table", [n, d]]]
    for b in range(blocks):
        layout += [[f"h.{b}.ln_1", "layernorm", [d]], [f"h.{b}.attn", "linear", [d, 3 * d, True]],
                   [f"h.{b}.proj", "linear", [d, d, True]], [f"h.{b}.ln_2", "layernorm", [d]],
                   [f"h.{b}.fc", "linear", [d, 4 * d, True]]]
    layout += [["ln_f", "layernorm", [d]], ["head", "linear", [d, v, False]]]
    return layout, [["head", "tok"]] if tied else []


def _odd(rng: np.random.Generator) -> tuple[list, list]:
    """A linear layer first, then an embedding that takes its weight; one linear module registered twice;
    a gain; a linear layer with a bias."""
    v, d = int(rng.integers(5, 15)), int(rng.integers(3, 8))
    layout = [["unembed", "linear", [d, v, False]], ["proj", "linear", [d, d, True]], ["again", "same", ["proj"]],
              ["norm", "gain", [d]], ["embed", "embedding", [v, d]],
              ["mix", "linear", [d, d, bool(rng.random() < 0.5)]]]
    return layout, [["embed", "unembed"]]


def _group_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    models = [("a Llama-like model, 1 block, output tied to the embedding", _lm(rng, 1)),
              ("a GPT-2-like model, 1 block, untied", _gpt(rng, 1, False))]
    if hidden:
        models += [("a Llama-like model, 2 blocks, output tied to the embedding", _lm(rng, 2)),
                   ("a GPT-2-like model, 2 blocks, output tied to the embedding", _gpt(rng, 2, True)),
                   ("a linear layer whose weight an embedding takes, a linear module registered twice", _odd(rng))]
    cases = []
    for what, (layout, ties) in models:
        wd = _sig(rng.uniform(0.01, 0.3))
        cases.append(Case(f"{what} ({len(layout)} modules); weight_decay={wd}",
                          (wd,), meta={"layout": layout, "ties": ties}))
    return cases


def _rule(case: Case, *, rule: str = "linear", tied: str = "embedding", frozen: bool = False) -> dict:
    """The two groups by parameter name. `rule`: which parameters decay ('linear': nn.Linear weights; 'dim>=2';
    'linear+bias': nn.Linear weights and biases; 'not bias': all but biases; 'named weight': every *.weight);
    `tied`: a shared embedding/linear weight counted as the 'embedding''s, as a linear layer's ('linear'), or
    in 'both' groups; `frozen`: the no-decay group's parameters switched to requires_grad=False."""
    model = build_model(case.meta)
    kinds: dict[int, set] = {}
    for m in model.modules():
        for name, p in m.named_parameters(recurse=False):
            kinds.setdefault(id(p), set()).add((type(m), name))
    decay, rest = [], []
    for name, p in model.named_parameters():
        k = kinds[id(p)]
        linear_w, emb = (nn.Linear, "weight") in k, (nn.Embedding, "weight") in k
        goes = {"linear": linear_w, "dim>=2": p.dim() >= 2, "linear+bias": any(t is nn.Linear for t, _ in k),
                "not bias": not name.endswith("bias"), "named weight": name.endswith("weight")}[rule]
        if linear_w and emb and rule == "linear":
            if tied == "both":
                decay.append(name)
            goes = tied == "linear"
        (decay if goes else rest).append(name)
    return {GROUPS: [{"params": decay, "weight_decay": case.args[0]}, {"params": rest, "weight_decay": 0.0}],
            CHANGED: rest if frozen else []}


_GROUP_SLIPS = [
    ("Did you decay every parameter with two or more dimensions (nanoGPT's rule)? That decays the embeddings too; "
     "here only nn.Linear weights decay, embeddings do not.", {"rule": "dim>=2"}),
    ("Did you decay the linear layers' biases? Only their weights decay; biases go to the no-decay group.",
     {"rule": "linear+bias"}),
    ("Did you decay everything but the biases? Norm gains and embeddings do not decay either: only nn.Linear "
     "weights.", {"rule": "not bias"}),
    ("Did you decay every parameter called weight? Norm gains and embeddings are called weight too: decay "
     "exactly the weights of nn.Linear modules.", {"rule": "named weight"}),
    ("Did you decay the output layer's weight although the embedding shares it? A weight tied between an "
     "nn.Embedding and an nn.Linear is the embedding's: no decay.", {"tied": "linear"}),
    ("Is the tied weight in both groups? Each parameter belongs to exactly one group: a weight an nn.Embedding "
     "shares with an nn.Linear goes to the no-decay group only.", {"tied": "both"}),
    ("Did you change the model (requires_grad switched off)? decay_groups only sorts the parameters: the model "
     "is left as it was, every parameter still trained (with no decay for the second group).", {"frozen": True}),
]

register(
    __name__,
    Check(name="adamw", cases=_cases, expected=_oracle, mistakes=_MISTAKES, rtol=RTOL, atol=ATOL,
          hint="step(): for each group, each parameter p with a gradient g: t += 1 (its own count); p *= 1 - lr * "
               "weight_decay; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g**2; p -= lr * m_hat / "
               "(sqrt(v_hat) + eps) with m_hat = m / (1 - beta1**t), v_hat = v / (1 - beta2**t); every setting read "
               "from the group; parameters whose .grad is None skipped."),
    Check(name="adamw_errors", guard=True, cases=_error_cases, expected=_errors,
          hint="Raise ValueError in __init__ for a negative lr, eps or weight_decay, or a beta outside [0, 1); "
               "0 itself is allowed."),
    Check(name="decay_groups", cases=_group_cases, expected=_rule,
          mistakes=[Mistake(hint, variant(_rule, **knobs)) for hint, knobs in _GROUP_SLIPS],
          hint="Return [{'params': the weight of every nn.Linear, 'weight_decay': weight_decay}, {'params': every "
               "other parameter, 'weight_decay': 0.0}], each list in model.parameters() order, every parameter "
               "once; a weight an nn.Embedding shares with an nn.Linear goes to the second group; the model is left "
               "unchanged."),
)
