"""Checks for chapter 3: the sinusoidal table, the offset matrix, the module.

Oracles, none of them the course's reference:

* hand-computed tables, written out below from the formula (PE(0) is
  [0, 1, 0, 1, ...], PE(1, 0) = sin 1, and with d_model = 4 the second pair
  turns at 1 / sqrt(N) per position);
* `pe_rows`, an independent numpy float64 evaluation of the formula;
* for the offset matrix, both its explicit 2 x 2 blocks and the identity
  PE(pos + k) = PE(pos) @ M_k evaluated with `pe_rows`' own table;
* for the module, forward(x) - pe[:seq_len] must give x back (with the module's
  own buffer, so that a wrong table is not charged twice), and the buffer's
  first rows are compared with `pe_rows`.

The mistakes reproduce the usual wrong tables (sin and cos swapped, exponent
i/d, dimension index in the exponent, pos and i swapped, sines then cosines),
the transposed (column-convention) rotation and the seq-first broadcast.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch

from .framework import Case, Check, Mistake, Raises, randn, register

N = 10000.0
ODD = "d_model must be even: each sine needs its cosine partner"


def _value_error(why: str) -> Raises:
    return Raises(("ValueError",), why)


# --------------------------------------------------------------- oracles ---

def _angles(positions: np.ndarray, d: int, base: float, exponent: str = "2i/d") -> np.ndarray:
    """(len(positions), d/2) angles pos / base**(...) in float64.

    exponent: '2i/d' (right), 'i/d' (pair index, factor 2 lost), '4i/d'
    (dimension index 2i used where the formula has i).
    """
    pos = np.asarray(positions, dtype=np.float64)[:, None]
    pair = np.arange(d // 2, dtype=np.float64)[None, :]
    power = {"2i/d": 2.0 * pair / d, "i/d": pair / d, "4i/d": 4.0 * pair / d}[exponent]
    return pos / np.power(float(base), power)


def _interleave(sines: np.ndarray, cosines: np.ndarray) -> np.ndarray:
    out = np.empty((sines.shape[0], 2 * sines.shape[1]), dtype=np.float64)
    out[:, 0::2], out[:, 1::2] = sines, cosines
    return out


def pe_rows(positions: Any, d: int, base: float = N) -> np.ndarray:
    """PE(pos) for every pos in `positions` (any integers, negative too): float64 (len, d)."""
    a = _angles(positions, d, base)
    return _interleave(np.sin(a), np.cos(a))


def pe_table(n: int, d: int, base: float = N) -> np.ndarray:
    """The (n, d) sinusoidal table in float64."""
    return pe_rows(np.arange(n), d, base)


# Variants of the table: the usual wrong formulas.
def _swapped(n: int, d: int, base: float) -> np.ndarray:
    a = _angles(np.arange(n), d, base)
    return _interleave(np.cos(a), np.sin(a))


def _exponent(kind: str) -> Callable[[int, int, float], np.ndarray]:
    def table(n: int, d: int, base: float) -> np.ndarray:
        a = _angles(np.arange(n), d, base, kind)
        return _interleave(np.sin(a), np.cos(a))
    return table


def _per_dimension(n: int, d: int, base: float) -> np.ndarray:
    """Dimension j uses pos / base**(j/d): sine and cosine of a pair get different frequencies."""
    pos = np.arange(n, dtype=np.float64)[:, None]
    j = np.arange(d, dtype=np.float64)[None, :]
    a = pos / np.power(float(base), j / d)
    return np.where(j.astype(int) % 2 == 0, np.sin(a), np.cos(a))


def _pos_i_swapped(n: int, d: int, base: float) -> np.ndarray:
    """angle = i / base**(2 pos / d): the roles of position and pair index exchanged."""
    pos = np.arange(n, dtype=np.float64)[:, None]
    pair = np.arange(d // 2, dtype=np.float64)[None, :]
    with np.errstate(over="ignore"):
        a = pair / np.power(float(base), 2.0 * pos / d)
    return _interleave(np.sin(a), np.cos(a))


def _concatenated(n: int, d: int, base: float) -> np.ndarray:
    a = _angles(np.arange(n), d, base)
    return np.concatenate([np.sin(a), np.cos(a)], axis=1)


def _transposed(n: int, d: int, base: float) -> np.ndarray:
    return pe_table(n, d, base).T


def _table_args(case: Case) -> tuple[int, int, float]:
    n, d = case.args[:2]
    base = case.args[2] if len(case.args) > 2 else case.kwargs.get("base", N)
    return int(n), int(d), float(base)


def _table_mistake(hint: str, table: Callable[[int, int, float], np.ndarray],
                   rows: Callable[[Case], Any] | None = None) -> Mistake:
    def output(case: Case) -> np.ndarray:
        n, d, base = _table_args(case)
        full = table(n, d, base)
        return full if rows is None else full[rows(case)]
    return Mistake(hint, output)


def _table_mistakes(rows: Callable[[Case], Any] | None = None) -> list[Mistake]:
    m = [
        _table_mistake("Did you swap sin and cos? Even dimensions 0, 2, 4, ... hold sines and odd ones "
                       "cosines, so PE(0) = [0, 1, 0, 1, ...].", _swapped, rows),
        _table_mistake("Did you use the exponent i/d? With i the pair index (dimensions 2i and 2i+1), the "
                       "angle is pos / N^(2i/d_model): the last pair turns at about 1/N per position, "
                       "not 1/sqrt(N).", _exponent("i/d"), rows),
        _table_mistake("Did you put the dimension index where the formula has the pair index? With "
                       "i = 0, 2, 4, ... (e.g. torch.arange(0, d_model, 2)) the exponent must be i/d_model, "
                       "not 2i/d_model.", _exponent("4i/d"), rows),
        _table_mistake("The sine and the cosine of one pair must share one frequency, 1/N^(2i/d_model) for "
                       "both dimensions 2i and 2i+1. Did you use the dimension index j in each exponent "
                       "(j/d_model)?", _per_dimension, rows),
        _table_mistake("Did you swap pos and i? The angle is pos / N^(2i/d_model): the position is divided "
                       "by the power, and the pair index i sits in the exponent.", _pos_i_swapped, rows),
        _table_mistake("Did you put all sines first and all cosines after (torch.cat)? Here they "
                       "interleave: dimension 2i is a sine, dimension 2i+1 its cosine.", _concatenated, rows),
    ]
    if rows is None:
        m.append(_table_mistake("Rows are positions: the table has shape (seq_len, d_model). Did you "
                                "build it transposed?", _transposed))
    return m


# ---------------------------------------------- 3.1 sinusoidal_encoding ---

_S1, _C1 = math.sin(1.0), math.cos(1.0)
_HAND = {  # (seq_len, d_model, base) -> the table, worked out by hand from the formula
    (2, 4, N): [[0, 1, 0, 1], [_S1, _C1, math.sin(0.01), math.cos(0.01)]],          # N^(2/4) = 100
    (3, 2, N): [[0, 1], [_S1, _C1], [math.sin(2.0), math.cos(2.0)]],                 # one pair, frequency 1
    (2, 4, 100.0): [[0, 1, 0, 1], [_S1, _C1, math.sin(0.1), math.cos(0.1)]],         # 100^(2/4) = 10
    (2, 6, 1e6): [[0, 1, 0, 1, 0, 1],                                                # 1e6^(2/6) = 100
                  [_S1, _C1, math.sin(0.01), math.cos(0.01), math.sin(1e-4), math.cos(1e-4)]],
    (1, 8, N): [[0, 1, 0, 1, 0, 1, 0, 1]],                                           # PE(0)
}


def _hand_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    keys = [(2, 4, N), (3, 2, N)] if not hidden else [(2, 4, 100.0), (2, 6, 1e6), (1, 8, N), (3, 2, N)]
    cases = []
    for n, d, base in keys:
        if base == N:
            cases.append(Case(f"seq_len={n}, d_model={d} (default base)", (n, d)))
        else:
            cases.append(Case(f"seq_len={n}, d_model={d}, base={base:g}", (n, d), {"base": base}))
    return cases


def _hand_expected(case: Case) -> np.ndarray:
    return np.array(_HAND[_table_args(case)], dtype=np.float64)


def _formula_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        specs = [(6, 8, None), (5, 4, 100.0)]
    else:
        specs = [(50, 16, None), (33, 10, None), (1, 6, None), (7, 2, None), (128, 64, 500.0),
                 (40, 512, None), (9, 6, 1e6), (int(rng.integers(60, 200)), 2 * int(rng.integers(3, 40)), None)]
    cases = []
    for n, d, base in specs:
        if base is None:
            cases.append(Case(f"seq_len={n}, d_model={d} (default base)", (n, d)))
        else:
            cases.append(Case(f"seq_len={n}, d_model={d}, base={base:g}", (n, d, base)))
    return cases


_LONG_ROWS = (0, 1, 2, 3, 2047, 2049, 4097, 5001, 7777)


def _long_rows(case: Case) -> list[int]:
    n = int(case.args[0])
    return list(_LONG_ROWS) + list(range(n - 12, n))


def _long_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(10000, 64, None)] if not hidden else \
            [(20000, 128, None), (12345, 32, None), (10001, 16, 50000.0), (16384, 256, None)]
    cases = []
    for n, d, base in specs:
        extra = "" if base is None else f", base={base:g}"
        args = (n, d) if base is None else (n, d, base)
        cases.append(Case(f"seq_len={n}, d_model={d}{extra} (rows near position {n - 1} compared)", args))
    return cases


def _long_call(f: Callable, case: Case) -> Any:
    out = f(*case.args, **case.kwargs)
    return out[_long_rows(case)]


def _odd_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(4, 5), (3, 7)] if not hidden else [(1, 1), (10, 9), (6, 3), (2, 513)]
    return [Case(f"seq_len={n}, odd d_model={d}", (n, d)) for n, d in specs]


register(
    Check(
        name="sinusoidal_encoding_hand",
        cases=_hand_cases,
        expected=_hand_expected,
        mistakes=_table_mistakes(),
        hint="Work out the small table by hand: PE(0) = [0, 1, 0, 1, ...], PE(1, 0) = sin(1), "
             "PE(1, 1) = cos(1), and pair i turns at 1 / N^(2i/d_model) radians per position. (Errors "
             "around 1e-4 mean low precision: compute in float64, not float16.)",
    ),
    Check(
        name="sinusoidal_encoding",
        cases=_formula_cases,
        expected=lambda c: pe_table(*_table_args(c)).astype(np.float32),
        mistakes=_table_mistakes(),
        hint="PE(pos, 2i) = sin(pos / N^(2i/d_model)) and PE(pos, 2i+1) = cos(pos / N^(2i/d_model)); "
             "compute in float64 and return a float32 tensor of shape (seq_len, d_model).",
        exact_dtype=True,
    ),
    Check(
        name="sinusoidal_encoding_long",
        cases=_long_cases,
        expected=lambda c: pe_table(*_table_args(c))[_long_rows(c)],
        call=_long_call,
        mistakes=_table_mistakes(rows=_long_rows),
        hint="Rows near position 10^4 are off by more than 1e-5. If your short tables pass, this is "
             "floating-point precision: an angle near 10^4 stored in float32 (or float16) is wrong by "
             "up to ~5e-4 radians, and so are its sine and cosine. Build positions and angles in "
             "float64 (torch.float64) and cast only the finished table to float32.",
        rtol=0.0,
        atol=1e-5,
    ),
    Check(
        name="sinusoidal_encoding_odd",
        cases=_odd_cases,
        expected=lambda c: _value_error(ODD),
        hint="An odd d_model would leave the last sine without its cosine: check d_model first and "
             "raise ValueError (saying d_model must be even) before building anything.",
    ),
)


# ---------------------------------------------------- 3.2 offset_matrix ---

def _offset_np(k: int, d: int, base: float = N, *, exponent: str = "2i/d",
               transposed: bool = False) -> np.ndarray:
    """Block-diagonal M_k in float64 with PE(pos + k) = PE(pos) @ M_k (row vectors)."""
    theta = _angles([k], d, base, exponent)[0]
    m = np.zeros((d, d), dtype=np.float64)
    for i, t in enumerate(theta):
        c, s = math.cos(t), math.sin(t)
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, -s], [s, c]]
    return m.T if transposed else m


def _offset_args(case: Case) -> tuple[int, int, float]:
    k, d = case.args[:2]
    base = case.args[2] if len(case.args) > 2 else case.kwargs.get("base", N)
    return int(k), int(d), float(base)


def _offset_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(1, 4, None), (3, 6, 100.0)] if not hidden else \
            [(-3, 8, None), (0, 6, None), (7, 16, 100.0), (1000, 32, None), (5, 2, None), (-250, 64, None),
             (int(rng.integers(-40, -10)), 12, 1000.0), (2, 5, None)]
    cases = []
    for k, d, base in specs:
        extra = "" if base is None else f", base={base:g}"
        odd = " (odd d_model)" if d % 2 else ""
        args = (k, d) if base is None else (k, d, base)
        cases.append(Case(f"k={k}, d_model={d}{extra}{odd}", args))
    return cases


def _offset_expected(case: Case) -> Any:
    k, d, base = _offset_args(case)
    if d % 2:
        return _value_error(ODD)
    return _offset_np(k, d, base).astype(np.float32)


def _shift_positions(case: Case) -> np.ndarray:
    k = _offset_args(case)[0]
    return max(0, -k) + np.array([0, 1, 2, 5, 17, 100, 333, 2024])


def _shift_call(f: Callable, case: Case) -> Any:
    """PE(pos) @ M_k for several pos, with the oracle's own float64 table."""
    k, d, base = _offset_args(case)
    m = np.asarray(torch.as_tensor(f(*case.args, **case.kwargs)).detach().cpu().double())
    return pe_rows(_shift_positions(case), d, base) @ m


