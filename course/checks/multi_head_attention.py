"""Checks for chapter 5: splitting heads, merging them, and multi-head attention.

Oracles:

* `split_heads` / `merge_heads`: a different formulation of the same layout
  (``torch.split`` + ``torch.stack`` and ``torch.unbind`` + ``torch.cat``), so
  no reshape or transpose of ours is trusted.
* `MultiHeadAttention`: ``torch.nn.MultiheadAttention`` in float64 with the
  student's weights copied in (per-head weights from
  ``average_attn_weights=False``). PyTorch's module cannot take queries whose
  width differs from ``d_model``; for those cases the oracle is `_mha64`, an
  independent float64 einsum implementation that never splits tensors by
  reshaping (it indexes the weight matrices head by head). The development
  tests of the chapter check that both oracles agree.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .framework import Case, Check, Mistake, Raises, default_call, randn, register

LAYERS = ("W_q", "W_k", "W_v", "W_o")


# ----------------------------------------------------------- split / merge ---

def _split_oracle(x: torch.Tensor, h: int) -> torch.Tensor:
    return torch.stack(x.split(x.shape[-1] // h, dim=-1), dim=1)


def _merge_oracle(x: torch.Tensor) -> torch.Tensor:
    return torch.cat(x.unbind(dim=1), dim=-1)


def _split_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        shapes = [(1, 3, 4, 2), (2, 4, 6, 3)]
        bad = [(1, 2, 6, 4)]
    else:
        shapes = [(3, 5, 12, 4), (2, 7, 8, 8), (4, 1, 6, 2), (2, 3, 5, 1), (2, 4, 16, 4), (1, 6, 6, 6)]
        bad = [(2, 3, 10, 4), (1, 2, 4, 8)]
    cases = [Case(f"x of shape ({b}, {n}, {d}), num_heads={h}", (randn(rng, b, n, d), h))
             for b, n, d, h in shapes]
    cases += [Case(f"x of shape ({b}, {n}, {d}), num_heads={h} (does not divide d_model)",
                   (randn(rng, b, n, d), h)) for b, n, d, h in bad]
    return cases


def _split_expected(case: Case):
    x, h = case.args
    if x.shape[-1] % h:
        return Raises(("ValueError",), f"d_model = {x.shape[-1]} is not divisible by num_heads = {h}")
    return _split_oracle(x, h)


def _split_wrong(layout):
    """A wrong split as a mistake; None on cases that must raise (nothing to compare)."""
    def output(case: Case):
        x, h = case.args
        b, n, d = x.shape
        return None if d % h else layout(x, b, n, h, d // h)
    return output


_split_no_transpose = _split_wrong(lambda x, b, n, h, dh: x.reshape(b, h, n, dh))
_split_transpose_forgotten = _split_wrong(lambda x, b, n, h, dh: x.reshape(b, n, h, dh))
_split_interleaved = _split_wrong(lambda x, b, n, h, dh: x.reshape(b, n, dh, h).permute(0, 3, 1, 2))
_split_batch_mixed = _split_wrong(
    lambda x, b, n, h, dh: x.reshape(b, n, h, dh).permute(2, 0, 1, 3).reshape(b, h, n, dh))


def _split_unchecked(case: Case):
    """No divisibility check: on a bad case reshape itself fails (RuntimeError)."""
    x, h = case.args
    b, n, d = x.shape
    if d % h == 0:
        return None
    return x.reshape(b, n, h, d // h)


def _merge_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    shapes = [(1, 2, 3, 2), (2, 3, 4, 2)] if not hidden else \
        [(3, 4, 5, 3), (2, 8, 1, 4), (2, 1, 6, 5), (2, 4, 4, 4), (2, 2, 7, 3)]
    return [Case(f"x of shape ({b}, {h}, {n}, {dh}): batch {b}, {h} heads, seq {n}, d_head {dh}",
                 (randn(rng, b, h, n, dh),)) for b, h, n, dh in shapes]


def _merge_no_transpose(case: Case) -> torch.Tensor:
    (x,) = case.args
    b, h, n, dh = x.shape
    return x.reshape(b, n, h * dh)


def _merge_interleaved(case: Case) -> torch.Tensor:
    (x,) = case.args
    b, h, n, dh = x.shape
    return x.permute(0, 2, 3, 1).reshape(b, n, h * dh)


def _merge_batch_mixed(case: Case) -> torch.Tensor:
    (x,) = case.args
    b, h, n, dh = x.shape
    return x.reshape(h, b, n, dh).permute(1, 2, 0, 3).reshape(b, n, h * dh)


# ------------------------------------------------------ multi-head attention ---

def _params(rng: np.random.Generator, d_model: int, d_q: int, d_kv: int, bias: bool) -> dict:
    """Weights in nn.Linear's layout (out_features, in_features), scaled so
    that scores stay moderate (a saturated softmax would hide scaling bugs)."""
    p = {"W_q": randn(rng, d_model, d_q) / math.sqrt(d_q),
         "W_k": randn(rng, d_model, d_kv) / math.sqrt(d_kv),
         "W_v": randn(rng, d_model, d_kv) / math.sqrt(d_kv),
         "W_o": randn(rng, d_model, d_model) / math.sqrt(d_model)}
    for name in LAYERS:
        p[name + ".bias"] = 0.5 * randn(rng, d_model) if bias else None
    return p


def _causal(n: int) -> torch.Tensor:
    return torch.triu(torch.full((n, n), float("-inf")), diagonal=1)


def _padding(rng: np.random.Generator, b: int, n_k: int) -> torch.Tensor:
    """(b, 1, 1, n_k): each sequence keeps a random number >= 1 of real keys."""
    keep = rng.integers(1, n_k + 1, size=b)
    keep[0] = n_k - 1 if n_k > 1 else 1  # at least one sequence is padded
    mask = torch.zeros(b, 1, 1, n_k)
    for i, k in enumerate(keep):
        mask[i, ..., int(k):] = float("-inf")
    return mask


def _mha_case(rng: np.random.Generator, label: str, *, b: int, n_q: int, n_k: int | None = None,
              d_model: int, h: int, d_q: int | None = None, d_kv: int | None = None,
              bias: bool = True, mask: str | None = None, call: str = "self") -> Case:
    n_k = n_q if call == "self" else n_k
    dq, dkv = d_q or d_model, d_kv or d_model
    if call == "self" and dq != dkv:
        raise ValueError("self-attention needs d_q_in == d_kv_in")
    cfg = dict(d_model=d_model, num_heads=h, d_q_in=d_q, d_kv_in=d_kv, bias=bias, call=call)
    params = _params(rng, d_model, dq, dkv, bias)
    query = randn(rng, b, n_q, dq)
    key = query if call == "self" else randn(rng, b, n_k, dkv)
    value = key if call in ("self", "key only") else randn(rng, b, n_k, dkv)
    m = None
    if mask == "causal":
        m = _causal(n_q)
    elif mask == "padding":
        m = _padding(rng, b, n_k)
    elif mask == "random":  # any additive float mask, (n_q, n_k), finite values
        m = torch.from_numpy(rng.uniform(-3, 0, size=(n_q, n_k)).astype(np.float32))
    return Case(label, (cfg, params, query, key, value, m))


def _build(cls, cfg: dict):
    return cls(cfg["d_model"], cfg["num_heads"], d_q_in=cfg["d_q_in"], d_kv_in=cfg["d_kv_in"],
               bias=cfg["bias"])


def _load(module, cfg: dict, params: dict) -> None:
    """Copy the case's weights into the student's layers, checking shapes first."""
    d_model = cfg["d_model"]
    ins = {"W_q": (cfg["d_q_in"] or d_model, "d_q_in"), "W_k": (cfg["d_kv_in"] or d_model, "d_kv_in"),
           "W_v": (cfg["d_kv_in"] or d_model, "d_kv_in"), "W_o": (d_model, "d_model")}
    for name in LAYERS:
        layer = getattr(module, name, None)
        if layer is None or not hasattr(layer, "weight"):
            raise AttributeError(f"the module has no nn.Linear attribute {name} (the contract asks for "
                                 "W_q, W_k, W_v and W_o)")
        d_in, what = ins[name]
        if tuple(layer.weight.shape) != (d_model, d_in):
            raise ValueError(f"{name}.weight has shape {tuple(layer.weight.shape)}; with d_model={d_model}, "
                             f"d_q_in={cfg['d_q_in']}, d_kv_in={cfg['d_kv_in']} it should be "
                             f"{(d_model, d_in)} = (d_model, {what}), as nn.Linear({what}, d_model) stores it")
        want_bias = params[name + ".bias"]
        has_bias = getattr(layer, "bias", None) is not None
        if has_bias != (want_bias is not None):
            raise ValueError(f"{name} {'has' if has_bias else 'lacks'} a bias, but bias={cfg['bias']}")
        with torch.no_grad():
            layer.weight.copy_(params[name])
            if has_bias:
                layer.bias.copy_(want_bias)


def _forward(module, cfg: dict, query, key, value, mask):
    if cfg["call"] == "self":
        return module(query, mask=mask)
    if cfg["call"] == "key only":
        return module(query, key, mask=mask)
    return module(query, key, value, mask=mask)


def _call_mha(cls, case: Case):
    cfg, params, query, key, value, mask = case.args
    module = _build(cls, cfg)
    _load(module, cfg, params)
    if hasattr(module, "eval"):
        module.eval()
    with torch.no_grad():
        result = _forward(module, cfg, query, key, value, mask)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise TypeError(f"forward must return a tuple (output, weights), got {type(result).__name__}")
    return tuple(result)


def _torch_mha(case: Case):
    """nn.MultiheadAttention (float64) with the case's weights: the oracle."""
    cfg, p, query, key, value, mask = case.args
    d_model, h, bias = cfg["d_model"], cfg["num_heads"], cfg["bias"]
    if cfg["d_q_in"] not in (None, d_model):
        return _mha64(case)
    d_kv = cfg["d_kv_in"] or d_model
    ref = nn.MultiheadAttention(d_model, h, bias=bias, kdim=d_kv, vdim=d_kv, batch_first=True,
                                dtype=torch.float64)
    with torch.no_grad():
        if ref._qkv_same_embed_dim:
            ref.in_proj_weight.copy_(torch.cat([p["W_q"], p["W_k"], p["W_v"]]))
        else:
            ref.q_proj_weight.copy_(p["W_q"])
            ref.k_proj_weight.copy_(p["W_k"])
            ref.v_proj_weight.copy_(p["W_v"])
        ref.out_proj.weight.copy_(p["W_o"])
        if bias:
            ref.in_proj_bias.copy_(torch.cat([p["W_q.bias"], p["W_k.bias"], p["W_v.bias"]]))
            ref.out_proj.bias.copy_(p["W_o.bias"])
    ref.eval()
    b, n_q, n_k = query.shape[0], query.shape[1], key.shape[1]
    attn_mask = None
    if mask is not None:  # PyTorch wants (batch * heads, n_q, n_k), batch-major
        attn_mask = mask.double().expand(b, h, n_q, n_k).reshape(b * h, n_q, n_k)
    with torch.no_grad():
        out, w = ref(query.double(), key.double(), value.double(), attn_mask=attn_mask,
                     need_weights=True, average_attn_weights=False)
    return out.float(), w.float()


