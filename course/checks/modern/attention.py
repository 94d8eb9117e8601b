"""11.3 `GroupedQueryAttention` with a KV cache: one call (with or without a cache given), a prefill
then steps, a new module's parameters, the constructor's errors.

Oracle (`gqa_step`): PyTorch's ``F.scaled_dot_product_attention(..., enable_gqa=True)`` in float64
with the case's weights, queries and keys turned by complex multiplication (`rotate`, the rotation
written independently of the chapter's real-valued formula), the mask a boolean (n, t + n) lower
triangle shifted by the t cached positions. Mistakes are `gqa_step` with knobs; a prefill and its
steps are chained through the cache each (wrong) step returns, as the student's code would be.
The block and the model (`.model`) reuse `rotate` and `gqa_step`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from course.probing.calls.modern.attention import CALLS, GIVEN, RETURNED
from course.probing.kit import COUNT, PARAMS

from .. import kit
from ..framework import Case, Check, Mistake, register
from ..kit import randn, variant
from .rope import rotate

Cache = tuple[torch.Tensor, torch.Tensor] | None


# ------------------------------------------------------------- the oracle ---

def _heads(x: torch.Tensor, h: int) -> torch.Tensor:
    """(b, n, h * d) -> (b, h, n, d)."""
    b, n, _ = x.shape
    return x.reshape(b, n, h, -1).transpose(1, 2)


def gqa_step(w: dict[str, torch.Tensor], x: torch.Tensor, cache: Cache, h: int, g: int, base: float, *,
             rotate_v: bool = False, positions: str = "offset", repeat: str = "interleave", mask: str = "causal",
             cached_keys: str = "rotated", returns: str = "old then new",
             scale: str = "d_head") -> tuple[torch.Tensor, Cache]:
    """One call of grouped-query attention in float64: (out (b, n, d_model), new cache). w: W_q, W_k, W_v,
    W_o weights by name; cache (k, v) each (b, g, t, d_head) or None. Knobs (mistakes): rotate_v, positions
    ('offset', 'from zero'), repeat ('interleave', 'tile': head j gets key/value head j % g), mask ('causal',
    'none', 'top-left': PyTorch's is_causal, not shifted by t), cached_keys ('rotated', 'raw', 'rotated again':
    the raw keys appended to the cache, then all rotated at 0 .. t + n - 1, the cached ones a second time), returns
    ('old then new', 'given': the cache passed in, 'new only', 'repeated': old then new with each key/value head
    repeated for its query heads), scale ('d_head', 'd_model': scores divided by sqrt(d_model))."""
    x = x.double()
    n = x.shape[1]
    t = 0 if cache is None else cache[0].shape[2]
    pos = torch.arange(n) if positions == "from zero" else torch.arange(t, t + n)
    q = rotate(_heads(x @ w["W_q.weight"].double().T, h), pos, base)
    k_raw = _heads(x @ w["W_k.weight"].double().T, g)
    k, v = rotate(k_raw, pos, base), _heads(x @ w["W_v.weight"].double().T, g)
    v = rotate(v, pos, base) if rotate_v else v
    keys, values, raw = k, v, k_raw
    if cache is not None:
        ck, cv = cache[0].double(), cache[1].double()
        keys, values, raw = torch.cat([ck, k], 2), torch.cat([cv, v], 2), torch.cat([ck, k_raw], 2)
        if cached_keys == "rotated again":
            keys = rotate(raw, torch.arange(t + n), base)
    allowed = {"causal": torch.ones(n, t + n, dtype=torch.bool).tril(diagonal=t), "none": None,
               "top-left": torch.ones(n, t + n, dtype=torch.bool).tril()}[mask]
    by = 1 / math.sqrt(x.shape[-1] if scale == "d_model" else q.shape[-1])
    if repeat == "tile":
        heads = F.scaled_dot_product_attention(q, keys.repeat(1, h // g, 1, 1), values.repeat(1, h // g, 1, 1),
                                               attn_mask=allowed, scale=by)
    else:
        heads = F.scaled_dot_product_attention(q, keys, values, attn_mask=allowed, enable_gqa=True, scale=by)
    out = heads.transpose(1, 2).flatten(2) @ w["W_o.weight"].double().T
    new = {"old then new": (raw if cached_keys == "raw" else keys, values), "given": cache,
           "new only": (k, v), "repeated": (keys.repeat_interleave(h // g, 1), values.repeat_interleave(h // g, 1))
           }[returns]
    return out, new


def as_float(cache: Cache) -> Cache:
    return None if cache is None else (cache[0].float(), cache[1].float())


def gqa_weights(rng: np.random.Generator, d: int, h: int, g: int) -> dict[str, torch.Tensor | None]:
    """W_q (h d_head, d), W_k and W_v (g d_head, d), W_o (d, h d_head), entries scaled by 1/sqrt(fan_in);
    the biases None (`load_weights`: the module must not have them)."""
    dh = d // h
    shapes = {"W_q.weight": (h * dh, d), "W_k.weight": (g * dh, d), "W_v.weight": (g * dh, d),
              "W_o.weight": (d, h * dh)}
    weights: dict[str, torch.Tensor | None] = {name: randn(rng, *s) / math.sqrt(s[1]) for name, s in shapes.items()}
    return weights | {name.replace("weight", "bias"): None for name in shapes}  # no biases


def drawn_cache(rng: np.random.Generator, b: int, g: int, t: int, dh: int) -> Cache:
    """A cache of t positions (random keys and values, as if rotated), or None for t = 0."""
    return (randn(rng, b, g, t, dh), randn(rng, b, g, t, dh)) if t else None


def cache_label(cache: Cache) -> str:
    return f"a cache of {cache[0].shape[2]} positions (k, v {kit.shape_of(cache[0])})" if cache else "no cache"


def chunk_sizes(rng: np.random.Generator, spec: list[int]) -> list[int]:
    """The spec's chunk sizes; those above 1 grow by 0..2 (a one-token step stays one token)."""
    return [n + int(rng.integers(0, 3)) if n > 1 else n for n in spec]


