"""Checks for chapter 6: layer normalisation (a function and a module) and the two residual wirings.

Oracles are PyTorch's own: ``F.layer_norm`` in float64, cast back to the input's dtype, for the
function; ``nn.LayerNorm`` in float64 with the case's gain and bias copied in for the module (which
has no dropout, so it must give that answer in training and in eval mode) and ``F.layer_norm``
without gain and bias for a new module; for the residual wirings, the case's own ``nn.LayerNorm``
and sub-layer (a tanh MLP defined here) composed in the right order. Mistakes are `_manual` (layer
norm written out, with knobs for the usual slips) and `_wired` (the wrong compositions).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import kit
from .framework import NOT_APPLICABLE, Case, Check, Mistake, mismatch, register
from .kit import describe, differing, randn
from .plain import to_plain

EPS = 1e-5
# float32 layer norm is good to about 1e-5 of the rows' spread; rows around 1000 with a spread of 8 lose a
# few times more (one float32 step at 1000 is 6e-5), so the absolute tolerance is 1e-4.
RTOL, ATOL = 1e-4, 1e-4
_FORBID = ("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.native_layer_norm")


# ------------------------------------------------------------- inputs ---

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
    """`differing(oracle, **knobs)`, and NOT_APPLICABLE where the wrong answer is within the checks'
    tolerance of the right one (eps outside the root on rows of variance 1, say), not only equal to
    it: there the mistake does not show, and naming it for an answer wrong in another way misleads."""
    wrong = differing(oracle, **knobs)

    def output(case: Case) -> Any:
        out = wrong(case)
        if out is NOT_APPLICABLE or mismatch(to_plain(out), to_plain(oracle(case)), RTOL, ATOL) is not None:
            return out
        return NOT_APPLICABLE
    return output


def _ln_args(case: Case) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    x, gamma, beta = case.args[:3]
    eps = case.args[3] if len(case.args) > 3 else case.kwargs.get("eps", EPS)
    return x, gamma, beta, eps


def _ln(case: Case, *, eps_ignored: bool = False, **knobs: Any) -> Any:
    """layer_norm(x, gamma, beta, eps) written out; `eps_ignored`: always 1e-5."""
    x, gamma, beta, eps = _ln_args(case)
    return _manual(x, gamma, beta, EPS if eps_ignored else eps, **knobs)


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


# ---------------------------------------------------- 6.1 layer_norm ---

def _ln_case(rng: np.random.Generator, *shape: int, kind: str = "normal", eps: float | None = None,
             positional: bool = False, dtype: torch.dtype = torch.float32) -> Case:
    x = _rows(rng, *shape, kind=kind).to(dtype)
    gamma, beta = (t.to(dtype) for t in _affine(rng, shape[-1]))
    label = ("float64 " if dtype == torch.float64 else "") + describe(x=x, gamma=gamma) + _NOTES[kind]
    if eps is None:
        return Case(label + " (default eps)", (x, gamma, beta))
    if positional:
        return Case(label + f", eps={eps:g} passed positionally", (x, gamma, beta, eps))
    return Case(label + f", eps={eps:g}", (x, gamma, beta), {"eps": eps})


def _ln_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 8), {}), ((4, 6), {"eps": 0.1})] if not hidden else [
        ((3, 7, 5), {}), ((2, 3, 4, 6), {"eps": 1e-3}), ((9,), {}), ((5, 1), {}), ((2, 512), {}),
        ((2, 5, 12), {"dtype": torch.float64}), ((3, 4, 10), {"eps": 0.5, "positional": True}), ((6, 3), {"eps": 2.0})]
    return [_ln_case(rng, *shape, **kw) for shape, kw in specs]


def _stability_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((4, 6), "tiny", {}), ((4, 5), "constant", {}), ((2, 16), "offset", {})] if not hidden else [
        ((2, 6, 64), "offset", {}), ((3, 33), "offset", {"eps": 1e-3}), ((2, 3, 16), "tiny", {}),
        ((5, 7), "tiny", {"eps": 1e-4}), ((6, 10), "constant", {}), ((3, 2, 9), "constant", {"eps": 1e-2}),
        ((4, 24), "tiny", {"dtype": torch.float64})]
    return [_ln_case(rng, *shape, kind=kind, **kw) for shape, kind, kw in specs]


def _ln_oracle(case: Case) -> torch.Tensor:
    """F.layer_norm in float64, cast back to x's dtype."""
    x, gamma, beta, eps = _ln_args(case)
    return F.layer_norm(x.double(), x.shape[-1:], gamma.double(), beta.double(), eps).to(x.dtype)


_EPS_IGNORED = Mistake("Did you ignore the eps argument? Use the eps you are given (default 1e-5).",
                       _unlike(_ln, eps_ignored=True))
_LN_HINT = ("Per position, over the last axis: mean = x.mean(-1, keepdim=True), var = ((x - mean)**2).mean(-1, "
            "keepdim=True) (the biased variance), x_hat = (x - mean) / sqrt(var + eps), return gamma * x_hat + beta, "
            "in x's dtype, for any number of leading dimensions.")

