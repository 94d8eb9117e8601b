"""Checks for chapter 4: softmax, scaled dot-product attention, one attention head.

Oracles are PyTorch's own: ``torch.softmax`` for the softmax,
``torch.nn.functional.scaled_dot_product_attention`` (with an additive float
``attn_mask``) for the attention output, and a float64 computation written out
here for the attention weights, which PyTorch's fused function does not return.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from .framework import Case, Check, Mistake, randn, register

NEG_INF = float("-inf")


# ------------------------------------------------------------- helpers ---

def causal_mask(n: int) -> torch.Tensor:
    """(n, n) additive mask: 0 on and below the diagonal, -inf above it."""
    return torch.triu(torch.full((n, n), NEG_INF), diagonal=1)


def padding_mask(lengths: list[int], n_k: int) -> torch.Tensor:
    """(batch, 1, n_k) additive mask hiding the keys past each sequence's length."""
    keep = torch.arange(n_k)[None, :] < torch.tensor(lengths)[:, None]
    return torch.where(keep, 0.0, NEG_INF)[:, None, :]


def _refuse(what: str) -> Callable:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{what} is not allowed in this exercise: write it with basic tensor operations")
    return refuse


@contextmanager
def _forbidden(spots: list[tuple[Any, str, str]]) -> Iterator[None]:
    """Temporarily replace library functions the exercise asks you not to use."""
    saved = [(owner, attr, owner.__dict__.get(attr, None), attr in owner.__dict__)
             for owner, attr, _ in spots]
    try:
        for owner, attr, what in spots:
            setattr(owner, attr, _refuse(what))
        yield
    finally:
        for owner, attr, old, had in saved:
            if had:
                setattr(owner, attr, old)
            else:
                delattr(owner, attr)


def _softmax_spots() -> list[tuple[Any, str, str]]:
    return [(torch, "softmax", "torch.softmax"), (F, "softmax", "torch.nn.functional.softmax"),
            (torch.special, "softmax", "torch.special.softmax"), (torch.Tensor, "softmax", "Tensor.softmax"),
            (torch, "log_softmax", "torch.log_softmax"), (F, "log_softmax", "F.log_softmax"),
            (torch.Tensor, "log_softmax", "Tensor.log_softmax")]