# ------------------------------------------------------------- the cases ---
# (batch, num_heads, num_kv_heads, new positions n, cached positions t, rope_base): every set holds
# 1 < g < h (the order of the repeated heads shows), g == h (chapter 5's attention with RoPE), g == 1,
# n > 1 (the mask), a non-default rope_base; hidden ones a one-token call on a cache.

_SPECS = {False: [(2, 4, 2, 5, 0, None), (1, 2, 2, 4, 0, 500.0), (2, 4, 1, 3, 3, None)],
          True: [(3, 6, 3, 7, 0, None), (2, 4, 4, 5, 0, None), (1, 8, 2, 6, 0, 100.0), (2, 4, 2, 1, 6, None),
                 (2, 6, 2, 3, 4, 1000.0), (1, 2, 1, 9, 0, None), (2, 4, 2, 4, 5, 100.0)]}
_CHAINS = {False: [(2, 4, 2, [4, 1, 1, 2], 0, None), (1, 2, 2, [1, 1, 1], 0, 500.0)],
           True: [(2, 6, 3, [5, 1, 1, 1], 0, None), (1, 4, 2, [1, 1, 1, 1, 1], 0, None),
                  (3, 8, 2, [3, 4, 1], 0, 100.0), (2, 4, 4, [2, 3], 0, None), (1, 4, 1, [3, 1, 2], 4, None),
                  (2, 2, 1, [6, 2], 0, 100.0)]}


def _title(d: int, h: int, g: int, base: float | None) -> str:
    return f"GroupedQueryAttention({d}, {h}, {g}" + (f", rope_base={base:g})" if base is not None else ")")


def _gqa_case(rng: np.random.Generator, b: int, h: int, g: int, n: int | list[int], t: int,
              base: float | None) -> Case:
    dh = kit.even(rng, 2, 5)  # 4, 6 or 8: with d_head = 2 every pair turns at theta_0 = 1, whatever the base
    d = h * dh
    chunks = chunk_sizes(rng, n) if isinstance(n, list) else None
    total = sum(chunks) if chunks else (n + int(rng.integers(0, 3)) if n > 1 else n)
    t = t + int(rng.integers(0, 3)) if t else 0
    x, cache = randn(rng, b, total, d), drawn_cache(rng, b, g, t, dh)
    what = f"chunks of {', '.join(map(str, chunks))} positions" if chunks else "one call"
    meta = {"init": (d, h, g), "rope_base": base, "weights": gqa_weights(rng, d, h, g)}
    return Case(f"{_title(d, h, g, base)}, x {kit.shape_of(x)} in {what}, starting from {cache_label(cache)}",
                (x,) if cache is None else (x, cache), meta=meta | ({"chunks": chunks} if chunks else {}))


def _cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    return [_gqa_case(rng, *spec) for spec in _SPECS[hidden]]


