"""11.1: `RMSNorm(d_model, eps=1e-5)`: y = x / sqrt(mean(x**2, last axis) + eps) * weight.

Oracle: PyTorch's ``F.rms_norm`` in float64 (float16 and bfloat16 inputs: in float32, as the contract
says, then cast back). The probe records each output with its dtype's name (`DTYPE`). Mistakes are
`_rms`, the formula written out, with knobs: the wrong axis, the mean subtracted (layer norm), eps
outside the root or forgotten elsewhere, no gain, half precision computed in itself.

Tolerances: a bfloat16 output computed in float32 as the contract says is one rounding of the
oracle's, at most 2**-8 of its size, so rtol is 1e-2 (a bfloat16 input normalised in bfloat16 is
rounded at every step, but with gains that are powers of two stays within that: the contract says the tests
cannot tell it, and float16's overflow is what catches the missing upcast). Llama's and Hugging Face's
order (normalise in float32, cast
back, multiply by the gain in the input's dtype) is a correct answer too: it rounds the gain and the
product as well, up to about 1.2% in bfloat16, so the bfloat16 cases' gains are powers of two, by which
both orders give the same numbers (tests/test_checks.py judges that order on 40 draws). Float32 and
float64 outputs are far better than that, and every mistake below is
made to differ by far more on the cases where it applies (tiny rows for eps, rows around an offset
for the mean, float16 rows whose squares overflow float16 for the missing upcast, float64 rows whose
squares underflow float32 for an upcast of every dtype).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from course.probing.calls.modern.norm import DTYPE, NEW, OUT
from course.probing.kit import PARAMS
from course.probing.plain import dtype_name

from .. import kit
from ..framework import Case, Check, Mistake, register
from ..kit import randn, variant

EPS = 1e-5
RTOL, ATOL = 1e-2, 1e-3
HALF = (torch.float16, torch.bfloat16)
_NOTES = {"normal": "", "offset": ", rows around 3 with spread 0.5", "tiny": ", rows of size ~1e-3 (mean square "
          "far below eps)", "large": ", values of size 300 to 1000 (their squares overflow float16)",
          "minute": ", values of size ~1e-25 (their squares underflow float32, not float64)"}


def _rows(rng: np.random.Generator, shape: tuple[int, ...], kind: str, dtype: torch.dtype) -> torch.Tensor:
    x = randn(rng, *shape)
    x = {"normal": lambda: x, "offset": lambda: 3.0 + 0.5 * x, "tiny": lambda: 1e-3 * x,
         "large": lambda: torch.sign(x) * (300.0 + 700.0 * torch.rand(shape)), "minute": lambda: 1e-25 * x}[kind]()
    return x.to(dtype)


def _case(rng: np.random.Generator, shape: tuple[int, ...], *, kind: str = "normal", eps: float | None = None,
          dtype: torch.dtype = torch.float32, d_model: int | None = None) -> Case:
    """RMSNorm(d_model[, eps]) on x of `shape` (the last size drawn around the spec's), a gain around 1."""
    last = shape[-1] + kit.even(rng, 0, 3)
    shape = (*shape[:-1], last)
    d = last if d_model is None else d_model + kit.even(rng, 0, 3)
    d += d == last and d_model is not None  # a case of the error: the last axis is not d_model
    x = _rows(rng, shape, kind, dtype)
    # bfloat16: gains that are powers of two, by which a product is exact, so that multiplying by the gain
    # before or after the cast back (Llama's order) gives the same numbers; other dtypes: gains around 1
    weight = 2.0 ** torch.from_numpy(rng.integers(-1, 2, d)).double() if dtype == torch.bfloat16 \
        else 1.0 + 0.5 * randn(rng, d)
    eps_text = "" if eps is None else f", eps={eps:g}"
    return Case(f"RMSNorm({d}{eps_text}), x {kit.shape_of(x)} {dtype_name(dtype)}{_NOTES[kind]}",
                (x,), meta={"d_model": d, "eps": eps, "weight": weight})


def _cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    f64, f16, bf16 = torch.float64, torch.float16, torch.bfloat16
    specs = [((2, 3, 8), {}), ((3, 6), {"kind": "tiny", "eps": 1e-3}), ((2, 4, 6), {"d_model": 8}),
             ((2, 3, 8), {"kind": "large", "dtype": f16}), ((2, 3, 16), {"dtype": bf16}), ((3, 32), {"kind": "tiny"}),
             ((2, 3, 8), {"kind": "minute", "dtype": f64, "eps": 1e-60})] if not hidden \
        else [((2, 4, 16), {"kind": "offset"}), ((2, 2, 3, 12), {"dtype": f64}), ((10,), {}),
              ((3, 32), {"kind": "tiny"}), ((2, 5, 8), {"kind": "tiny", "eps": 1e-4}),
              ((2, 3, 16), {"kind": "large", "dtype": f16}), ((2, 3, 16), {"dtype": bf16}),
              ((16, 4, 64), {"dtype": bf16}),  # enough values that bfloat16 arithmetic shows on every draw
              ((2, 6, 10), {"kind": "tiny", "dtype": f64, "eps": 1e-6}), ((1, 2, 512), {}),
              ((2, 3, 7), {"d_model": 9}), ((12,), {"d_model": 16}),
              ((2, 3, 8), {"kind": "minute", "dtype": f64, "eps": 1e-60})]
    return [_case(rng, shape, **kw) for shape, kw in specs]


def _rms(case: Case, *, axes: str = "last", centre: bool = False, denom: str = "sqrt(ms+eps)", gain: bool = True,
         eps: float | None = None, upcast: bool = True, precise: bool = True, single: bool = False) -> Any:
    """x / sqrt(mean(x**2) + eps) * weight, written out. Knobs: the `axes` the mean runs over ('first', 'all'),
    `centre` (subtract the mean: layer norm), the denominator (`denom`), no `gain`, another `eps`, no `upcast`
    of half precision, every dtype computed in float32 (`single`); `precise`: in float64 (the oracle's accuracy)
    rather than in the working dtype."""
    x, d = case.args[0], case.meta["d_model"]
    if x.shape[-1] != d:
        return kit.raises(f"x has {x.shape[-1]} features, the module {d}")
    eps = (EPS if case.meta["eps"] is None else case.meta["eps"]) if eps is None else eps
    h = x.float() if x.dtype in HALF and upcast or single else x
    h = h.double() if precise and h.dtype not in HALF else h
    dims = {"last": (-1,), "first": (0,), "all": tuple(range(x.dim()))}[axes]
    if centre:
        h = h - h.mean(dim=dims, keepdim=True)
    ms = h.pow(2).mean(dim=dims, keepdim=True)
    y = h / {"sqrt(ms+eps)": lambda: torch.sqrt(ms + eps), "sqrt(ms)+eps": lambda: torch.sqrt(ms) + eps,
             "ms+eps": lambda: ms + eps, "norm": lambda: torch.sqrt(ms * x.shape[-1] + eps)}[denom]()
    if gain:
        y = y * case.meta["weight"].to(y.dtype)
    y = y.to(x.dtype)
    return kit.both_modes({OUT: y, DTYPE: dtype_name(x.dtype)})


def _oracle(case: Case) -> Any:
    """F.rms_norm in float64 (half precision: in float32), cast back to x's dtype."""
    x, d = case.args[0], case.meta["d_model"]
    if x.shape[-1] != d:
        return kit.raises(f"x has {x.shape[-1]} features, the module {d}")
    eps = EPS if case.meta["eps"] is None else case.meta["eps"]
    work = torch.float32 if x.dtype in HALF else torch.float64
    y = F.rms_norm(x.to(work), (d,), case.meta["weight"].to(work), eps).to(x.dtype)
    return kit.both_modes({OUT: y, DTYPE: dtype_name(x.dtype)})


def _unlike(**knobs: Any) -> Callable[[Case], Any]:
    return kit.unlike(_oracle, variant(_rms, **knobs), RTOL, ATOL)


def _passes_eps(case: Case) -> bool:
    return case.meta["eps"] is not None


def _is_half(case: Case) -> bool:
    return case.args[0].dtype in HALF


_MISTAKES = [
    Mistake("Did you take the mean over the wrong axis? Each position is rescaled by the root mean square of its "
            "own d_model features: x.pow(2).mean(dim=-1, keepdim=True).", _unlike(axes="first")),
    Mistake("Did you take the mean square over the whole tensor? Each position gets its own: mean over dim=-1 "
            "only, keepdim=True.", _unlike(axes="all")),
    Mistake("Did you subtract the mean? That is layer norm; RMSNorm only rescales: x / sqrt(mean(x**2) + eps), "
            "no centring.", _unlike(centre=True)),
    Mistake("Did you put eps outside the square root? The denominator is sqrt(mean(x**2) + eps), not "
            "sqrt(mean(x**2)) + eps: the two differ where the mean square is small next to eps.",
            _unlike(denom="sqrt(ms)+eps")),
    Mistake("Did you forget the square root? Divide by sqrt(mean(x**2) + eps), the root mean square.",
            _unlike(denom="ms+eps")),
    Mistake("Did you divide by the L2 norm (a sum of squares)? RMSNorm divides by the root MEAN square: "
            "sqrt(mean(x**2) + eps).", _unlike(denom="norm")),
    Mistake("Did you forget the gain? Multiply by self.weight (one learned number per feature).",
            _unlike(gain=False)),
    Mistake("Did you change eps's default? RMSNorm(d_model) uses eps = 1e-5 (1e-6 was LLaMA 1's "
            "setting; Llama 2 and 3 use 1e-5).", kit.unless(lambda c: not _passes_eps(c), _unlike(eps=1e-6))),
    Mistake("Did you ignore the eps argument? RMSNorm(d_model, eps) must use the eps it is given.",
            kit.unless(_passes_eps, _unlike(eps=EPS))),
    Mistake("Did you compute in half precision? For float16 and bfloat16 inputs compute in float32 (x.float()) "
            "and cast the result back: in float16 the squares of values above 256 overflow to inf.",
            kit.unless(_is_half, _unlike(upcast=False, precise=False))),
    Mistake("Did you compute a float64 input in float32? Only half precision is upcast; float32 and float64 inputs "
            "are computed in their own dtype (in float32 the squares of values below about 1e-23 underflow to 0).",
            _unlike(single=True, precise=False)),
]

# ------------------------------------------------------------ a new module ---

def _new_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3, 8), {})] if not hidden else [((3, 6), {}), ((2, 4, 16), {"eps": 1e-3}), ((5,), {}),
                                                  ((2, 2, 64), {"eps": 0.5})]
    cases = []
    for shape, kw in specs:
        case = _case(rng, shape, **kw)
        del case.meta["weight"]  # a new module keeps its own gain
        cases.append(Case("a new " + case.label, case.args, meta=case.meta))
    return cases