register(
    __name__,
    Check(name="layer_norm", cases=_ln_cases, expected=_ln_oracle, forbid=_FORBID,
          mistakes=_ln_mistakes(_ln, offsets=False) + [_EPS_IGNORED], hint=_LN_HINT, rtol=RTOL, atol=ATOL),
    Check(name="layer_norm_stability", cases=_stability_cases, expected=_ln_oracle, forbid=_FORBID,
          mistakes=_ln_mistakes(_ln) + [_EPS_IGNORED],
          hint=_LN_HINT + " These rows are hard on purpose: around 1000 (take the mean of (x - mean)**2, not "
                          "mean(x**2) - mean**2), with a variance far below eps, or constant (variance 0).",
          rtol=RTOL, atol=ATOL),
)


# --------------------------------------------------- 6.2 LayerNorm module ---
# Case.args: what forward() is called with (x); meta: the constructor's arguments and the weights to copy in.

def _module_case(rng: np.random.Generator, *shape: int, kind: str = "normal", eps: float | None = None) -> Case:
    d = shape[-1]
    x = _rows(rng, *shape, kind=kind)
    gamma, beta = _affine(rng, d)
    label = f"LayerNorm({d}{'' if eps is None else f', eps={eps:g}'}), x {kit.shape_of(x)}{_NOTES[kind]}"
    return Case(label, (x,), meta={"d_model": d, "eps": eps, "weights": {"gamma": gamma, "beta": beta}})


def _module_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 4), {}), ((3, 6), {"kind": "tiny", "eps": 1e-3})] if not hidden else [
        ((4, 5, 7), {}), ((2, 2, 3, 16), {"eps": 1e-3}), ((10,), {}), ((3, 1), {}), ((1, 2, 512), {}),
        ((2, 6, 64), {"kind": "offset"}), ((3, 32), {"kind": "tiny"}), ((4, 8), {"kind": "constant", "eps": 0.1}),
        ((5, 6), {"eps": 3.0})]
    return [_module_case(rng, *shape, **kw) for shape, kw in specs]


def _build(cls: Any, case: Case) -> nn.Module:
    eps = case.meta["eps"]
    return kit.build(cls, case.meta["d_model"]) if eps is None else kit.build(cls, case.meta["d_model"], eps=eps)


def _call_module(cls: Any, case: Case) -> Any:
    module = _build(cls, case)
    kit.load_weights(module, case.meta["weights"], "The module holds two nn.Parameter tensors, gamma and beta, "
                                                   "each of shape (d_model,)")
    return kit.run_modes(module, lambda m, x: m(x), *case.args)


def _module_oracle(case: Case) -> Any:
    eps = EPS if case.meta["eps"] is None else case.meta["eps"]
    ref = nn.LayerNorm(case.meta["d_model"], eps=eps, dtype=torch.float64)
    with torch.no_grad():
        ref.weight.copy_(case.meta["weights"]["gamma"])
        ref.bias.copy_(case.meta["weights"]["beta"])
        return kit.both_modes(ref(case.args[0].double()).float())


def _module_manual(case: Case, *, eps_ignored: bool = False, **knobs: Any) -> Any:
    eps = EPS if eps_ignored or case.meta["eps"] is None else case.meta["eps"]
    out = _manual(case.args[0], case.meta["weights"]["gamma"], case.meta["weights"]["beta"], eps, **knobs)
    return NOT_APPLICABLE if out is NOT_APPLICABLE else kit.both_modes(out)


def _init_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 6), None)] if not hidden else [((3, 5), None), ((2, 4, 9), 1e-3), ((1, 7, 1), None),
                                                    ((2, 2, 64), 0.5)]
    cases = [_module_case(rng, *shape, eps=eps) for shape, eps in specs]
    for case in cases:  # no weights are copied in: the module keeps its own initial values
        case.label = "a new " + case.label
    return cases


_PARAMS, _NEW = "parameters (name: shape, dtype)", "forward(x) of the new module"


def _init_report(cls: Any, case: Case) -> dict:
    module = _build(cls, case)
    with torch.no_grad():
        return {_PARAMS: kit.parameter_table(module), _NEW: module(case.args[0])}


def _init_expected(case: Case, *, shape: str = "d", dtype: str = "float32", kind: str = "parameter",
                   swapped: bool = False) -> dict:
    """A new module: gamma = 1 and beta = 0, so forward is the plain normalisation. Knobs: the parameters'
    shape ('1' or '1,1,d') and dtype, stored as plain tensors or buffers (`kind`), initial values swapped."""
    d, eps = case.meta["d_model"], case.meta["eps"]
    x = case.args[0]
    size = {"d": (d,), "1": (1,), "1,1,d": (1, 1, d)}[shape]
    table = {name: (size, dtype) for name in ("gamma", "beta")} if kind == "parameter" else {}
    out = F.layer_norm(x.double(), (d,), eps=EPS if eps is None else eps).float()
    if swapped:
        out = torch.ones_like(out)  # gamma = 0 and beta = 1
    out = out * torch.ones(size)  # what a gain of that shape does to the output's shape
    return {_PARAMS: table, _NEW: out.to(getattr(torch, dtype)) if kind == "parameter" else out}