def _shift_mistake(hint: str, matrix: Callable[[int, int, float], np.ndarray]) -> Mistake:
    def output(case: Case) -> np.ndarray:
        k, d, base = _offset_args(case)
        return pe_rows(_shift_positions(case), d, base) @ matrix(k, d, base)
    return Mistake(hint, output)


_TRANSPOSED_HINT = ("Your matrix moves PE(pos) to PE(pos - k): it is M_(-k), the transpose of M_k. If only "
                    "negative k fail, you dropped the sign of k (sin(-t) = -sin t). Otherwise check the row "
                    "convention: PE(pos + k) = PE(pos) @ M_k, so each 2x2 block is "
                    "[[cos t, -sin t], [sin t, cos t]] with t = k / N^(2i/d_model) (row 0: what the sine "
                    "contributes, row 1: what the cosine contributes).")
_EXPONENT_HINT = ("Did you use the exponent i/d? Pair i (dimensions 2i, 2i+1) turns by "
                  "k / N^(2i/d_model) radians: the same frequencies as the table.")
_ONE_FREQ_HINT = ("Every pair turns by its own angle k / N^(2i/d_model), not by k radians: did you "
                  "forget the frequency?")


def _one_frequency(k: int, d: int, base: float) -> np.ndarray:
    return _offset_np(k, d, 1.0)  # base 1: every pair turns by k radians