def _chain_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    return [_gqa_case(rng, *spec) for spec in _CHAINS[hidden]]


def _gqa(case: Case, *, base_ignored: bool = False, **knobs: Any) -> Any:
    """The expected report: what each call returns (float32), and the cache passed in as it was."""
    d, h, g = case.meta["init"]
    base = 10000.0 if base_ignored or case.meta["rope_base"] is None else case.meta["rope_base"]
    x, cache = case.args[0], (case.args[1] if len(case.args) > 1 else None)
    report: dict[str, Any] = {}
    if "chunks" not in case.meta:
        out, new = gqa_step(case.meta["weights"], x, cache, h, g, base, **knobs)
        report[RETURNED] = (out.float(), as_float(new))
    else:
        calls, c, start = [], cache, 0
        for n in case.meta["chunks"]:
            out, c = gqa_step(case.meta["weights"], x[:, start:start + n], c, h, g, base, **knobs)
            calls.append((out.float(), as_float(c)))
            start += n
        report[CALLS] = calls
    if cache is not None:
        report[GIVEN] = cache
    return kit.both_modes(report)


# ------------------------------------------------------------ the mistakes ---

_MISTAKES = [
    Mistake("Did you rotate the values too? Only queries and keys turn: v = split_heads(W_v(x)) as it is.",
            variant(_gqa, rotate_v=True)),
    Mistake("Did you restart the positions at 0? With t positions in the cache the new ones sit at t .. t + n - 1 "
            "(t = cache[0].shape[2]): rotate q and k by positions = torch.arange(t, t + n).",
            variant(_gqa, positions="from zero")),
    Mistake("Did you repeat the key/value heads in the wrong order? Query head j uses key/value head "
            "j // (num_heads // num_kv_heads): k.repeat_interleave(group, dim=1), not k.repeat(1, group, 1, 1) "
            "(which gives head j % num_kv_heads).", variant(_gqa, repeat="tile")),
    Mistake("Did you leave out the causal mask? New position i may see the t cached positions and new positions "
            "0 .. i only.", variant(_gqa, mask="none")),
    Mistake("Did you use is_causal=True (or a square causal mask) with a cache? PyTorch aligns that mask top-left: "
            "new position i would see cached positions 0 .. i only. Shift it by t: new position i sees keys "
            "0 .. t + i, torch.ones(n, t + n, dtype=torch.bool).tril(diagonal=t).", variant(_gqa, mask="top-left")),
    Mistake("Did you cache the keys before rotating them? The cache holds the rotated keys (the ones the scores "
            "used), so that later calls use them as they are.", variant(_gqa, cached_keys="raw")),
    Mistake("Did you rotate the cached keys again? They were rotated when they were computed: rotate only the new "
            "keys, at positions t .. t + n - 1, then append them to the cache.",
            variant(_gqa, cached_keys="rotated again")),
    Mistake("Did you return the cache you were given? The new cache holds the old positions then the new ones: "
            "torch.cat([cache[0], k], dim=2), and the same for v (without a cache, just k and v).",
            variant(_gqa, returns="given")),
    Mistake("Did you return only the new keys and values? The new cache holds all t + n positions, the cached ones "
            "first: torch.cat([cache[0], k], dim=2).", variant(_gqa, returns="new only")),
    Mistake("Did you ignore rope_base? The rotation's frequencies are rope_base ** (-2i / d_head).",
            variant(_gqa, base_ignored=True)),
    Mistake("Did you cache the key/value heads after repeating them? The cache holds the num_kv_heads heads, "
            "(batch, num_kv_heads, t + n, d_head) each: repeat them for the query heads only to attend.",
            variant(_gqa, returns="repeated")),
    Mistake("Did you divide the scores by sqrt(d_model)? Each head's scores are divided by sqrt(d_head), the width "
            "of its queries and keys (chapter 4's scaled_dot_product_attention does it).",
            variant(_gqa, scale="d_model")),
]
_HINT = ("forward(x, cache=None) returns (W_o(merge_heads(attention)), (k, v)): q, k, v from W_q, W_k, W_v "
         "(split into num_heads and num_kv_heads heads), q and k rotated at positions t .. t + n - 1 (t cached), "
         "k and v appended to the cache along dim=2, query head j attending with key/value head "
         "j // (num_heads // num_kv_heads), causally. x and the cache are left unchanged. No dropout: "
         + kit.same_in_both_modes())


