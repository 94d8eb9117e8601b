"""Checks for chapter 3: the sinusoidal table, the offset matrix, the module.

Oracles, none of them the course's reference: small tables worked out by hand
(`_hand`: PE(0) is [0, 1, 0, 1, ...], PE(1, 0) = sin 1, and with a base whose
power base^(2/d_model) is a whole number r, PE(pos, 2i) = sin(pos / r^i), no
power of the base taken); `pe_rows`, an independent numpy
float64 evaluation of the formula, cast to float32 (the contract's dtype)
where a student's table is compared; for the offset matrix its explicit 2 x 2
blocks, and the identity PE(pos + k) = PE(pos) @ M_k on `pe_rows`' own table;
for the module, forward(x) - pe[:seq_len] must give x back, in training and in
eval mode alike (no dropout), with the module's own buffer (a wrong table is
not charged twice), and the buffer (named pe, float32, not a parameter) and its
first rows are compared with `pe_rows`. The kernel records the raw outputs (the
matrix itself, forward's output and the module's pe[:seq_len]); the products and
differences above are made by each probe's `observe`
(`course.probing.calls.positional_encoding`), the shift check's with the rows
PE(pos) that `pe_rows` computes here for positions drawn here, both in the case's `aid`. Mistakes
are these oracles with knobs: the usual wrong tables, the transposed (column-convention) rotation, the
seq-first broadcast, and the module's usual slips.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch

from course.probing.calls.positional_encoding import DIFF, DTYPE, OUT, PE_ROWS

from .framework import NOT_APPLICABLE, Case, Check, Mistake, register
from .kit import both_modes, drawn_until, even, raises, randn, unless, variant

N = 10000.0
POSITIONS = "positions"  # the shift cases' positions pos (in `aid`, with the rows PE(pos))
ODD = "d_model must be even: each sine needs its cosine partner"
_POWER = {"2i/d": 2.0, "i/d": 1.0, "4i/d": 4.0}  # the exponent's factor: pos / N^(factor * i / d)


def _args(case: Case) -> tuple[int, int, float]:
    """(seq_len or k, d_model, base) of a call f(n, d_model[, base])."""
    n, d = case.args[:2]
    base = case.args[2] if len(case.args) > 2 else case.kwargs.get("base", N)
    return int(n), int(d), float(base)


# ------------------------------------------------------------ the table ---

def pe_rows(positions: Any, d: int, base: float = N, *, exponent: str = "2i/d", swap: bool = False,
            concat: bool = False) -> np.ndarray:
    """PE(pos) for every pos in `positions` (any integers): float64 (len, d). The knobs are the usual wrong
    formulas: exponent 'i/d', '4i/d' (dimension index 2i for i), 'j/d' (every dimension its own exponent),
    'pos<->i'; `swap`: cosines in the even columns; `concat`: all sines, then all cosines."""
    pos = np.asarray(positions, dtype=np.float64)[:, None]
    if exponent == "j/d":
        j = np.arange(d)
        a = pos / np.power(float(base), j / d)
        return np.where(j % 2 == 0, np.sin(a), np.cos(a))
    pair = np.arange(d // 2, dtype=np.float64)[None, :]
    with np.errstate(over="ignore"):
        a = pair / np.power(float(base), 2.0 * pos / d) if exponent == "pos<->i" else \
            pos / np.power(float(base), _POWER[exponent] * pair / d)
    first, second = (np.cos(a), np.sin(a)) if swap else (np.sin(a), np.cos(a))
    if concat:
        return np.concatenate([first, second], axis=1)
    out = np.empty((pos.shape[0], d))
    out[:, 0::2], out[:, 1::2] = first, second
    return out


def _table(case: Case, transposed: bool = False, **knobs: Any) -> Any:
    """A case's float32 table; for long tables only the rows the check compares (meta['rows'])."""
    n, d, base = _args(case)
    rows = case.meta.get("rows")
    if transposed:
        return pe_rows(np.arange(n), d, base).T.astype(np.float32)
    return pe_rows(np.arange(n) if rows is None else rows, d, base, **knobs).astype(np.float32)


