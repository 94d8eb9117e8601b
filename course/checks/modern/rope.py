"""11.2: `apply_rope(x, positions, base=10000.0)`, rotary position embeddings with interleaved pairs.

Oracle: the rotation as complex multiplication in float64, (x[2i] + i x[2i+1]) * exp(i p theta_i) with
theta_i = base ** (-2i / d_head) (`torch.polar`, `torch.view_as_complex`), cast to x's dtype. Mistakes
are `_rope`, the rotation written out, with knobs: split halves (Hugging Face's Llama layout), the
opposite sign, frequencies base ** (-i / d_head), positions 0 .. seq - 1 instead of the given ones,
angles in float32, a sign slip that is no rotation at all.

`rope_relative` checks the property RoPE exists for: rope(q, m + s) . rope(k, n + s) does not depend on
the shift s, and the rotation keeps lengths (`relative_facts` in the probe makes both from the rotated
vectors the kernel records). Large shifts there, and positions near 10^7 in `rope`, show float32 angles.

Tolerances: a float16 result is good to a couple of float16 steps of |x| < 2 (about 2e-3), so rope's
atol is 3e-3; float32 results are good to about 1e-6, and every mistake differs by far more.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from course.probing.calls.modern.norm import DTYPE, OUT
from course.probing.calls.modern.rope import LENGTHS, ROT_K, ROT_Q, SCORES, relative_facts

from .. import kit
from ..framework import Case, Check, Mistake, register
from ..kit import randn, variant

BASE = 10000.0
_NAMES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16"}


def _angles(positions: torch.Tensor, d: int, base: float, *, power: float = 2.0,
            dtype: torch.dtype = torch.float64, freqs: torch.dtype | None = None) -> torch.Tensor:
    """(seq, d / 2): p * base ** (-power * i / d), in `dtype` (float32: as a float32 computation goes), the
    frequencies computed in `freqs` (float32: as Llama's code computes them) and then cast to `dtype`."""
    i = torch.arange(d // 2, dtype=freqs or dtype)
    return positions.to(dtype)[:, None] * (base ** (-power * i / d)).to(dtype)


def rotate(x: torch.Tensor, positions: torch.Tensor, base: float = BASE) -> torch.Tensor:
    """RoPE by complex multiplication, float64: pair (x[2i], x[2i+1]) is the complex number
    x[2i] + i x[2i+1], multiplied by exp(i p theta_i), theta_i = base ** (-2i / d).
    x: (..., seq, d), positions: (seq,) -> float64 (..., seq, d). Also the attention checks' oracle."""
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    angle = _angles(positions, x.shape[-1], base)
    return torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle)).flatten(-2)


def _oracle(case: Case) -> Any:
    """The rotation by complex multiplication in float64, cast to x's dtype; ValueError where the
    contract asks for one."""
    x, positions = case.args
    if x.shape[-1] % 2 or tuple(positions.shape) != (x.shape[-2],):
        return kit.raises("d_head must be even and positions of shape (seq,)")
    return {OUT: rotate(x, positions, case.kwargs.get("base", BASE)).to(x.dtype), DTYPE: _NAMES[x.dtype]}