# ---------------------------------------------------- parameters, errors ---

def _layout_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(4, 2), (2, 2)] if not hidden else [(8, 2), (6, 3), (4, 1), (4, 4), (16, 4)]
    cases = []
    for h, g in specs:
        d = h * kit.even(rng, 1, 9)
        cases.append(Case(f"a new {_title(d, h, g, None)}", meta={"init": (d, h, g)}))
    return cases


def _table(case: Case, *, bias: bool = False, kv: str = "grouped") -> dict:
    d, h, g = case.meta["init"]
    width = (g if kv == "grouped" else h) * (d // h)
    table = {"W_q.weight": ((d, d), "float32"), "W_k.weight": ((width, d), "float32"),
             "W_v.weight": ((width, d), "float32"), "W_o.weight": ((d, d), "float32")}
    if bias:
        table |= {"W_q.bias": ((d,), "float32"), "W_k.bias": ((width,), "float32"),
                  "W_v.bias": ((width,), "float32"), "W_o.bias": ((d,), "float32")}
    table = dict(sorted(table.items()))
    return {PARAMS: table, COUNT: sum(math.prod(s) for s, _ in table.values())}


def _error_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    """d_model not a multiple of num_heads; num_heads not a multiple of num_kv_heads (fewer or more); an odd
    d_head; no key/value head."""
    def indivisible_d() -> tuple[int, int, int]:
        h = int(rng.choice([2, 4, 6]))
        return h * int(rng.integers(1, 6)) + int(rng.integers(1, h)), h, 1

    def indivisible_h() -> tuple[int, int, int]:
        h, g = [(6, 4), (4, 3), (8, 3), (6, 5)][int(rng.integers(0, 4))]
        return h * kit.even(rng, 1, 4), h, g

    def more_kv() -> tuple[int, int, int]:
        h = int(rng.choice([2, 3, 4]))
        return h * kit.even(rng, 1, 4), h, 2 * h

    def odd_head() -> tuple[int, int, int]:
        h = int(rng.choice([2, 4]))
        return h * (kit.even(rng, 0, 4) + 1), h, 1

    def no_kv() -> tuple[int, int, int]:
        h = int(rng.choice([2, 4]))
        return h * kit.even(rng, 1, 4), h, 0

    makers = [indivisible_d, indivisible_h, odd_head, no_kv] + ([more_kv, indivisible_h, odd_head] if hidden else [])
    return [Case(f"a new {_title(*init, None)}", meta={"init": init}) for init in (m() for m in makers)]


def _error(case: Case) -> Any:
    d, h, g = case.meta["init"]
    if g < 1:
        return kit.raises(f"num_kv_heads = {g}: there must be at least one key/value head")
    if d % h:
        return kit.raises(f"num_heads = {h} does not divide d_model = {d}")
    if h % g:
        return kit.raises(f"num_kv_heads = {g} does not divide num_heads = {h}")
    return kit.raises(f"d_head = d_model // num_heads = {d // h} is odd: apply_rope turns pairs of features")


register(
    __name__,
    Check(name="gqa", cases=_cases, expected=_gqa, mistakes=_MISTAKES, hint=_HINT),
    Check(name="gqa_cache", cases=_chain_cases, expected=_gqa, mistakes=_MISTAKES,
          hint="Fed a sequence a few positions at a time, each call given the cache the last one returned, the "
               "outputs must be the rows of one full pass, and each returned cache the rotated keys and the "
               "values of every position so far. " + _HINT),
    Check(name="gqa_parameters", guard=True, cases=_layout_cases, expected=_table,
          mistakes=[Mistake("Did you give the projections biases? W_q, W_k, W_v and W_o have none (bias=False).",
                            variant(_table, bias=True)),
                    Mistake("Did you give W_k and W_v num_heads heads? They make num_kv_heads heads of d_head "
                            "features: nn.Linear(d_model, num_kv_heads * d_head, bias=False).",
                            variant(_table, kv="all"))],
          hint="Exactly four float32 nn.Linear layers without bias: W_q (d_model -> num_heads * d_head), W_k and W_v "
               "(d_model -> num_kv_heads * d_head), W_o (num_heads * d_head -> d_model)."),
    Check(name="gqa_errors", guard=True, cases=_error_cases, expected=_error,
          hint="In __init__, raise ValueError unless num_heads divides d_model, d_head = d_model // num_heads is even, "
               "and num_kv_heads is at least 1 and divides num_heads."),
)