_TABLE_MISTAKES = [
    Mistake("Did you swap sin and cos? Even dimensions 0, 2, 4, ... hold sines and odd ones cosines, so "
            "PE(0) = [0, 1, 0, 1, ...].", variant(_table, swap=True)),
    Mistake("Did you use the exponent i/d? With i the pair index (dimensions 2i and 2i+1), the angle is "
            "pos / N^(2i/d_model): the last pair turns at about 1/N per position, not 1/sqrt(N).",
            variant(_table, exponent="i/d")),
    Mistake("Did you put the dimension index where the formula has the pair index? With i = 0, 2, 4, ... "
            "(e.g. torch.arange(0, d_model, 2)) the exponent must be i/d_model, not 2i/d_model.",
            variant(_table, exponent="4i/d")),
    Mistake("The sine and the cosine of one pair must share one frequency, 1/N^(2i/d_model) for both "
            "dimensions 2i and 2i+1. Did you use the dimension index j in each exponent (j/d_model)?",
            variant(_table, exponent="j/d")),
    Mistake("Did you swap pos and i? The angle is pos / N^(2i/d_model): the position is divided by the power, "
            "and the pair index i sits in the exponent.", variant(_table, exponent="pos<->i")),
    Mistake("Did you put all sines first and all cosines after (torch.cat)? That is the same table with its "
            "columns permuted, and some libraries use it, but this course's convention interleaves them: "
            "dimension 2i is a sine, dimension 2i+1 its cosine.", variant(_table, concat=True)),
]
_TRANSPOSED_TABLE = Mistake("Rows are positions: the table has shape (seq_len, d_model). Did you build it "
                            "transposed?", variant(_table, transposed=True))

# ---------------------------------------------- 3.1 sinusoidal_encoding ---