def _made(cls: Any, case: Case) -> str:
    _build(cls, case)
    return "a module was created"


_INIT_SLIPS = [  # (hint, `_init_expected` knobs)
    (("Did you initialise gamma to zeros and beta to ones? A new LayerNorm starts as the plain normalisation: "
      "gamma = torch.ones(d_model), beta = torch.zeros(d_model)."), {"swapped": True}),
    (("Did you store gamma and beta as plain tensors (or buffers)? They are learned: wrap them in nn.Parameter so "
      "that the optimiser sees them."), {"kind": "plain"}),
    ("gamma and beta hold one number per feature: shape (d_model,), not (1,).", {"shape": "1"}),
    ("gamma and beta have shape (d_model,): one number per feature, shared by every position (not (1, 1, d_model)).",
     {"shape": "1,1,d"}),
    ("gamma and beta are float32 (nn.Parameter(torch.ones(d_model)) is), not float64.", {"dtype": "float64"}),
]
_MODULE_HINT = ("forward(x) is your layer_norm(x, self.gamma, self.beta, self.eps): same shape and dtype as x, any "
                "leading dimensions. The module has no dropout, so training and eval mode must agree: if only key "
                "'train' differs, your module behaves differently in training mode. If your layer_norm fails its own "
                "tests, fix it first.")

register(
    __name__,
    Check(name="layer_norm_module", cases=_module_cases, expected=_module_oracle, call=_call_module, forbid=_FORBID,
          mistakes=[*_ln_mistakes(_module_manual),
                    Mistake("Did you pass eps on? LayerNorm(d_model, eps) must normalise with that eps, not the "
                            "default.", _unlike(_module_manual, eps_ignored=True))],
          hint=_MODULE_HINT, rtol=RTOL, atol=ATOL),
    Check(name="layer_norm_module_init", cases=_init_cases, call=_init_report, expected=_init_expected,
          forbid=_FORBID,
          mistakes=[Mistake(hint, differing(_init_expected, **knobs)) for hint, knobs in _INIT_SLIPS],
          hint="A new LayerNorm(d_model) holds exactly two parameters, gamma = ones and beta = zeros, each an "
               "nn.Parameter of shape (d_model,) in float32, and no others."),
    Check(name="layer_norm_module_errors", call=_made,
          cases=lambda rng, hidden: [Case(f"LayerNorm({d})", meta={"d_model": d, "eps": None})
                                     for d in ([0] if not hidden else [0, -1, -64])],
          expected=lambda c: kit.raises("d_model must be at least 1"),
          hint="Check d_model first in __init__ and raise ValueError when it is smaller than 1 (a LayerNorm over "
               "no features has nothing to normalise)."),
)


# ----------------------------------------------------- 6.3 residual wirings ---

class TanhMLP(nn.Module):
    """The sub-layer the tests wrap: tanh(x W1 + b1) W2 + b2, of width d_model in and out."""

    def __init__(self, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> None:
        super().__init__()
        self.w1, self.b1, self.w2, self.b2 = (nn.Parameter(t) for t in (w1, b1, w2, b2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ self.w1 + self.b1) @ self.w2 + self.b2


def _residual_case(rng: np.random.Generator, *shape: int, kind: str = "normal",
                   dtype: torch.dtype = torch.float32) -> Case:
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
             + f", sub-layer: a tanh MLP {d} -> {hidden_width} -> {d}, norm: nn.LayerNorm({d}) with random gain and bias")
    return Case(label, (x, mlp, norm))


def _residual_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 4), {}), ((1, 5, 6), {})] if not hidden else [
        ((3, 7, 5), {}), ((2, 2, 3, 8), {}), ((6, 12), {}), ((9,), {}), ((2, 4, 16), {"kind": "offset"}),
        ((2, 5, 10), {"dtype": torch.float64})]
    cases = [_residual_case(rng, *shape, **kw) for shape, kw in specs]
    if hidden:  # the contract takes any callables: plain functions too
        x = randn(rng, 3, 4, 7)
        norm = functools.partial(F.layer_norm, normalized_shape=(7,))
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
                      "normalised: return x + sublayer(norm(x)) (a pre-LN stack has one final LayerNorm, after its "
                      "last block).",
}

register(
    __name__,
    Check(
        name="post_ln_residual", cases=_residual_cases, expected=_post,
        mistakes=[Mistake(hint, differing(_post, wiring=w)) for w, hint in _POST_SLIPS.items()],
        hint="post_ln_residual returns norm(x + sublayer(x)): the sub-layer sees the raw x, and the norm comes "
             "last. Leave x unchanged (no +=) and keep its dtype.",
    ),
    Check(
        name="pre_ln_residual", cases=_residual_cases, expected=_pre,
        mistakes=[Mistake(hint, differing(_pre, wiring=w)) for w, hint in _PRE_SLIPS.items()],
        hint="pre_ln_residual returns x + sublayer(norm(x)): the raw x travels on the residual path, only the "
             "sub-layer's input is normalised. Leave x unchanged (no +=) and keep its dtype.",
    ),
)