def _mha64(case: Case, mistake: str | None = None):
    """Independent float64 multi-head attention, written head by head with
    einsum over the weight matrices. `mistake` makes a known wrong variant."""
    cfg, p, query, key, value, mask = case.args
    d_model, h = cfg["d_model"], cfg["num_heads"]
    d_head = d_model // h
    if cfg["call"] == "self":
        key = value = query
    elif cfg["call"] == "key only":
        value = key
    x_q, x_k, x_v = query.double(), key.double(), value.double()
    b, n_q = x_q.shape[0], x_q.shape[1]

    def bias(name):
        t = p[name + ".bias"]
        return torch.zeros(d_model, dtype=torch.float64) if t is None else t.double()

    def project(x, name):  # (b, n, d_in) -> (b, h, n, d_head), head i = output rows i*d_head..
        w = p[name].double().reshape(h, d_head, -1)
        return torch.einsum("bni,hdi->bhnd", x, w) + bias(name).reshape(h, 1, d_head)

    def full(x, name):  # (b, n, d_in) -> (b, n, d_model)
        return x @ p[name].double().T + bias(name)

    if mistake == "split without transpose":
        q, k, v = (full(x, n).reshape(b, h, -1, d_head) for x, n in
                   ((x_q, "W_q"), (x_k, "W_k"), (x_v, "W_v")))
    elif mistake == "heads mixed across the batch":
        q, k, v = (full(x, n).reshape(h, b, -1, d_head).transpose(0, 1) for x, n in
                   ((x_q, "W_q"), (x_k, "W_k"), (x_v, "W_v")))
    elif mistake and mistake.startswith("one wide head"):
        q, k, v = (full(x, n).unsqueeze(1) for x, n in ((x_q, "W_q"), (x_k, "W_k"), (x_v, "W_v")))
    else:
        q, k, v = project(x_q, "W_q"), project(x_k, "W_k"), project(x_v, "W_v")
    scale = math.sqrt(d_model if mistake and mistake.startswith(("scale by d_model", "one wide head"))
                      else q.shape[-1])
    scores = torch.einsum("bhnd,bhmd->bhnm", q, k) / scale
    if mask is not None:
        scores = scores + mask.double()
    weights = torch.softmax(scores, dim=-1)
    heads = torch.einsum("bhnm,bhmd->bhnd", weights, v)
    if mistake == "merge without transpose":
        merged = heads.reshape(b, n_q, d_model)
    else:
        merged = torch.einsum("bhnd->bnhd", heads).reshape(b, n_q, -1)
    if mistake == "no W_o":
        out = merged
    else:
        out = merged @ p["W_o"].double().T + bias("W_o")
    if mistake == "one wide head, weights squeezed":
        weights = weights.squeeze(1)
    return out.float(), weights.float()