def _attend64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, *,
              scale: float | None = None, dim: int = -1, mask_mode: str = "before",
              transpose_k: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention in float64, with knobs that reproduce the usual mistakes.

    scale: what the scores are divided by (default sqrt(d_k)); dim: softmax axis;
    mask_mode: 'before' (right), 'ignored', 'minus' (scores - mask),
    'transposed' (scores + mask^T), 'after-multiply' (weights * allowed), 'after-add' (weights + mask).
    """
    q, k, v = q.double(), k.double(), v.double()
    kt = k.transpose(-2, -1) if transpose_k else k
    scores = (q @ kt) / (math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None and mask_mode == "before":
        scores = scores + mask.double()
    elif mask is not None and mask_mode == "transposed":
        scores = scores + mask.double().transpose(-2, -1)
    elif mask is not None and mask_mode == "minus":
        scores = scores - mask.double()
    weights = torch.softmax(scores, dim=dim)
    if mask is not None and mask_mode == "after-multiply":
        weights = weights * (mask == 0).double()
    elif mask is not None and mask_mode == "after-add":
        weights = weights + mask.double()
    return weights @ v, weights


# ------------------------------------------------------------- softmax ---

def _softmax_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        x = randn(rng, 2, 5)
        x[0, 1] = x[1, 3] = NEG_INF
        return [
            Case("the worked example [2, 1, 0]", (torch.tensor([2.0, 1.0, 0.0]),)),
            Case("a (3, 5) matrix, dim=-1", (randn(rng, 3, 5),)),
            Case("a (4, 3) matrix, dim=0", (randn(rng, 4, 3),), {"dim": 0}),
            Case("a (2, 4) matrix whose second row is around 1000", (_large_rows(rng, 2, 4, 1000.0, 3.0),)),
            Case("a (2, 5) matrix with some -inf entries", (x,)),
        ]
    x = 2.0 * randn(rng, 3, 4, 6)
    x[..., ::4] = NEG_INF
    return [
        Case("a (2, 3, 7) tensor, dim=-1", (2.0 * randn(rng, 2, 3, 7),)),
        Case("a (2, 3, 7) tensor, dim=1", (2.0 * randn(rng, 2, 3, 7),), {"dim": 1}),
        Case("a (3, 4, 5) tensor, dim=2", (randn(rng, 3, 4, 5),), {"dim": 2}),
        Case("a (5, 2, 3, 4) tensor, dim=0", (randn(rng, 5, 2, 3, 4),), {"dim": 0}),
        Case("a (6, 6) matrix, dim=0", (randn(rng, 6, 6),), {"dim": 0}),
        Case("a (3, 9) matrix with rows around 5000", (_large_rows(rng, 3, 9, 5000.0, 20.0),)),
        Case("a (4, 5) matrix with rows around -3000", (_large_rows(rng, 4, 5, -3000.0, 5.0),)),
        Case("a (3, 4, 6) tensor with -inf entries", (x,)),
        Case("a float64 (3, 4) matrix", (randn(rng, 3, 4).double(),)),
        Case("a single score", (torch.tensor([0.3]),)),
    ]


def _large_rows(rng: np.random.Generator, n: int, m: int, centre: float, spread: float) -> torch.Tensor:
    """Rows 1.. around `centre`; row 0 ordinary (so no wrong answer is NaN everywhere)."""
    x = spread * randn(rng, n, m)
    x[1:] += centre
    return x


def _dim(case: Case) -> int:
    return case.kwargs.get("dim", -1)


def _call_softmax(fn: Callable, case: Case) -> Any:
    with _forbidden(_softmax_spots()):
        return fn(*case.args, **case.kwargs)


def _softmax_no_max(case: Case) -> torch.Tensor:
    e = case.args[0].exp()
    return e / e.sum(_dim(case), keepdim=True)


def _softmax_other_axis(case: Case) -> torch.Tensor:
    x = case.args[0]
    if x.dim() < 2:
        raise ValueError("no other axis")
    d = _dim(case) % x.dim()
    return torch.softmax(x, dim=d - 1 if d > 0 else x.dim() - 1)


def _softmax_no_keepdim(case: Case) -> torch.Tensor:
    x, d = case.args[0], _dim(case)
    z = (x - x.max(dim=d).values).exp()  # the max broadcasts along the wrong axis
    return z / z.sum(d, keepdim=True)


register(
    Check(
        name="softmax",
        cases=_softmax_cases,
        expected=lambda c: torch.softmax(c.args[0], dim=_dim(c)),
        call=_call_softmax,
        exact_dtype=True,
        mistakes=[
            Mistake("Did you skip subtracting the maximum? exp(1000) overflows to inf (and exp(-1000) "
                    "underflows to 0), so inf/inf or 0/0 gives NaN. Subtract x.max(dim, keepdim=True) first.",
                    _softmax_no_max),
            Mistake("Did you normalise along the wrong axis? Use `dim` for the max, the exp-sum and "
                    "keepdim=True so the result broadcasts back.", _softmax_other_axis),
            Mistake("Did you always use the last axis? Respect the `dim` argument.",
                    lambda c: torch.softmax(c.args[0], dim=-1)),
            Mistake("Did you take the max without keepdim=True? Then it broadcasts along the wrong axis.",
                    _softmax_no_keepdim),
            Mistake("Did you divide by the sum over the whole tensor instead of along `dim`?",
                    lambda c: c.args[0].exp() / c.args[0].exp().sum()),
        ],
        hint="softmax(x)_i = exp(x_i - m) / sum_j exp(x_j - m) with m the maximum along `dim` "
             "(keepdim=True). Entries equal to -inf must get weight exactly 0.",
    ),
)


# ---------------------------------------------------------------- sdpa ---

def _shapes_case(rng: np.random.Generator, lead: tuple[int, ...], n_q: int, n_k: int, d_k: int, d_v: int,
                 mask: torch.Tensor | None = None, scale: float = 1.0, note: str = "") -> Case:
    q = scale * randn(rng, *lead, n_q, d_k)
    k = scale * randn(rng, *lead, n_k, d_k)
    v = randn(rng, *lead, n_k, d_v)
    label = (f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
             + (f", {note}" if note else ""))
    return Case(label, (q, k, v), {} if mask is None else {"mask": mask})


def _large_scores_case(rng: np.random.Generator, lead: tuple[int, ...], n_q: int, n_k: int, d_k: int, d_v: int,
                       mask: torch.Tensor | None = None) -> Case:
    """Scores in the hundreds (exp overflows in float32) for every query but the first."""
    case = _shapes_case(rng, lead, n_q, n_k, d_k, d_v, mask=mask,
                        note=("causal mask, " if mask is not None else "") + "scores in the hundreds")
    q, k, _ = case.args
    q[..., 1:, :] *= 12.0
    k *= 8.0
    return case


def _sdpa_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        return [
            _shapes_case(rng, (), 2, 3, 4, 5),
            _shapes_case(rng, (2,), 4, 4, 8, 3),
            _shapes_case(rng, (2, 3), 3, 5, 6, 2),
        ]
    return [
        _shapes_case(rng, (), 5, 5, 5, 5, note="all sizes equal"),
        _shapes_case(rng, (3,), 7, 4, 16, 6),
        _shapes_case(rng, (2, 4), 3, 6, 32, 8),
        _shapes_case(rng, (2, 1, 3), 4, 5, 2, 3, note="three leading dimensions"),
        _large_scores_case(rng, (2,), 6, 6, 64, 4),
        _shapes_case(rng, (1,), 1, 9, 12, 1, note="a single query"),
    ]


def _sdpa_masked_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        return [
            _shapes_case(rng, (2,), 4, 4, 8, 3, mask=causal_mask(4), note="causal mask (4, 4)"),
            _shapes_case(rng, (2,), 3, 5, 6, 2, mask=padding_mask([5, 3], 5),
                         note="padding mask (2, 1, 5): the second sequence has 3 real keys"),
        ]
    bias = randn(rng, 3, 6)
    bias[0, 2] = NEG_INF
    return [
        _shapes_case(rng, (3,), 7, 7, 16, 5, mask=causal_mask(7), note="causal mask (7, 7)"),
        _shapes_case(rng, (2, 2), 5, 5, 10, 3, mask=causal_mask(5), note="causal mask (5, 5), 4-D input"),
        _shapes_case(rng, (3,), 4, 6, 8, 2, mask=padding_mask([6, 2, 4], 6),
                     note="padding mask (3, 1, 6)"),
        _shapes_case(rng, (2, 3), 6, 6, 24, 4, mask=padding_mask([4, 6], 6)[:, None] + causal_mask(6),
                     note="causal plus padding mask (2, 1, 6, 6), 4-D input"),
        _shapes_case(rng, (2,), 3, 6, 4, 4, mask=bias,
                     note="a general additive float bias (3, 6) with finite values and one -inf"),
        _large_scores_case(rng, (2,), 6, 6, 32, 3, mask=causal_mask(6)),
    ]


def _sdpa_fully_masked_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        mask = causal_mask(3)
        mask[1] = NEG_INF
        return [_shapes_case(rng, (), 3, 3, 4, 2, mask=mask, note="query row 1 fully masked")]
    pad = padding_mask([4, 0], 4)  # the second sequence is all padding
    mask = torch.zeros(2, 3, 5, 5)
    mask[1, 2, 4] = NEG_INF
    return [
        _shapes_case(rng, (2,), 3, 4, 6, 2, mask=pad, note="padding mask hiding every key of sequence 2"),
        _shapes_case(rng, (2, 3), 5, 5, 4, 3, mask=mask, note="one fully masked row in one batch entry"),
        _shapes_case(rng, (), 4, 4, 4, 4, mask=torch.full((4, 4), NEG_INF), note="every key masked"),
    ]


def _sdpa_oracle(case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, v = case.args
    mask = case.kwargs.get("mask")
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    _, weights = _attend64(q, k, v, mask)
    return out, weights


def _call_sdpa(fn: Callable, case: Case) -> Any:
    spots = [(F, "scaled_dot_product_attention", "torch.nn.functional.scaled_dot_product_attention")]
    with _forbidden(spots):
        return fn(*case.args, **case.kwargs)


def _call_sdpa_fully_masked(fn: Callable, case: Case) -> str:
    """'raises ValueError', or what happened instead (other exceptions propagate)."""
    try:
        out = _call_sdpa(fn, case)
    except ValueError:
        return "raises ValueError"
    tensors = out if isinstance(out, (tuple, list)) else (out,)
    nan = any(isinstance(t, torch.Tensor) and bool(torch.isnan(t).any()) for t in tensors)
    return "returned without raising" + (" (and the result contains NaN)" if nan else "")


def _variant(**knobs: Any) -> Callable[[Case], Any]:
    def output(case: Case) -> Any:
        q, k, v = case.args
        return _attend64(q, k, v, case.kwargs.get("mask"), **knobs)
    return output


def _scaled_by(size: Callable[[Case], float]) -> Callable[[Case], Any]:
    def output(case: Case) -> Any:
        q, k, v = case.args
        return _attend64(q, k, v, case.kwargs.get("mask"), scale=size(case))
    return output


_SCALE_MISTAKES = [
    Mistake("Did you divide by d_k instead of sqrt(d_k)?", _scaled_by(lambda c: c.args[0].shape[-1])),
    Mistake("Did you forget to divide the scores by sqrt(d_k)?", _scaled_by(lambda c: 1.0)),
    Mistake("Did you divide by the square root of the sequence length? d_k is the key dimension "
            "q.shape[-1], not the number of tokens.", _scaled_by(lambda c: math.sqrt(c.args[1].shape[-2]))),
    Mistake("Did you divide by the square root of the number of queries? d_k is q.shape[-1].",
            _scaled_by(lambda c: math.sqrt(c.args[0].shape[-2]))),
    Mistake("Did you divide by sqrt(d_v)? The scale uses the key dimension d_k = q.shape[-1].",
            _scaled_by(lambda c: math.sqrt(c.args[2].shape[-1]))),
    Mistake("Did you take the softmax over the queries (dim=-2)? Each query's weights over the keys "
            "must sum to 1: softmax along the last axis.", _variant(dim=-2)),
    Mistake("Did you forget to transpose K? The scores are q @ k.transpose(-2, -1).",
            _variant(transpose_k=False)),
]

_MASK_MISTAKES = [
    Mistake("Did you ignore the mask? Add it to the scores before the softmax.", _variant(mask_mode="ignored")),
    Mistake("Did you subtract the mask? It is additive: scores + mask, with 0 where a key is allowed "
            "and -inf where it is not.", _variant(mask_mode="minus")),
    Mistake("Did you transpose the mask? Row i of the mask belongs to query i, column j to key j: "
            "add it as it is.", _variant(mask_mode="transposed")),
    Mistake("Did you apply the mask after the softmax? Zeroing weights afterwards leaves rows that do "
            "not sum to 1 (and a general additive mask is not a 0/1 gate): add the mask to the scores "
            "before the softmax.", _variant(mask_mode="after-multiply")),
    Mistake("Did you add the mask to the weights after the softmax? Add it to the scores before.",
            _variant(mask_mode="after-add")),
]

_SDPA_HINT = ("weights = softmax(q @ k.transpose(-2, -1) / sqrt(d_k) + mask) along the last axis, "
              "output = weights @ v; use transpose(-2, -1) and @ so any leading batch dimensions work "
              "(k.T and torch.mm do not). NaN on large scores means a softmax without max-subtraction.")

register(
    Check(
        name="sdpa",
        cases=_sdpa_cases,
        expected=_sdpa_oracle,
        call=_call_sdpa,
        mistakes=_SCALE_MISTAKES,
        hint=_SDPA_HINT,
    ),
    Check(
        name="sdpa_masked",
        cases=_sdpa_masked_cases,
        expected=_sdpa_oracle,
        call=_call_sdpa,
        mistakes=_MASK_MISTAKES + _SCALE_MISTAKES,
        hint=_SDPA_HINT + " Build nothing from the mask: it is already additive and broadcastable.",
    ),
    Check(
        name="sdpa_fully_masked",
        cases=_sdpa_fully_masked_cases,
        expected=lambda c: "raises ValueError",
        call=_call_sdpa_fully_masked,
        hint="A query whose keys are all masked has nothing to average: its softmax would be 0/0 = NaN. "
             "After adding the mask, check whether any row of the scores is -inf everywhere "
             "(torch.isneginf(scores).all(dim=-1).any()) and raise ValueError if so.",
    ),
)


# -------------------------------------------------------- attention head ---

def _head_case(rng: np.random.Generator, batch: int, n_q: int, n_k: int | None, d_in: int, d_k: int,
               d_v: int | None, mask: torch.Tensor | None = None, note: str = "") -> Case:
    x = randn(rng, batch, n_q, d_in)
    context = None if n_k is None else randn(rng, batch, n_k, d_in)
    width_v = d_v or d_k
    wq = randn(rng, d_k, d_in) / math.sqrt(d_in)
    wk = randn(rng, d_k, d_in) / math.sqrt(d_in)
    wv = randn(rng, width_v, d_in) / math.sqrt(d_in)
    kind = "self-attention" if context is None else f"cross-attention to a context {tuple(context.shape)}"
    label = (f"AttentionHead(d_in={d_in}, d_k={d_k}, d_v={d_v}), x {tuple(x.shape)}, {kind}"
             + (f", {note}" if note else ""))
    return Case(label, (d_in, d_k, d_v, x, context, mask, wq, wk, wv))


def _head_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        return [
            _head_case(rng, 2, 3, None, 6, 4, 5),
            _head_case(rng, 1, 2, 4, 6, 3, None),
        ]
    return [
        _head_case(rng, 3, 5, None, 8, 4, 6, mask=causal_mask(5), note="causal mask"),
        _head_case(rng, 2, 3, 7, 10, 6, 2, mask=padding_mask([7, 4], 7), note="padding mask (2, 1, 7)"),
        _head_case(rng, 2, 4, None, 32, 2, None),
        _head_case(rng, 1, 6, 3, 5, 7, 9),
        _head_case(rng, 4, 1, None, 12, 12, 3),
    ]


def _call_head(cls: Callable, case: Case) -> Any:
    d_in, d_k, d_v, x, context, mask, wq, wk, wv = case.args
    torch.manual_seed(0)
    head = cls(d_in, d_k) if d_v is None else cls(d_in, d_k, d_v)
    with torch.no_grad():
        head.W_q.weight.copy_(wq)
        head.W_k.weight.copy_(wk)
        head.W_v.weight.copy_(wv)
        out, weights = head(x, context=context, mask=mask)
    return out, weights


def _head_variant(q_from: str = "x", kv_from: str = "context", swap_qk: bool = False,
                  scale: str = "d_k") -> Callable[[Case], Any]:
    def output(case: Case) -> Any:
        d_in, d_k, d_v, x, context, mask, wq, wk, wv = case.args
        ctx = x if context is None else context
        src = {"x": x, "context": ctx}
        if swap_qk:
            wq, wk = wk, wq
        q, k, v = src[q_from] @ wq.T, src[kv_from] @ wk.T, src[kv_from] @ wv.T
        size = {"d_k": d_k, "d_in": d_in, "none": 1}[scale]
        return _attend64(q, k, v, mask, scale=math.sqrt(size) if scale != "none" else 1.0)
    return output


def _head_oracle(case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    d_in, d_k, d_v, x, context, mask, wq, wk, wv = case.args
    ctx = x if context is None else context
    q, k, v = F.linear(x, wq), F.linear(ctx, wk), F.linear(ctx, wv)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    _, weights = _attend64(q, k, v, mask)
    return out, weights


def _param_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    sizes = [(6, 4, 5), (8, 3, None)] if not hidden else [(16, 4, 8), (5, 7, None), (12, 2, 3)]
    return [Case(f"AttentionHead(d_in={a}, d_k={b}, d_v={c})", (a, b, c)) for a, b, c in sizes]


def _call_params(cls: Callable, case: Case) -> dict[str, tuple[int, ...]]:
    d_in, d_k, d_v = case.args
    head = cls(d_in, d_k) if d_v is None else cls(d_in, d_k, d_v)
    return {name: tuple(p.shape) for name, p in head.named_parameters()}


def _param_oracle(case: Case) -> dict[str, tuple[int, ...]]:
    d_in, d_k, d_v = case.args
    return {"W_q.weight": (d_k, d_in), "W_k.weight": (d_k, d_in), "W_v.weight": (d_v or d_k, d_in)}


register(
    Check(
        name="attention_head",
        cases=_head_cases,
        expected=_head_oracle,
        call=_call_head,
        mistakes=[
            Mistake("Did you ignore `context`? In cross-attention the keys and values come from the "
                    "context; only the queries come from x.", _head_variant(kv_from="x")),
            Mistake("Did you take the queries from the context? Queries come from x (the sequence that "
                    "asks), keys and values from the context.", _head_variant(q_from="context", kv_from="x")),
            Mistake("Did you swap W_q and W_k?", _head_variant(swap_qk=True)),
            Mistake("Did you scale by sqrt(d_in)? The scale uses the key width d_k, not the input width.",
                    _head_variant(scale="d_in")),
            Mistake("Did you forget to scale the scores by 1/sqrt(d_k)?", _head_variant(scale="none")),
        ],
        hint="q = W_q(x), k = W_k(context), v = W_v(context) (context = x when None), then your "
             "scaled_dot_product_attention(q, k, v, mask). The projections have no bias. If your "
             "scaled_dot_product_attention fails its own tests, fix it first.",
    ),
    Check(
        name="attention_head_parameters",
        cases=_param_cases,
        expected=_param_oracle,
        call=_call_params,
        hint="The head holds exactly three nn.Linear layers without bias: W_q and W_k map d_in -> d_k, "
             "W_v maps d_in -> d_v (d_k when d_v is None). Did you add a bias, or size W_v by d_k?",
    ),
)