register(
    Check(
        name="offset_matrix",
        cases=_offset_cases,
        expected=_offset_expected,
        mistakes=[
            Mistake(_TRANSPOSED_HINT, lambda c: _offset_np(*_offset_args(c), transposed=True)),
            Mistake(_EXPONENT_HINT, lambda c: _offset_np(*_offset_args(c), exponent="i/d")),
            Mistake(_ONE_FREQ_HINT, lambda c: _one_frequency(*_offset_args(c))),
        ],
        hint="M_k is block diagonal: block i sits at rows and columns 2i, 2i+1 and equals "
             "[[cos t, -sin t], [sin t, cos t]] with t = k / N^(2i/d_model); return float32, "
             "and raise ValueError for an odd d_model.",
        exact_dtype=True,
    ),
    Check(
        name="offset_matrix_shift",
        cases=lambda rng, hidden: [c for c in _offset_cases(rng, hidden) if c.args[1] % 2 == 0],
        expected=lambda c: pe_rows(_shift_positions(c) + _offset_args(c)[0], *_offset_args(c)[1:]),
        call=_shift_call,
        mistakes=[
            _shift_mistake(_TRANSPOSED_HINT, lambda k, d, b: _offset_np(k, d, b, transposed=True)),
            _shift_mistake(_EXPONENT_HINT, lambda k, d, b: _offset_np(k, d, b, exponent="i/d")),
            _shift_mistake(_ONE_FREQ_HINT, _one_frequency),
        ],
        hint="Multiplying the row PE(pos) by your matrix must give the row PE(pos + k), for every pos.",
    ),
)