def _mha_mistakes() -> list[Mistake]:
    def variant(name):
        return lambda case: _mha64(case, name)

    wide = ("Did you attend with the full-width projections (one head of width d_model)? Split them "
            "into num_heads heads before attending; weights should be (batch, num_heads, n_q, n_k).")
    return [
        Mistake("Did you split the heads with a reshape straight to (batch, num_heads, seq, d_head)? "
                "Without the transpose each head's rows mix features of different tokens: reshape to "
                "(batch, seq, num_heads, d_head), then transpose(1, 2).", variant("split without transpose")),
        Mistake("Did you merge the heads with a reshape straight to (batch, seq, d_model)? Transpose back "
                "to (batch, seq, num_heads, d_head) first, or tokens get scrambled.",
                variant("merge without transpose")),
        Mistake("Did you forget the output projection W_o? The concatenated heads must go through "
                "W_o (with its bias) before they are returned.", variant("no W_o")),
        Mistake("Did you scale the scores by sqrt(d_model)? Each head works in d_head = d_model / num_heads "
                "dimensions, so its scores are divided by sqrt(d_head).", variant("scale by d_model")),
        Mistake(wide, variant("one wide head")),
        Mistake(wide, variant("one wide head, weights squeezed")),
        Mistake("Did you reshape to (num_heads, batch, ...) (or (batch * num_heads, ...)) in the wrong order? "
                "That mixes heads of different sequences in the batch: keep the batch dimension first.",
                variant("heads mixed across the batch")),
    ]