def _hand(case: Case) -> np.ndarray:
    """The small table worked out by hand: with r = base^(2/d_model) a whole number (the case's
    `aid`), pair i turns at 1 / r^i radians per position, so PE(pos, 2i) = sin(pos / r^i) and
    PE(pos, 2i+1) = cos(pos / r^i); no power of the base is taken."""
    n, d, _ = _args(case)
    r = case.aid["r = base^(2/d_model)"]
    return np.array([[(math.sin if j % 2 == 0 else math.cos)(pos / r ** (j // 2)) for j in range(d)]
                     for pos in range(n)], dtype=np.float32)


def _hand_case(n: int, d: int, r: int | None) -> Case:
    """f(n, d, base=r^(d/2)) (pair i turns at 1/r^i per position); r None: the default base, with d_model
    2 (one pair), 4 (r = 100) or 8 (r = 10), or a table of the single position 0."""
    if r is None:
        case = _table_case(n, d, None)
        case.aid = {"r = base^(2/d_model)": {2: 1, 4: 100, 8: 10}.get(d, 1) if n > 1 else 1}
        return case
    case = _table_case(n, d, float(r ** (d // 2)), keyword=True)
    case.aid = {"r = base^(2/d_model)": r}
    return case


def _table_case(n: int, d: int, base: float | None, *, keyword: bool = False, note: str = "", **meta: Any) -> Case:
    """f(n, d) with the default base, else f(n, d, base) (or base=... with `keyword`)."""
    if base is None or base == N:
        return Case(f"seq_len={n}, d_model={d} (default base){note}", (n, d), meta=meta)
    return Case(f"seq_len={n}, d_model={d}, base={base:g}{note}", (n, d) if keyword else (n, d, base),
                {"base": base} if keyword else {}, meta)


def _hand_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    def draw(low: int, high: int) -> int:  # an integer in [low, high]
        return int(rng.integers(low, high + 1))
    if not hidden:
        d = int(rng.choice([2, 4]))
        return [_hand_case(draw(2, 3), int(rng.choice([4, 8])), None), _hand_case(draw(2, 4), d, draw(2, 20))]
    return [_hand_case(draw(2, 3), 4, draw(2, 100)), _hand_case(draw(2, 3), 6, draw(2, 100)),
            _hand_case(1, 2 * draw(2, 5), None),       # PE(0) = [0, 1, 0, 1, ...]
            _hand_case(draw(2, 4), 2, None),           # one pair, frequency 1
            _hand_case(draw(2, 3), 8, None)]           # the default base, r = 10


def _formula_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    def draw(low: int, high: int) -> int:  # an integer in [low, high]
        return int(rng.integers(low, high + 1))
    specs = [(draw(4, 8), 2 * draw(3, 5), None), (draw(3, 7), 2 * draw(2, 3), float(draw(20, 500)))] \
        if not hidden else \
        [(draw(40, 60), 2 * draw(6, 10), None), (2 * draw(12, 20) + 1, 2 * draw(3, 6), None),  # an odd length
         (1, 2 * draw(2, 4), None),                                                            # one position
         (draw(5, 9), 2, None),                                                                # one pair
         (draw(100, 150), 64, float(draw(200, 999))), (draw(30, 50), 512, None),
         (draw(7, 11), 6, float(10 ** draw(5, 7))), (draw(60, 200), 2 * draw(3, 40), None)]
    return [_table_case(n, d, base) for n, d, base in specs]


def _long_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    def draw(low: int, high: int) -> int:  # an integer in [low, high]
        return int(rng.integers(low, high + 1))
    specs = [(draw(10000, 10500), 2 * draw(16, 32), None)] if not hidden else \
        [(draw(18000, 22000), 2 * draw(48, 80), None), (draw(12000, 13000), 2 * draw(12, 20), None),
         (draw(10001, 10100), 16, float(draw(20000, 80000))), (draw(16000, 17000), 256, None)]
    cases = []
    for n, d, base in specs:  # the first rows, some near powers of two, a few others, and the last 12
        middle = {2048 + draw(-3, 3), 4096 + draw(-3, 3), *rng.integers(4, n - 12, size=3).tolist()}
        rows = [0, 1, 2, 3, *sorted(middle), *range(n - 12, n)]
        cases.append(_table_case(n, d, base, note=f" (rows near position {n - 1} compared)", rows=rows))
    return cases


def _odd_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    def draw(low: int, high: int) -> int:  # an integer in [low, high]
        return int(rng.integers(low, high + 1))
    specs = [(draw(2, 6), 2 * draw(1, 4) + 1), (draw(2, 6), 2 * draw(2, 7) + 1)] if not hidden else \
        [(draw(1, 3), 1), (draw(5, 12), 2 * draw(3, 6) + 1), (draw(2, 8), 3), (draw(1, 4), 2 * draw(200, 300) + 1),
         (draw(1, 5), 0), (draw(1, 4), -2 * draw(1, 5))]
    return [Case(f"seq_len={n}, {'odd' if d % 2 else 'non-positive'} d_model={d}", (n, d)) for n, d in specs]


register(
    __name__,
    Check(name="sinusoidal_encoding_hand", cases=_hand_cases, mistakes=[*_TABLE_MISTAKES, _TRANSPOSED_TABLE],
          expected=_hand,
          hint="Work out the small table by hand: PE(0) = [0, 1, 0, 1, ...], PE(1, 0) = sin(1), PE(1, 1) = cos(1), "
               "and pair i turns at 1 / N^(2i/d_model) radians per position. (Errors around 1e-4 mean low "
               "precision: compute in float64, not float16.)"),
    Check(name="sinusoidal_encoding", cases=_formula_cases, expected=_table,
          mistakes=[*_TABLE_MISTAKES, _TRANSPOSED_TABLE],
          hint="PE(pos, 2i) = sin(pos / N^(2i/d_model)) and PE(pos, 2i+1) = cos(pos / N^(2i/d_model)); compute "
               "in float64 and return a float32 tensor of shape (seq_len, d_model)."),
    Check(name="sinusoidal_encoding_long", cases=_long_cases, expected=_table, mistakes=_TABLE_MISTAKES,
          rtol=0.0, atol=1e-5,
          hint="Rows near position 10^4 are off by more than 1e-5. If your short tables pass, this is "
               "floating-point precision: an angle near 10^4 stored in float32 (or float16) is wrong by up to "
               "~5e-4 radians, and so are its sine and cosine. Build positions and angles in float64 "
               "(torch.float64) and cast only the finished table to float32."),
    Check(name="sinusoidal_encoding_odd", guard=True, cases=_odd_cases,
          expected=lambda c: raises(ODD if c.args[1] % 2 else "d_model must be positive (and even)"),
          hint="An odd d_model would leave the last sine without its cosine (and d_model <= 0 leaves no table "
               "at all): check d_model first and raise ValueError (saying d_model must be even) before "
               "building anything."),
)


# ---------------------------------------------------- 3.2 offset_matrix ---

def _offset_np(k: int, d: int, base: float = N, *, exponent: str = "2i/d", transposed: bool = False,
               angles: type = np.float64) -> np.ndarray:
    """Block-diagonal M_k with PE(pos + k) = PE(pos) @ M_k (row vectors), in float64 (`angles`
    np.float32: the angles, cos and sin computed in float32, as a float32 answer computes them)."""
    pair = np.arange(d // 2, dtype=angles)
    theta = angles(k) / np.power(angles(base), angles(_POWER[exponent]) * pair / angles(d))
    theta = theta.astype(angles)
    even, m = 2 * np.arange(d // 2), np.zeros((d, d))
    m[even, even], m[even, even + 1], m[even + 1, even], m[even + 1, even + 1] = \
        np.cos(theta), -np.sin(theta), np.sin(theta), np.cos(theta)
    return m.T if transposed else m


#: what the offset checks' default tolerances (rtol 1e-4, atol 1e-5) allow an entry of size about 1
OFFSET_ATOL = 1.1e-4


def _float32_error(k: int, d: int, base: float | None) -> float:
    """How far float32 angles put M_k from the float64 one."""
    base = N if base is None else base
    return float(np.abs(_offset_np(k, d, base, angles=np.float32) - _offset_np(k, d, base)).max())


def _offset_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    """Offsets small enough that float32 angles stay well inside the tolerance (asserted): computing in
    float32 costs in `offset_matrix_far` only, on every draw."""
    def draw(low: int, high: int) -> int:  # an integer in [low, high]
        return int(rng.integers(low, high + 1))
    specs = [(draw(1, 4), 2 * draw(2, 4), None), (draw(2, 6), 2 * draw(3, 4), float(draw(20, 500)))] \
        if not hidden else \
        [(-draw(1, 5), 2 * draw(3, 6), None), (0, 2 * draw(2, 5), None), (draw(5, 11), 16, float(draw(50, 300))),
         (draw(50, 200), 32, None), (draw(2, 8), 2, None), (-draw(100, 200), 64, None),
         (-draw(11, 40), 12, float(draw(500, 5000))), (draw(1, 4), 2 * draw(1, 4) + 1, None)]
    assert all(d % 2 or _float32_error(k, d, base) < OFFSET_ATOL / 3 for k, d, base in specs)
    return _labelled(specs)


def _float32_shows(k: int, d: int, base: float | None) -> bool:
    """Whether float32 angles put M_k off by far more than the tolerance however they are computed: three
    pairs or more turn by 2^16 radians or more, where float32 steps are 8e-3 apart (so that any float32
    rounding of all three landing within the tolerance has odds of about 1e-6), and the float32 answer
    computed here is off by ten times the tolerance."""
    pair = np.arange(1, d // 2)
    big = np.abs(k) / np.power(N if base is None else base, 2 * pair / d) >= 2.0 ** 16
    return int(big.sum()) >= 3 and _float32_error(k, d, base) > 10 * OFFSET_ATOL


def _far_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    """Offsets so large that float32 angles put M_k off by far more than the tolerance, on every draw.
    The base is drawn with the offset: with a power of two (128, 256, 512) every angle k / base^(2i/d)
    is exact in float32, so no offset shows the clause, and the base is drawn again."""
    def far(d: int, base: Callable[[], float | None] = lambda: None) -> tuple[int, int, float | None]:
        k, b = drawn_until(lambda: (int(rng.integers(2_000_000, 10_000_001)) * int(rng.choice([-1, 1])), base()),
                           lambda kb: _float32_shows(kb[0], d, kb[1]), "float32 angles going wrong")
        return k, d, b
    return _labelled([far(even(rng, 8, 13))] if not hidden else
                     [far(32), far(even(rng, 8, 17)), far(16, lambda: float(rng.integers(100, 1000)))])


def _labelled(specs: list[tuple[int, int, float | None]]) -> list[Case]:
    cases = []
    for k, d, base in specs:
        extra = ("" if base is None else f", base={base:g}") + (" (odd d_model)" if d % 2 else "")
        cases.append(Case(f"k={k}, d_model={d}{extra}", (k, d) if base is None else (k, d, base)))
    return cases


def _matrix(case: Case, one_frequency: bool = False, **knobs: Any) -> Any:
    """M_k as float32; knobs: exponent, transposed, and one_frequency (base 1: every pair turns by k)."""
    k, d, base = _args(case)
    return raises(ODD) if d % 2 else _offset_np(k, d, 1.0 if one_frequency else base, **knobs).astype(np.float32)


def _shifted(case: Case, one_frequency: bool = False, **knobs: Any) -> np.ndarray:
    """PE(pos + k) for the case's positions; with knobs, PE(pos) @ (that wrong M_k)."""
    k, d, base = _args(case)
    pos = case.aid[POSITIONS]
    if not knobs and not one_frequency:
        return pe_rows(pos + k, d, base)
    return pe_rows(pos, d, base) @ _offset_np(k, d, 1.0 if one_frequency else base, **knobs)


def _shift_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    """The offset cases of even d_model, each with positions drawn here and the oracle's float64 rows
    PE(pos) for them in its `aid` (the observe multiplies them by the student's matrix)."""
    cases = [c for c in _offset_cases(rng, hidden) if c.args[1] % 2 == 0]
    for c in cases:
        k, d, base = _args(c)
        positions = max(0, -k) + np.concatenate([[0, 1], np.sort(rng.choice(np.arange(2, 3000), 6, replace=False))])
        c.aid = {POSITIONS: positions, PE_ROWS: pe_rows(positions, d, base)}
    return cases


def _offset_mistakes(oracle: Callable) -> list[Mistake]:
    return [
        Mistake("Your matrix moves PE(pos) to PE(pos - k): it is M_(-k), the transpose of M_k. If only negative "
                "k fail, you dropped the sign of k (sin(-t) = -sin t). Otherwise check the row convention: "
                "PE(pos + k) = PE(pos) @ M_k, so each 2x2 block is [[cos t, -sin t], [sin t, cos t]] with "
                "t = k / N^(2i/d_model) (row 0: what the sine contributes, row 1: what the cosine contributes).",
                variant(oracle, transposed=True)),
        Mistake("Did you use the exponent i/d? Pair i (dimensions 2i, 2i+1) turns by k / N^(2i/d_model) "
                "radians: the same frequencies as the table.", variant(oracle, exponent="i/d")),
        Mistake("Every pair turns by its own angle k / N^(2i/d_model), not by k radians: did you forget the "
                "frequency?", variant(oracle, one_frequency=True)),
    ]


register(
    __name__,
    Check(name="offset_matrix", cases=_offset_cases, expected=_matrix, mistakes=_offset_mistakes(_matrix),
          hint="M_k is block diagonal: block i sits at rows and columns 2i, 2i+1 and equals [[cos t, -sin t], "
               "[sin t, cos t]] with t = k / N^(2i/d_model); return float32, and raise ValueError for an odd "
               "d_model."),
    Check(name="offset_matrix_shift", cases=_shift_cases, expected=_shifted, mistakes=_offset_mistakes(_shifted),
          hint="Multiplying the row PE(pos) by your matrix must give the row PE(pos + k), for every pos."),
    Check(name="offset_matrix_far", cases=_far_cases, expected=_matrix, mistakes=_offset_mistakes(_matrix),
          hint="Far offsets (|k| in the millions) are off by more than the tolerance. If the near ones "
               "pass, did you compute the angles in float32? t = k / N^(2i/d_model) runs to millions of "
               "radians, where float32 angles are off by 1e-2 and more, and so are their cosines and sines: compute "
               "in float64 and cast only the finished matrix to float32."),
)


# ----------------------------------------------- 3.3 PositionalEncoding ---
# Case.args: what forward() is called with (x); meta: the constructor's arguments (d_model, and the
# keyword arguments max_len and base where a case sets them).

def _module_case(d: int, max_len: int | None, base: float | None = None, x: torch.Tensor | None = None,
                 scale: float = 1.0) -> Case:
    """PositionalEncoding(d, [max_len=...], [base=...]), then forward(x) where x is given."""
    config = {name: v for name, v in (("max_len", max_len), ("base", base)) if v is not None}
    parts = [f"x of shape {tuple(x.shape)}" if x is not None else f"d_model={d}",
             f"max_len={max_len}" if max_len else "default max_len"]
    parts += [f"base={base:g}"] if base is not None else []
    parts += [f"entries of size ~{scale:g}"] if scale != 1 else []
    return Case(", ".join(parts), () if x is None else (x * scale,), meta={"d_model": d, "config": config})


def _x_cases(visible: list, hidden: list) -> Callable[[np.random.Generator, bool], list[Case]]:
    """Cases from specs (batch, seq, d_model, max_len[, base[, scale]]): x drawn from the case's rng."""
    def one(rng: np.random.Generator, b: int, n: int, d: int, m: int | None, base: float | None = None,
            scale: float = 1.0) -> Case:
        return _module_case(d, m, base, randn(rng, b, n, d), scale)
    return lambda rng, is_hidden: [one(rng, *spec) for spec in (hidden if is_hidden else visible)]


_forward_cases = _x_cases([(2, 5, 8, 16), (1, 3, 4, None)],
                          [(3, 7, 16, 50, 100.0), (4, 1, 8, 10), (2, 9, 12, None), (3, 3, 6, 3),
                           (5, 11, 4, 20, None, 1000.0), (1, 17, 10, 40, 1e5)])
_too_long_cases = _x_cases([(1, 9, 8, 8), (2, 8, 8, 8)],
                           [(1, 2, 4, 1), (2, 64, 6, 50), (3, 12, 4, 12), (1, 3, 2, 3), (2, 5001, 2, None)])


def _forward(case: Case, mistake: str = "") -> Any:
    """x back, in both modes; or the ValueError of a too-long x. `mistake` names a wrong forward."""
    (x,), d, config = case.args, case.meta["d_model"], case.meta["config"]
    max_len, base = config.get("max_len", 5000), config.get("base", N)
    batch, seq = x.shape[:2]
    if seq > max_len:
        return NOT_APPLICABLE if mistake else raises(f"a sequence of {seq} positions is longer than "
                                                     f"max_len = {max_len}")
    if mistake == "off by one":  # `seq_len >= max_len`: a sequence of exactly max_len tokens refused
        if seq < max_len:
            return NOT_APPLICABLE
        raise ValueError("refused a sequence of exactly max_len tokens")
    x, pe = x.double().numpy(), pe_rows(np.arange(seq), d, base)
    diff = {"": x, "scaled": x * math.sqrt(d), "table only": np.zeros_like(x), "not added": x - pe,
            "seq first": x + pe_rows(np.arange(batch), d, base)[:, None, :] - pe}[mistake]
    return both_modes({OUT: list(x.shape), DTYPE: "float32", DIFF: diff})


_FORWARD = dict(
    expected=_forward,
    mistakes=[
        Mistake("Off by one: a sequence of exactly max_len positions fits (positions 0 to max_len - 1); "
                "raise only when seq_len > max_len.", variant(_forward, mistake="off by one")),
        Mistake("Did you take the length from x.size(0)? Here tensors are batch-first, (batch, seq, d_model): "
                "the length is x.size(1), and PE[:seq] (shape (seq, d_model)) broadcasts over the batch. The "
                "pe[:x.size(0)].unsqueeze(1) recipe is for seq-first inputs.",
                variant(_forward, mistake="seq first")),
        Mistake("Did you scale x by sqrt(d_model)? That scaling belongs to the embedding (chapter 2); this module "
                "only adds the table.", variant(_forward, mistake="scaled")),
        Mistake("Did you return the table instead of x + table?", variant(_forward, mistake="table only")),
        Mistake("Did you forget to add the table? The output equals the input.",
                variant(_forward, mistake="not added")),
    ],
)


def _buffer_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    def draw(low: int, high: int) -> int:  # an integer in [low, high]
        return int(rng.integers(low, high + 1))
    # two visible modules of different widths: no one fixed answer fits both
    d = 2 * draw(2, 6)
    specs = [(d, draw(8, 32), None), (d + 2 * draw(1, 3), draw(8, 32), None)] if not hidden else \
        [(2 * draw(2, 5), None, None), (2 * draw(2, 4), draw(3, 12), float(draw(20, 500))), (2 * draw(3, 7), 1, None)]
    # the base case has two pairs at least: pair 0 turns by pos whatever the base
    return [_module_case(d, m, b) for d, m, b in specs]


def _buffers(case: Case, kind: str = "buffer", dtype: str = "float32", ignore_base: bool = False) -> dict:
    """The expected report; `kind` 'parameter' or 'attribute', `dtype` and `ignore_base` are the usual slips."""
    d, config = case.meta["d_model"], case.meta["config"]
    max_len = config.get("max_len", 5000)
    table = {"pe": ((max_len, d), dtype)}
    base = N if ignore_base else config.get("base", N)
    return {"buffers (name: shape, dtype)": table if kind == "buffer" else {},
            "parameters (name: shape, dtype)": table if kind == "parameter" else {},
            "first rows of pe": pe_rows(np.arange(min(3, max_len)), d, base).astype(dtype)}


def _base_given(case: Case) -> bool:
    return "base" in case.meta["config"]


register(
    __name__,
    Check(name="positional_encoding", cases=_forward_cases, **_FORWARD,
          hint="forward(x) returns x + pe[:seq_len] with seq_len = x.size(1), a new tensor of the same shape and "
               "dtype as x: the (seq_len, d_model) slice broadcasts over the batch; the module has no dropout, so "
               "training and eval mode give the same result. (The test subtracts your module's own pe[:seq_len] "
               "from the output and expects x back.)"),
    Check(name="positional_encoding_too_long", guard=True, cases=_too_long_cases, **_FORWARD,
          hint="Raise ValueError exactly when x.size(1) > max_len: a sequence of max_len tokens fits (positions 0 "
               "to max_len - 1), a longer one has no rows left in the table (and slicing pe[:seq_len] would "
               "silently return fewer rows)."),
    Check(name="positional_encoding_buffer", guard=True, expected=_buffers,
          cases=_buffer_cases,
          mistakes=[
              Mistake("Did you store the table as an nn.Parameter? The sinusoidal table is fixed, not learned: "
                      "register it with self.register_buffer('pe', table).", variant(_buffers, kind="parameter")),
              Mistake("Did you store the table as a plain attribute (self.pe = ...)? Then module.to(device) and "
                      "module.state_dict() do not see it: use self.register_buffer('pe', table).",
                      variant(_buffers, kind="attribute")),
              Mistake("Did you store the table in float64? The buffer is float32, like the rest of the model: "
                      "the table your sinusoidal_encoding returns.", variant(_buffers, dtype="float64")),
              Mistake("Did you pass base on to sinusoidal_encoding? The table of a PositionalEncoding(d_model, "
                      "max_len, base) uses that base.", unless(_base_given, variant(_buffers, ignore_base=True))),
          ],
          hint="Register the (max_len, d_model) float32 table as a buffer named 'pe' (no trainable parameters)."),
)