# ----------------------------------------------- 3.3 PositionalEncoding ---

def _module_kwargs(max_len: int | None, base: float | None) -> dict:
    kw: dict = {}
    if max_len is not None:
        kw["max_len"] = max_len
    if base is not None:
        kw["base"] = base
    return kw


def _module_case(rng: np.random.Generator, batch: int, seq: int, d: int, max_len: int | None,
                 base: float | None = None, scale: float = 1.0) -> Case:
    x = randn(rng, batch, seq, d) * scale
    parts = [f"x of shape ({batch}, {seq}, {d})", f"max_len={max_len}" if max_len else "default max_len"]
    if base is not None:
        parts.append(f"base={base:g}")
    if scale != 1.0:
        parts.append(f"entries of size ~{scale:g}")
    return Case(", ".join(parts), (d, x), _module_kwargs(max_len, base))


# The forward checks compare forward(x) - pe[:seq_len] with x, using the module's own
# buffer: a wrong table costs points in exercise 3.1 and in the buffer check below,
# not again in every forward case.
_OUT = "output shape"
_DIFF = "forward(x) - pe[:seq_len]"


def _forward_call(cls: Callable, case: Case) -> Any:
    d, x = case.args
    module = cls(d, **case.kwargs)
    out = module(x)
    if tuple(out.shape) != tuple(x.shape):
        return {_OUT: list(out.shape), _DIFF: None}
    return {_OUT: list(out.shape), _DIFF: out.double() - module.pe[: x.shape[1]].double()}