MHA_HINT = ("Follow the recipe: project with W_q, W_k, W_v; split_heads; attend with the leading "
            "(batch, num_heads) dimensions; merge_heads; project with W_o. Return (output, weights).")


def _self_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        specs = [dict(b=1, n_q=3, d_model=4, h=2),
                 dict(b=2, n_q=4, d_model=8, h=4, mask="causal")]
    else:
        specs = [dict(b=3, n_q=5, d_model=8, h=2),
                 dict(b=2, n_q=7, d_model=16, h=8, mask="causal"),
                 dict(b=2, n_q=4, d_model=12, h=4, mask="padding"),
                 dict(b=4, n_q=3, d_model=6, h=1),
                 dict(b=2, n_q=6, d_model=8, h=4, bias=False, mask="random"),
                 dict(b=1, n_q=1, d_model=8, h=2)]
    cases = []
    for s in specs:
        label = (f"self-attention: batch {s['b']}, seq {s['n_q']}, d_model {s['d_model']}, "
                 f"{s['h']} heads" + (f", {s['mask']} mask" if s.get("mask") else "")
                 + (", bias=False" if s.get("bias") is False else ""))
        cases.append(_mha_case(rng, label, **s))
    return cases


def _cross_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        specs = [dict(b=2, n_q=3, n_k=5, d_model=8, h=2, d_kv=6),
                 dict(b=2, n_q=4, n_k=2, d_model=8, h=4, mask="padding")]
    else:
        specs = [dict(b=3, n_q=5, n_k=7, d_model=16, h=8, d_kv=10, mask="padding"),
                 dict(b=2, n_q=1, n_k=6, d_model=8, h=2),
                 dict(b=2, n_q=6, n_k=3, d_model=12, h=4, d_kv=5, mask="random"),
                 dict(b=1, n_q=4, n_k=9, d_model=8, h=1, d_kv=3),
                 dict(b=2, n_q=3, n_k=5, d_model=8, h=4, d_kv=7, bias=False),
                 dict(b=2, n_q=4, n_k=6, d_model=8, h=2, d_kv=5, call="key only", mask="padding")]
    cases = []
    for s in specs:
        s.setdefault("call", "cross")
        label = (f"cross-attention: batch {s['b']}, {s['n_q']} queries, {s['n_k']} keys, d_model "
                 f"{s['d_model']}, {s['h']} heads, d_kv_in {s.get('d_kv')}"
                 + (f", {s['mask']} mask" if s.get("mask") else "")
                 + (", bias=False" if s.get("bias") is False else "")
                 + (", value not given (defaults to key)" if s["call"] == "key only" else ""))
        cases.append(_mha_case(rng, label, **s))
    return cases