def _new(case: Case, *, bias: bool = False, kind: str = "parameter", shape: str = "d", start: str = "ones") -> Any:
    """A new module: one float32 parameter `weight` (d_model,) of ones, so forward is the plain rescaling.
    Knobs: a `bias` parameter too, the gain stored as a plain tensor or buffer (`kind`), of another `shape`,
    started at zeros (`start`)."""
    d, x = case.meta["d_model"], case.args[0]
    size = {"d": (d,), "1": (1,)}[shape]
    table = {"weight": (size, "float32")} if kind == "parameter" else {}
    if bias:
        table["bias"] = ((d,), "float32")
    eps = EPS if case.meta["eps"] is None else case.meta["eps"]
    y = F.rms_norm(x.double(), (d,), eps=eps) * {"ones": 1.0, "zeros": 0.0}[start]
    return {PARAMS: dict(sorted(table.items())), NEW: {OUT: y.float(), DTYPE: "float32"}}


_NEW_SLIPS = [
    ("Did you give RMSNorm a bias? It has one parameter, the gain weight (d_model,); there is no shift.",
     {"bias": True}),
    ("Did you store the gain as a plain tensor (or a buffer)? It is learned: weight = nn.Parameter(torch.ones("
     "d_model)).", {"kind": "plain"}),
    ("The gain holds one number per feature: weight has shape (d_model,), not (1,).", {"shape": "1"}),
    ("Did you start the gain at zeros? A new RMSNorm starts as the plain rescaling: weight = torch.ones(d_model).",
     {"start": "zeros"}),
]

register(
    __name__,
    Check(name="rmsnorm", cases=_cases, expected=_oracle, mistakes=_MISTAKES, rtol=RTOL, atol=ATOL,
          hint="forward(x) = x / sqrt(mean(x**2, dim=-1, keepdim=True) + eps) * weight, for x of any shape (..., "
               "d_model); float32 and float64 in the input's dtype, float16 and bfloat16 computed in "
               "float32 (gain included) and cast back; ValueError when x's last axis is not d_model; x left "
               "unchanged. No dropout: " + kit.same_in_both_modes()),
    Check(name="rmsnorm_parameters", guard=True, cases=_new_cases, expected=_new, rtol=RTOL, atol=ATOL,
          mistakes=[Mistake(hint, variant(_new, **knobs)) for hint, knobs in _NEW_SLIPS],
          hint="A new RMSNorm(d_model, eps) holds exactly one parameter, weight = nn.Parameter(torch.ones(d_model)) "
               "(float32), no bias, and forward divides by sqrt(mean(x**2) + eps) with the eps it was given."),
)