def _forward_result(case: Case, diff: np.ndarray) -> dict:
    return {_OUT: list(case.args[1].shape), _DIFF: diff}


def _pe_for(case: Case, n: int) -> np.ndarray:
    return pe_table(n, case.args[0], case.kwargs.get("base", N))


def _forward_expected(case: Case) -> Any:
    d, x = case.args
    max_len = case.kwargs.get("max_len", 5000)
    seq = x.shape[1]
    if seq > max_len:
        return _value_error(f"a sequence of {seq} positions is longer than max_len = {max_len}")
    return _forward_result(case, x.double().numpy())


def _forward_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        return [_module_case(rng, 2, 5, 8, 16), _module_case(rng, 1, 3, 4, None)]
    return [_module_case(rng, 3, 7, 16, 50, 100.0), _module_case(rng, 4, 1, 8, 10),
            _module_case(rng, 2, 9, 12, None), _module_case(rng, 3, 3, 6, 3),
            _module_case(rng, 5, 11, 4, 20, scale=1000.0), _module_case(rng, 1, 17, 10, 40, 1e5)]


def _seq_first(case: Case) -> dict:
    """The seq-first recipe (pe[:x.size(0)].unsqueeze(1)) on a batch-first x: PE(b) added to sequence b."""
    x = case.args[1].double().numpy()
    batch, seq = x.shape[:2]
    return _forward_result(case, x + _pe_for(case, batch)[:, None, :] - _pe_for(case, seq))


def _scaled(case: Case) -> dict:
    return _forward_result(case, case.args[1].double().numpy() * math.sqrt(case.args[0]))


def _pe_only(case: Case) -> dict:
    return _forward_result(case, np.zeros(tuple(case.args[1].shape)))


def _not_added(case: Case) -> dict:
    x = case.args[1].double().numpy()
    return _forward_result(case, x - _pe_for(case, x.shape[1]))


def _off_by_one(case: Case) -> Any:
    """`seq_len >= max_len` instead of `>`: a sequence of exactly max_len tokens is refused."""
    d, x = case.args
    if x.shape[1] >= case.kwargs.get("max_len", 5000):
        raise ValueError("refused a sequence of exactly max_len tokens")
    return _forward_expected(case)