def _width_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        specs = [dict(b=2, n_q=3, n_k=4, d_model=8, h=2, d_q=5, d_kv=6, call="cross")]
    else:
        specs = [dict(b=2, n_q=5, d_model=8, h=4, d_q=6, d_kv=6, call="self", mask="causal"),
                 dict(b=3, n_q=4, n_k=6, d_model=16, h=8, d_q=3, d_kv=7, call="cross", mask="padding"),
                 dict(b=2, n_q=3, n_k=5, d_model=12, h=2, d_q=20, call="cross"),
                 dict(b=1, n_q=6, n_k=2, d_model=8, h=1, d_q=4, d_kv=9, call="cross", bias=False)]
    cases = []
    for s in specs:
        label = (f"{s['call']}-attention: batch {s['b']}, d_model {s['d_model']}, {s['h']} heads, "
                 f"d_q_in {s.get('d_q')}, d_kv_in {s.get('d_kv')}"
                 + (f", {s['mask']} mask" if s.get("mask") else "")
                 + (", bias=False" if s.get("bias") is False else ""))
        cases.append(_mha_case(rng, label, **s))
    return cases


# the layer shapes a module must have, and the configurations it must refuse

def _layer_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    configs = [(8, 2, None, None, True), (8, 4, 5, 6, True), (6, 4, None, None, True)] if not hidden else \
        [(16, 8, None, 10, True), (12, 3, 7, None, False), (8, 1, 3, 3, True), (512, 8, None, None, True),
         (10, 4, None, None, True), (6, 12, None, None, True), (9, 2, 4, 4, False)]
    return [Case(f"MultiHeadAttention({d}, {h}, d_q_in={dq}, d_kv_in={dkv}, bias={bias})"
                 + (f" ({h} heads do not divide d_model = {d})" if d % h else ""),
                 (d, h, dq, dkv, bias)) for d, h, dq, dkv, bias in configs]


def _layer_shapes(cls, case: Case) -> dict:
    d, h, dq, dkv, bias = case.args
    module = cls(d, h, d_q_in=dq, d_kv_in=dkv, bias=bias)
    shapes = {}
    for name in LAYERS:
        layer = getattr(module, name, None)
        if layer is None or not hasattr(layer, "weight"):
            raise AttributeError(f"the module has no nn.Linear attribute {name}")
        shapes[name] = [list(layer.weight.shape),
                        None if getattr(layer, "bias", None) is None else list(layer.bias.shape)]
    return shapes


def _expected_shapes(case: Case, q_in=None, kv_in=None):
    d, h, dq, dkv, bias = case.args
    if d % h:
        return Raises(("ValueError",), f"d_model = {d} is not divisible by num_heads = {h}")
    q_in = q_in if q_in is not None else (dq or d)
    kv_in = kv_in if kv_in is not None else (dkv or d)
    b = [d] if bias else None
    return {"W_q": [[d, q_in], b], "W_k": [[d, kv_in], b], "W_v": [[d, kv_in], b], "W_o": [[d, d], b]}


def _shapes_q_ignored(case: Case):
    d, h = case.args[:2]
    return None if d % h else _expected_shapes(case, q_in=d)


def _shapes_kv_from_q(case: Case):
    d, h, dq, _, _ = case.args
    return None if d % h else _expected_shapes(case, kv_in=dq or d)


