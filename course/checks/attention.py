"""Checks for chapter 4: softmax, scaled dot-product attention, one attention head.

Oracles are PyTorch's own: ``torch.softmax`` for the softmax,
``torch.nn.functional.scaled_dot_product_attention`` (with an additive float
``attn_mask``) for the attention output, and `_attention`, a float64
computation written out here and cast back to the inputs' dtype, for the
attention weights, which PyTorch's fused function does not return. The
attention head's oracle projects with ``torch.nn.functional.linear`` and the
known weights a case copies in, then uses the same two oracles; the head has
no dropout, so it must give that answer in training and in eval mode.
Mistakes are `_softmax`, `_attend` and `_head` with knobs turned.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from . import kit
from .framework import NOT_APPLICABLE, Case, Check, Mistake, register
from .kit import NEG_INF, causal_mask, describe, variant, padding_mask, randn

# ------------------------------------------------------------- softmax ---


def _large_rows(rng: np.random.Generator, n: int, m: int, centre: float, spread: float) -> torch.Tensor:
    """Rows 1.. around `centre`; row 0 ordinary (so no wrong answer is NaN everywhere)."""
    x = spread * randn(rng, n, m)
    x[1:] += centre
    return x


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
        Case("a (5, 5) matrix, dim=-1", (randn(rng, 5, 5),)),  # a max without keepdim broadcasts here
    ]


def _softmax(case: Case, *, stable: bool = True, axis: str = "dim", keepdim: bool = True) -> Any:
    """torch.softmax along `dim` (the oracle); knobs: no max-subtraction, another `axis`
    ('last', 'other', or 'all' for the sum), the max taken without keepdim. NOT_APPLICABLE
    where a knob gives the right answer anyway (or raises: the general hint speaks there)."""
    x = case.args[0]
    d = case.kwargs.get("dim", -1) % x.dim()
    if (stable, axis, keepdim) == (True, "dim", True):
        return torch.softmax(x, dim=d)
    e = {"dim": d, "all": d, "last": x.dim() - 1, "other": (d - 1) % x.dim()}[axis]
    try:
        z = (x - x.amax(dim=e, keepdim=keepdim)).exp() if stable else x.exp()
    except RuntimeError:  # the shapes do not broadcast: the code raises
        return NOT_APPLICABLE
    wrong = z / (z.sum() if axis == "all" else z.sum(e, keepdim=True))
    same = (e == d and (keepdim or d == 0) and (stable or not wrong.isnan().any())
            and (axis != "all" or x.numel() == x.shape[d]))
    return NOT_APPLICABLE if same else wrong


register(
    __name__,
    Check(
        name="softmax", cases=_softmax_cases, expected=_softmax,
        mistakes=[
            Mistake("Did you skip subtracting the maximum? exp(1000) overflows to inf (and exp(-1000) "
                    "underflows to 0), so inf/inf or 0/0 gives NaN. Subtract x.max(dim, keepdim=True) first.",
                    variant(_softmax, stable=False)),
            Mistake("Did you normalise along the wrong axis? Use `dim` for the max, the exp-sum and "
                    "keepdim=True so the result broadcasts back.", variant(_softmax, axis="other")),
            Mistake("Did you always use the last axis? Respect the `dim` argument.", variant(_softmax, axis="last")),
            Mistake("Did you take the max without keepdim=True? Then it broadcasts along the wrong axis.",
                    variant(_softmax, keepdim=False)),
            Mistake("Did you divide by the sum over the whole tensor instead of along `dim`?",
                    variant(_softmax, axis="all")),
        ],
        hint="softmax(x)_i = exp(x_i - m) / sum_j exp(x_j - m) with m the maximum along `dim` "
             "(keepdim=True). Entries equal to -inf must get weight exactly 0.",
    ),
)


# ---------------------------------------------------------------- sdpa ---

def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, *,
               scale: float | None = None, dim: int = -1, mask_mode: str = "add",
               transpose_k: bool = True) -> Any:
    """(output, weights) computed in float64, returned in q's dtype. Knobs for the usual mistakes:
    scale (default sqrt(d_k)), the softmax `dim`, `transpose_k`, and mask_mode: 'add' (right),
    'ignored', 'minus', 'transposed', 'inverted', 'after-multiply' (weights * allowed), 'after-add'.
    Raises ValueError on a fully masked row as the contract asks; NOT_APPLICABLE where the knobs
    change nothing or their shapes do not fit (that code raises: the general hint speaks)."""
    if mask is None and mask_mode != "add":
        return NOT_APPLICABLE
    dtype = q.dtype
    q, k, v = q.double(), k.double(), v.double()
    m = None if mask is None else mask.double()
    added = {"add": lambda: m, "minus": lambda: -m, "transposed": lambda: m.transpose(-2, -1),
             "inverted": lambda: torch.where(m == 0, NEG_INF, 0.0)}
    try:
        scores = q @ (k.transpose(-2, -1) if transpose_k else k) / (scale or math.sqrt(q.shape[-1]))
        if m is not None and mask_mode in added:
            scores = scores + added[mask_mode]()
        if torch.isneginf(scores).all(dim=-1).any():
            raise ValueError("a query row is fully masked")
        weights = torch.softmax(scores, dim=dim)
        if mask_mode == "after-multiply":
            weights = weights * (m == 0)
        elif mask_mode == "after-add":
            weights = weights + m
        return (weights @ v).to(dtype), weights.to(dtype)
    except RuntimeError:
        return NOT_APPLICABLE


def _attend(case: Case, *, scale_by: str | None = "d_k", root: bool = True, **knobs: Any) -> Any:
    """`_attention` on an sdpa case; the scores are divided by sqrt(size) (size if not `root`)
    with size one of 'd_k' (right), 'n_q', 'n_k', 'd_v' or None (not scaled)."""
    q, k, v = case.args
    size = {"d_k": q.shape[-1], "n_q": q.shape[-2], "n_k": k.shape[-2], "d_v": v.shape[-1], None: 1}[scale_by]
    return _attention(q, k, v, case.kwargs.get("mask"), scale=math.sqrt(size) if root else size, **knobs)


def _sdpa_oracle(case: Case) -> Any:
    return F.scaled_dot_product_attention(*case.args, attn_mask=case.kwargs.get("mask")), _attend(case)[1]


def _qkv(rng: np.random.Generator, lead: tuple[int, ...], n_q: int, n_k: int, d_k: int, d_v: int,
         mask: torch.Tensor | None = None, note: str = "", large: bool = False) -> Case:
    """q, k, v with leading dimensions `lead`; `large`: scores in the hundreds (exp overflows in
    float32) for every query but the first."""
    q, k, v = randn(rng, *lead, n_q, d_k), randn(rng, *lead, n_k, d_k), randn(rng, *lead, n_k, d_v)
    if large:
        q[..., 1:, :] *= 12.0
        k *= 8.0
        note = ("causal mask, " if mask is not None else "") + "scores in the hundreds"
    label = describe(q=q, k=k, v=v) + (f", {note}" if note else "")
    return Case(label, (q, k, v), {} if mask is None else {"mask": mask})


def _sdpa_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        return [_qkv(rng, (), 2, 3, 4, 5), _qkv(rng, (2,), 4, 4, 8, 3), _qkv(rng, (2, 3), 3, 5, 6, 2)]
    return [
        _qkv(rng, (), 5, 5, 5, 5, note="all sizes equal"),
        _qkv(rng, (3,), 7, 4, 16, 6),
        _qkv(rng, (2, 4), 3, 6, 32, 8),
        _qkv(rng, (2, 1, 3), 4, 5, 2, 3, note="three leading dimensions"),
        _qkv(rng, (2,), 6, 6, 64, 4, large=True),
        _qkv(rng, (1,), 1, 9, 12, 1, note="a single query"),
    ]


def _sdpa_masked_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        return [
            _qkv(rng, (2,), 4, 4, 8, 3, mask=causal_mask(4), note="causal mask (4, 4)"),
            _qkv(rng, (2,), 3, 5, 6, 2, mask=padding_mask([5, 3], 5),
                 note="padding mask (2, 1, 5): the second sequence has 3 real keys"),
        ]
    bias = randn(rng, 3, 6)
    bias[0, 2] = NEG_INF
    return [
        _qkv(rng, (3,), 7, 7, 16, 5, mask=causal_mask(7), note="causal mask (7, 7)"),
        _qkv(rng, (2, 2), 5, 5, 10, 3, mask=causal_mask(5), note="causal mask (5, 5), 4-D input"),
        _qkv(rng, (3,), 4, 6, 8, 2, mask=padding_mask([6, 2, 4], 6), note="padding mask (3, 1, 6)"),
        _qkv(rng, (2, 3), 6, 6, 24, 4, mask=padding_mask([4, 6], 6)[:, None] + causal_mask(6),
             note="causal plus padding mask (2, 1, 6, 6), 4-D input"),
        _qkv(rng, (2,), 3, 6, 4, 4, mask=bias, note="a general additive float bias (3, 6) with finite values "
                                                     "and one -inf"),
        _qkv(rng, (2,), 6, 6, 32, 3, mask=causal_mask(6), large=True),
    ]


def _sdpa_fully_masked_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        mask = causal_mask(3)
        mask[1] = NEG_INF
        return [_qkv(rng, (), 3, 3, 4, 2, mask=mask, note="query row 1 fully masked")]
    mask = torch.zeros(2, 3, 5, 5)
    mask[1, 2, 4] = NEG_INF
    return [
        _qkv(rng, (2,), 3, 4, 6, 2, mask=padding_mask([4, 0], 4), note="padding mask hiding every key of sequence 2"),
        _qkv(rng, (2, 3), 5, 5, 4, 3, mask=mask, note="one fully masked row in one batch entry"),
        _qkv(rng, (), 4, 4, 4, 4, mask=torch.full((4, 4), NEG_INF), note="every key masked"),
    ]


_SCALE_MISTAKES = [Mistake(hint, variant(_attend, **knobs)) for hint, knobs in (
    ("Did you divide by d_k instead of sqrt(d_k)?", {"root": False}),
    ("Did you forget to divide the scores by sqrt(d_k)?", {"scale_by": None}),
    ("Did you divide by the square root of the sequence length? d_k is the key dimension "
     "q.shape[-1], not the number of tokens.", {"scale_by": "n_k"}),
    ("Did you divide by the square root of the number of queries? d_k is q.shape[-1].", {"scale_by": "n_q"}),
    ("Did you divide by sqrt(d_v)? The scale uses the key dimension d_k = q.shape[-1].", {"scale_by": "d_v"}),
    ("Did you take the softmax over the queries (dim=-2)? Each query's weights over the keys "
     "must sum to 1: softmax along the last axis.", {"dim": -2}),
)]
_K_NOT_TRANSPOSED = Mistake("Did you forget to transpose K? The scores are q @ k.transpose(-2, -1).",
                            variant(_attend, transpose_k=False))  # shows only where n_k == d_k

_MASK_MISTAKES = [
    Mistake("Did you ignore the mask? Add it to the scores before the softmax.",
            variant(_attend, mask_mode="ignored")),
    Mistake("Did you subtract the mask? It is additive: scores + mask, with 0 where a key is allowed "
            "and -inf where it is not.", variant(_attend, mask_mode="minus")),
    Mistake("Did you transpose the mask? Row i of the mask belongs to query i, column j to key j: "
            "add it as it is.", variant(_attend, mask_mode="transposed")),
    Mistake("Did you invert the mask, or raise for rows with *some* masked keys? The mask is additive "
            "(0 = allowed, -inf = hidden): add it as it is, and raise ValueError only for a row that is "
            "-inf for every key (.all(dim=-1), not .any()).", variant(_attend, mask_mode="inverted")),
    Mistake("Did you apply the mask after the softmax? Zeroing weights afterwards leaves rows that do "
            "not sum to 1 (and a general additive mask is not a 0/1 gate): add the mask to the scores "
            "before the softmax.", variant(_attend, mask_mode="after-multiply")),
    Mistake("Did you add the mask to the weights after the softmax? Add it to the scores before.",
            variant(_attend, mask_mode="after-add")),
]

_SDPA_HINT = ("weights = softmax(q @ k.transpose(-2, -1) / sqrt(d_k) + mask) along the last axis, "
              "output = weights @ v; use transpose(-2, -1) and @ so any leading batch dimensions work "
              "(k.T and torch.mm do not). NaN on large scores means a softmax without max-subtraction.")

register(
    __name__,
    Check(name="sdpa", cases=_sdpa_cases, expected=_sdpa_oracle,
          mistakes=[*_SCALE_MISTAKES, _K_NOT_TRANSPOSED], hint=_SDPA_HINT),
    Check(name="sdpa_masked", cases=_sdpa_masked_cases, expected=_sdpa_oracle,
          mistakes=_MASK_MISTAKES + _SCALE_MISTAKES,
          hint=_SDPA_HINT + " Build nothing from the mask: it is already additive and broadcastable."),
    Check(name="sdpa_fully_masked", guard=True, cases=_sdpa_fully_masked_cases,
          expected=lambda c: kit.raises("a query row whose keys are all masked has nothing to attend to"),
          hint="A query whose keys are all masked has nothing to average: its softmax would be 0/0 = NaN. "
               "After adding the mask, check whether any row of the scores is -inf everywhere "
               "(torch.isneginf(scores).all(dim=-1).any()) and raise ValueError if so."),
)


# -------------------------------------------------------- attention head ---

def _head_case(rng: np.random.Generator, batch: int, n_q: int, n_k: int | None, d_in: int, d_k: int,
               d_v: int | None, mask: torch.Tensor | None = None, note: str = "") -> Case:
    """AttentionHead(d_in, d_k[, d_v]); meta: the input x, the context (None: self-attention),
    the mask and the weights to copy in."""
    x = randn(rng, batch, n_q, d_in)
    context = None if n_k is None else randn(rng, batch, n_k, d_in)
    weights = {f"W_{p}.weight": randn(rng, width, d_in) / math.sqrt(d_in)
               for p, width in (("q", d_k), ("k", d_k), ("v", d_v or d_k))}
    weights.update({f"W_{p}.bias": None for p in "qkv"})
    kind = "self-attention" if context is None else f"cross-attention to a context {kit.shape_of(context)}"
    label = (f"AttentionHead(d_in={d_in}, d_k={d_k}, d_v={d_v}), x {kit.shape_of(x)}, {kind}"
             + (f", {note}" if note else ""))
    args = (d_in, d_k) if d_v is None else (d_in, d_k, d_v)
    return Case(label, args, meta={"x": x, "context": context, "mask": mask, "weights": weights})


def _head_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        return [_head_case(rng, 2, 3, None, 6, 4, 5), _head_case(rng, 1, 2, 4, 6, 3, None)]
    return [
        _head_case(rng, 3, 5, None, 8, 4, 6, mask=causal_mask(5), note="causal mask"),
        _head_case(rng, 2, 3, 7, 10, 6, 2, mask=padding_mask([7, 4], 7), note="padding mask (2, 1, 7)"),
        _head_case(rng, 2, 4, None, 32, 2, None),
        _head_case(rng, 1, 6, 3, 5, 7, 9),
        _head_case(rng, 4, 1, None, 12, 12, 3),
    ]


def _projections(case: Case, q_from: str = "x", kv_from: str = "context", swap: bool = False) -> tuple:
    m, w = case.meta, case.meta["weights"]
    src = {"x": m["x"], "context": m["x"] if m["context"] is None else m["context"]}
    wq, wk = (w["W_k.weight"], w["W_q.weight"]) if swap else (w["W_q.weight"], w["W_k.weight"])
    return F.linear(src[q_from], wq), F.linear(src[kv_from], wk), F.linear(src[kv_from], w["W_v.weight"])


def _head(case: Case, *, scale_by: str | None = "d_k", masked: bool = True, **sources: Any) -> Any:
    """The head's (output, weights) in both modes; knobs: the sources of queries and keys/values,
    W_q and W_k swapped, scores divided by sqrt(d_in) or not at all, the mask not passed on."""
    q, k, v = _projections(case, **sources)
    d_in, d_k = case.args[:2]
    result = _attention(q, k, v, case.meta["mask"] if masked else None,
                        scale=math.sqrt({"d_k": d_k, "d_in": d_in, None: 1}[scale_by]))
    return NOT_APPLICABLE if result is NOT_APPLICABLE else kit.both_modes(result)


def _head_oracle(case: Case) -> Any:
    q, k, v = _projections(case)
    mask = case.meta["mask"]
    return kit.both_modes((F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                                _attention(q, k, v, mask)[1]))


def _param_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    def draw(low: int, high: int) -> int:  # an integer in [low, high]
        return int(rng.integers(low, high + 1))
    sizes = [(draw(5, 8), draw(2, 4), draw(5, 7)), (draw(6, 10), draw(2, 5), None)] if not hidden else \
        [(draw(12, 20), draw(3, 6), draw(7, 10)), (draw(4, 6), draw(7, 9), None), (draw(10, 14), 2, draw(3, 5))]
    return [Case(f"AttentionHead(d_in={a}, d_k={b}, d_v={c})", (a, b) if c is None else (a, b, c))
            for a, b, c in sizes]


def _param_oracle(case: Case) -> dict[str, Any]:
    d_in, d_k, d_v = (*case.args, None)[:3]
    return {f"W_{p}.weight": ((width, d_in), "float32") for p, width in (("q", d_k), ("k", d_k), ("v", d_v or d_k))}


register(
    __name__,
    Check(
        name="attention_head", cases=_head_cases, expected=_head_oracle,
        mistakes=[
            Mistake("Did you ignore `context`? In cross-attention the keys and values come from the "
                    "context; only the queries come from x.", variant(_head, kv_from="x")),
            *(Mistake("Did you take the queries from the context? Queries come from x (the sequence that "
                      "asks), keys and values from the context.", variant(_head, q_from="context", kv_from=kv))
              for kv in ("context", "x")),
            Mistake("Did you pass the mask on to scaled_dot_product_attention?", variant(_head, masked=False)),
            Mistake("Did you swap W_q and W_k?", variant(_head, swap=True)),
            Mistake("Did you scale by sqrt(d_in)? The scale uses the key width d_k, not the input width.",
                    variant(_head, scale_by="d_in")),
            Mistake("Did you forget to scale the scores by 1/sqrt(d_k)?", variant(_head, scale_by=None)),
        ],
        hint="q = W_q(x), k = W_k(context), v = W_v(context) (context = x when None), then your "
             "scaled_dot_product_attention(q, k, v, mask). The projections have no bias. The head has no "
             "dropout: " + kit.same_in_both_modes("head") + " If your "
             "scaled_dot_product_attention fails its own tests, fix it first.",
    ),
    Check(
        name="attention_head_parameters", guard=True, cases=_param_cases, expected=_param_oracle,
        hint="The head holds exactly three nn.Linear layers without bias, in float32: W_q and W_k map "
             "d_in -> d_k, W_v maps d_in -> d_v (d_k when d_v is None). Did you add a bias, or size W_v by d_k?",
    ),
)