_FORWARD_MISTAKES = [
    Mistake("Off by one: a sequence of exactly max_len positions fits (positions 0 to max_len - 1); "
            "raise only when seq_len > max_len.", _off_by_one),
    Mistake("Did you take the length from x.size(0)? Here tensors are batch-first, (batch, seq, d_model): "
            "the length is x.size(1), and PE[:seq] (shape (seq, d_model)) broadcasts over the batch. The "
            "pe[:x.size(0)].unsqueeze(1) recipe is for seq-first inputs.", _seq_first),
    Mistake("Did you scale x by sqrt(d_model)? That scaling belongs to the embedding (chapter 2); this "
            "module only adds the table.", _scaled),
    Mistake("Did you return the table instead of x + table?", _pe_only),
    Mistake("Did you forget to add the table? The output equals the input.", _not_added),
]


def _too_long_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        return [_module_case(rng, 1, 9, 8, 8), _module_case(rng, 2, 8, 8, 8)]
    return [_module_case(rng, 1, 2, 4, 1), _module_case(rng, 2, 64, 6, 50), _module_case(rng, 3, 12, 4, 12),
            _module_case(rng, 1, 3, 2, 3), _module_case(rng, 2, 5001, 2, None)]


def _buffer_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(8, 16, None)] if not hidden else [(6, None, None), (4, 7, 100.0), (10, 1, None)]
    return [Case(f"d_model={d}, " + (f"max_len={m}" if m else "default max_len")
                 + ("" if b is None else f", base={b:g}"), (d,), _module_kwargs(m, b)) for d, m, b in specs]


def _buffer_call(cls: Callable, case: Case) -> dict:
    module = cls(*case.args, **case.kwargs)
    buffers = dict(module.named_buffers())
    pe = buffers.get("pe")
    return {"buffer names": sorted(buffers),
            "trainable parameters": int(sum(p.numel() for p in module.parameters())),
            "shape of pe": list(pe.shape) if pe is not None else None,
            "first rows of pe": pe[:3] if pe is not None else None}


def _buffer_expected(case: Case) -> dict:
    d = case.args[0]
    max_len = case.kwargs.get("max_len", 5000)
    return {"buffer names": ["pe"], "trainable parameters": 0, "shape of pe": [max_len, d],
            "first rows of pe": pe_table(min(3, max_len), d, case.kwargs.get("base", N)).astype(np.float32)}


def _as_parameter(case: Case) -> dict:
    d = case.args[0]
    max_len = case.kwargs.get("max_len", 5000)
    return {"buffer names": [], "trainable parameters": max_len * d, "shape of pe": None, "first rows of pe": None}


def _as_attribute(case: Case) -> dict:
    return {"buffer names": [], "trainable parameters": 0, "shape of pe": None, "first rows of pe": None}


register(
    Check(
        name="positional_encoding",
        cases=_forward_cases,
        expected=_forward_expected,
        call=_forward_call,
        mistakes=_FORWARD_MISTAKES,
        hint="forward(x) returns x + pe[:seq_len] with seq_len = x.size(1), same shape as x: the "
             "(seq_len, d_model) slice broadcasts over the batch. (The test subtracts your module's own "
             "pe[:seq_len] from the output and expects x back.)",
    ),
    Check(
        name="positional_encoding_too_long",
        cases=_too_long_cases,
        expected=_forward_expected,
        call=_forward_call,
        mistakes=_FORWARD_MISTAKES,
        hint="Raise ValueError exactly when x.size(1) > max_len: a sequence of max_len tokens fits "
             "(positions 0 to max_len - 1), a longer one has no rows left in the table (and slicing "
             "pe[:seq_len] would silently return fewer rows).",
    ),
    Check(
        name="positional_encoding_buffer",
        cases=_buffer_cases,
        expected=_buffer_expected,
        call=_buffer_call,
        mistakes=[
            Mistake("Did you store the table as an nn.Parameter? The sinusoidal table is fixed, not learned: "
                    "register it with self.register_buffer('pe', table).", _as_parameter),
            Mistake("Did you store the table as a plain attribute (self.pe = ...)? Then module.to(device) "
                    "and module.state_dict() do not see it: use self.register_buffer('pe', table).",
                    _as_attribute),
        ],
        hint="Register the (max_len, d_model) float32 table as a buffer named 'pe' (no trainable parameters).",
        exact_dtype=True,
    ),
)