def _rope(case: Case, *, pairing: str = "interleaved", sign: str = "+", power: float = 2.0,
          positions: str = "given", angles: torch.dtype = torch.float64, freqs: torch.dtype | None = None) -> Any:
    """The rotation written out (float64, but for float32 `angles` or `freqs`). Knobs: `pairing` 'halves' (pair i is
    (x[i], x[i + d/2])), `sign` '-' (the other way round) or 'one' (out[2i] = x[2i] cos + x[2i+1] sin: no
    rotation), the frequencies' `power` (1: base ** (-i/d)), `positions` 'arange' (0 .. seq - 1)."""
    x, pos = case.args
    base, d = case.kwargs.get("base", BASE), x.shape[-1]
    if d % 2 or tuple(pos.shape) != (x.shape[-2],):
        return kit.raises("d_head must be even and positions of shape (seq,)")
    if positions == "arange":
        pos = torch.arange(x.shape[-2])
    angle = _angles(pos, d, base, power=power, dtype=angles, freqs=freqs)
    cos, sin = torch.cos(angle).double(), torch.sin(angle).double()
    h = x.double()
    a, b = (h[..., 0::2], h[..., 1::2]) if pairing == "interleaved" else (h[..., : d // 2], h[..., d // 2:])
    s = -1.0 if sign == "-" else 1.0
    first = a * cos - s * b * sin if sign != "one" else a * cos + b * sin
    second = s * a * sin + b * cos
    out = torch.stack([first, second], -1).flatten(-2) if pairing == "interleaved" else torch.cat([first, second], -1)
    return {OUT: out.to(x.dtype), DTYPE: _NAMES[x.dtype]}


# --------------------------------------------------------------- rope ---

def _case(rng: np.random.Generator, shape: tuple[int, ...], *, where: str = "from t", base: float | None = None,
          dtype: torch.dtype = torch.float32,
          positions_shape: Callable[[int], tuple[int, ...]] | None = None) -> Case:
    """x of `shape` (its sizes above 2 drawn around the spec's) and positions: t .. t + seq - 1 for a drawn t
    ('from t'), 0 .. seq - 1 ('from 0'), drawn at random below 200 ('scattered') or near 10^7 ('large');
    or, with `positions_shape`, t, t + 1, ... in the shape it gives for x's drawn seq (an error case's
    shape stays tied to the seq drawn here, whatever the draw)."""
    shape = tuple(n + kit.even(rng, 0, 2) if n > 2 else n for n in shape)
    seq = shape[-2]
    x = (0.5 if dtype == torch.float16 else 1.0) * randn(rng, *shape)
    x = x.to(dtype)
    start = {"from t": int(rng.integers(1, 50)), "from 0": 0, "large": int(rng.integers(8_000_000, 12_000_000))}
    if where == "scattered":
        pos = torch.from_numpy(rng.choice(200, size=seq, replace=False)).long()
    else:
        pos = start[where] + torch.arange(seq)
    if positions_shape is not None:
        wanted = positions_shape(seq)
        pos = torch.arange(int(np.prod(wanted))).reshape(wanted) + start["from t"]
    kw = {} if base is None else {"base": base}
    text = {"from t": f"positions {int(pos.flatten()[0])} ..", "from 0": "positions 0 ..",
            "scattered": "positions scattered in 0 .. 199", "large": "positions near 10^7"}[where]
    label = f"x {kit.shape_of(x)} {_NAMES[dtype]}, {text} (shape {kit.shape_of(pos)})" + \
        ("" if base is None else f", base={base:g}")
    return Case(label, (x, pos), kw)


def _cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    f64, f16 = torch.float64, torch.float16
    if not hidden:
        return [_case(rng, (2, 5, 8)), _case(rng, (3, 4, 6), where="scattered", base=float(rng.integers(100, 1000))),
                _case(rng, (1, 3, 16), where="large")]
    return [_case(rng, (2, 3, 7, 16)), _case(rng, (6, 10), where="from 0"), _case(rng, (1, 5, 2)),
            _case(rng, (2, 4, 12), dtype=f64, where="scattered"), _case(rng, (2, 3, 8), dtype=f16),
            _case(rng, (2, 4, 32), where="large"), _case(rng, (3, 1, 6), base=float(rng.integers(5, 50))),
            _case(rng, (2, 2, 5, 32), where="scattered", base=1e6), _case(rng, (1, 9, 64))]


_MISTAKES = [
    Mistake("Did you pair the first half of the features with the second (rotate_half, as Hugging Face's Llama "
            "stores its weights)? Here pair i is the neighbours (x[2i], x[2i + 1]): x[..., 0::2] and x[..., 1::2].",
            variant(_rope, pairing="halves")),
    Mistake("Did you turn the pairs the other way? RoFormer's rotation is out[2i] = x[2i] cos - x[2i+1] sin, "
            "out[2i+1] = x[2i] sin + x[2i+1] cos.", variant(_rope, sign="-")),
    Mistake("Is one of your signs off? out[2i] = x[2i] cos - x[2i+1] sin (minus), out[2i+1] = x[2i] sin + "
            "x[2i+1] cos (plus): anything else is no rotation.", variant(_rope, sign="one")),
    Mistake("Did you use the frequencies base ** (-i / d_head)? Pair i turns at theta_i = base ** (-2i / d_head), "
            "i = 0 .. d_head / 2 - 1.", variant(_rope, power=1.0)),
    Mistake("Did you use the positions 0 .. seq - 1 instead of the positions given? Row j turns by positions[j] * "
            "theta_i (in a KV cache the new rows sit at t, t + 1, ...).", variant(_rope, positions="arange")),
    Mistake("Did you compute the angles in float32? Near position 10^7 float32 angles are off by up to about "
            "0.6 radian in the fast-turning pairs: compute positions * theta in float64, take cos and sin, then "
            "cast to x's dtype.",
            variant(_rope, angles=torch.float32)),
    Mistake("Did you compute the frequencies theta_i in float32 (as Llama's code does)? Near position 10^7 "
            "float32 frequencies put the angles off by up to about a tenth of a radian: compute theta_i = base ** "
            "(-2i / d_head) and positions * theta_i in float64.", variant(_rope, freqs=torch.float32)),
]

# ------------------------------------------------------- rope_relative ---

def _relative_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    # (d_head, how far the shifts go, base)
    specs = [(8, 100, None), (16, 10_000, None)] if not hidden else [
        (6, 50, None), (32, 1_000_000, None), (16, 2_000, float(rng.integers(100, 1000))), (64, 200_000, 1e6)]
    cases = []
    for d, far, base in specs:
        d += kit.even(rng, 0, 2)
        shifts = [0] + sorted(int(s) for s in rng.choice(np.arange(1, far), size=5, replace=False)) \
            + [-int(rng.integers(0, 3))]
        m, n = (int(v) for v in rng.integers(3, 40, size=2))
        meta = {"q": randn(rng, d), "k": randn(rng, d), "m": m, "n": n, "shifts": shifts, "base": base}
        cases.append(Case(f"q and k ({d},) at positions m = {m}, n = {n} shifted by s in {shifts}"
                          + ("" if base is None else f", base={base:g}"), meta=meta))
    return cases


def _relative(case: Case, **knobs: Any) -> Any:
    """The facts of `relative_facts` for `_rope` with `knobs` (none: zeros, the property itself)."""
    meta = case.meta
    shifts = torch.tensor(meta["shifts"])
    kw = {} if meta["base"] is None else {"base": meta["base"]}

    def rotated(v: torch.Tensor, start: int) -> np.ndarray:
        copies = Case("", (v.expand(len(shifts), -1).clone(), start + shifts), kw)
        return (_rope(copies, **knobs) if knobs else _oracle(copies))[OUT].numpy()
    return relative_facts(case, {ROT_Q: rotated(meta["q"], meta["m"]), ROT_K: rotated(meta["k"], meta["n"])})


def _relative_expected(case: Case) -> dict[str, np.ndarray]:
    n = len(case.meta["shifts"])
    return {SCORES: np.zeros(n), LENGTHS: np.zeros((2, n))}


# ---------------------------------------------------------- rope_errors ---

def _error_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    seq, d = int(rng.integers(3, 7)), kit.even(rng, 2, 5)
    odd = _case(rng, (2, seq, d + 1))
    odd.label = "odd d_head: " + odd.label
    cases = [odd, _case(rng, (2, seq, d), positions_shape=lambda s: (s + 1,)),
             _case(rng, (seq, d), positions_shape=lambda s: (1, s))]  # seq elements, the wrong shape
    if hidden:
        cases += [_case(rng, (2, 3, seq, d), positions_shape=lambda s: (s, 1)),
                  _case(rng, (2, seq, 1)), _case(rng, (2, seq, d), positions_shape=lambda s: (s - 1,))]
    return [cases[i] for i in rng.permutation(len(cases))]


register(
    __name__,
    Check(name="rope", cases=_cases, expected=_oracle, mistakes=_MISTAKES, rtol=1e-3, atol=3e-3,
          hint="apply_rope(x, positions, base): pair i of each row is (x[2i], x[2i + 1]), turned by positions[row] * "
               "base ** (-2i / d_head): out[2i] = x[2i] cos - x[2i+1] sin, out[2i+1] = x[2i] sin + x[2i+1] cos; "
               "angles in float64; a new tensor of x's shape and dtype, any number of leading axes; x unchanged."),
    Check(name="rope_relative", guard=True, cases=_relative_cases, expected=_relative_expected, rtol=0.0, atol=1e-4,
          mistakes=[Mistake("Is one of your signs off? out[2i] = x[2i] cos - x[2i+1] sin, out[2i+1] = x[2i] sin + "
                            "x[2i+1] cos: only a rotation keeps lengths and makes the score depend on n - m alone.",
                            variant(_relative, sign="one")),
                    Mistake("Did you compute the angles in float32? Far from position 0 float32 angles lose the "
                            "relative property: compute positions * theta in float64.",
                            variant(_relative, angles=torch.float32))],
          hint="Rotating q to position m and k to position n must give a score rope(q, m) . rope(k, n) that depends "
               "on n - m only, and keep the vectors' lengths: each pair turns by an exact rotation, with angles "
               "computed in float64."),
    Check(name="rope_errors", guard=True, cases=_error_cases, expected=_oracle,
          hint="Raise ValueError when x's last axis (d_head) is odd, or when positions is not of shape (seq,) "
               "with seq = x.shape[-2]."),
)