def _shapes_kv_ignored(case: Case):
    d, h = case.args[:2]
    return None if d % h else _expected_shapes(case, kv_in=d)


register(
    Check(
        name="split_heads",
        cases=_split_cases,
        expected=_split_expected,
        call=default_call,
        mistakes=[
            Mistake("Did you reshape straight to (batch, num_heads, seq, d_head)? That reads the memory "
                    "in the wrong order, so a head's rows mix features of different tokens. Reshape to "
                    "(batch, seq, num_heads, d_head) first, then transpose(1, 2).", _split_no_transpose),
            Mistake("Did you forget the transpose? After reshaping to (batch, seq, num_heads, d_head), "
                    "swap dimensions 1 and 2 to get (batch, num_heads, seq, d_head).",
                    _split_transpose_forgotten),
            Mistake("Each head takes a contiguous block of d_head features (head 0: features 0..d_head-1). "
                    "Did you reshape to (..., d_head, num_heads), which deals features out to heads in turn?",
                    _split_interleaved),
            Mistake("Did you move the heads in front of the batch ((num_heads, batch, ...)) and then reshape? "
                    "That mixes heads of different sequences in the batch; keep batch first and transpose "
                    "only dimensions 1 and 2.", _split_batch_mixed),
            Mistake("Did you rely on reshape to fail? Check d_model % num_heads yourself and raise a "
                    "ValueError that says what is wrong.", _split_unchecked),
        ],
        hint="Head i must hold features i*d_head .. (i+1)*d_head - 1 of every token, in token order: "
             "x.reshape(batch, seq, num_heads, d_head).transpose(1, 2). Raise ValueError when "
             "num_heads does not divide d_model.",
    ),
    Check(
        name="merge_heads",
        cases=_merge_cases,
        expected=lambda c: _merge_oracle(c.args[0]),
        mistakes=[
            Mistake("Did you reshape straight to (batch, seq, d_model)? Transpose back to "
                    "(batch, seq, num_heads, d_head) first (transpose(1, 2)), or tokens get scrambled.",
                    _merge_no_transpose),
            Mistake("Did you put the features in the order (d_head, num_heads)? Head 0's d_head features "
                    "come first, then head 1's, and so on.", _merge_interleaved),
            Mistake("Did you reshape to (num_heads, batch, ...)? That mixes heads of different sequences "
                    "in the batch.", _merge_batch_mixed),
        ],
        hint="merge_heads undoes split_heads: x.transpose(1, 2) gives (batch, seq, num_heads, d_head), "
             "then reshape to (batch, seq, num_heads * d_head).",
    ),
    Check(
        name="mha_layers",
        cases=_layer_cases,
        expected=_expected_shapes,
        call=_layer_shapes,
        mistakes=[
            Mistake("Did you size W_q as d_model x d_model? Queries come in with width d_q_in when it is "
                    "given: nn.Linear(d_q_in or d_model, d_model).", _shapes_q_ignored),
            Mistake("Did you use d_q_in for W_k or W_v? Keys and values come from the other sequence, of "
                    "width d_kv_in: nn.Linear(d_kv_in or d_model, d_model).", _shapes_kv_from_q),
            Mistake("Did you ignore d_kv_in? W_k and W_v take inputs of width d_kv_in when it is given.",
                    _shapes_kv_ignored),
        ],
        hint="W_q = nn.Linear(d_q_in or d_model, d_model, bias), W_k and W_v = nn.Linear(d_kv_in or "
             "d_model, d_model, bias), W_o = nn.Linear(d_model, d_model, bias); raise ValueError in "
             "__init__ when num_heads does not divide d_model.",
    ),
    Check(
        name="mha_self_attention",
        cases=_self_cases,
        expected=_torch_mha,
        call=_call_mha,
        mistakes=_mha_mistakes(),
        hint=MHA_HINT,
    ),
    Check(
        name="mha_cross_attention",
        cases=_cross_cases,
        expected=_torch_mha,
        call=_call_mha,
        mistakes=_mha_mistakes(),
        hint=MHA_HINT + " Queries come from `query`; keys and values from `key` and `value`, whose "
             "length may differ.",
    ),
    Check(
        name="mha_input_widths",
        cases=_width_cases,
        expected=_mha64,
        call=_call_mha,
        mistakes=_mha_mistakes(),
        hint=MHA_HINT + " Here the query width d_q_in and the key/value width d_kv_in differ from d_model.",
    ),
)
