"""9.7 the key-value cache: cached_attention (one attention layer) and decode_step (the whole ToyLM)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from course.reference.attention import scaled_dot_product_attention
from course.reference.multi_head_attention import (
    MultiHeadAttention,
    merge_heads,
    split_heads,
)
from course.reversal import LM_VOCAB, ToyLM

from ..framework import Case, Check, Mistake, register
from ..kit import causal_mask, randn, variant


def _kv(mha: torch.nn.Module, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return split_heads(mha.W_k(h), mha.num_heads), split_heads(mha.W_v(h), mha.num_heads)


def _attend(mha: torch.nn.Module, x: torch.Tensor, past: Any, *, mask: str = "causal", order: str = "past, new",
            use_past: bool = True) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Cached attention written out, with knobs for the usual slips."""
    q = split_heads(mha.W_q(x), mha.num_heads)
    k, v = _kv(mha, x)
    if past is not None and use_past:
        pk, pv = past
        k, v = (torch.cat([pk, k], 2), torch.cat([pv, v], 2)) if order == "past, new" else \
               (torch.cat([k, pk], 2), torch.cat([v, pv], 2))
    n, total = x.shape[1], k.shape[2]
    m = (torch.triu(torch.full((n, total), float("-inf")), diagonal=total - n + 1) if mask == "causal"
         else torch.triu(torch.full((n, total), float("-inf")), diagonal=1) if mask == "from zero" else None)
    out, _ = scaled_dot_product_attention(q, k, v, m)
    return mha.W_o(merge_heads(out)), (k, v)


# ----------------------------------------------------- cached_attention ---

def _attn_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    # (batch, cached positions t, new positions n, d_model, heads): t = 0 (no cache), n = 1 (one step) and
    # n > 1 (the mask among the new positions matters) in each set; the cache's and the step's lengths
    # move with the seed within their kind
    specs = [(1, 3, 1, 8, 2), (2, 0, 3, 8, 2), (1, 2, 3, 4, 1)] if not hidden else [
        (2, 5, 1, 12, 3), (3, 0, 4, 8, 4), (1, 4, 2, 16, 2), (2, 6, 3, 8, 1), (1, 1, 1, 6, 3), (2, 3, 4, 10, 5)]
    cases = []
    for batch, t, n, d, h in specs:
        t = t + int(rng.integers(0, 3)) if t else 0
        n = n + int(rng.integers(0, 2)) if n > 1 else n
        torch.manual_seed(int(rng.integers(2**31)))
        mha = MultiHeadAttention(d, h)
        x = randn(rng, batch, t + n, d)
        with torch.no_grad():
            past = _kv(mha, x[:, :t]) if t else None
        label = (f"MultiHeadAttention({d}, {h}), {n} new position{'s' * (n > 1)}, " +
                 (f"a cache of {t} positions (k, v: {tuple(past[0].shape)})" if t else "no cache (past=None)") +
                 f", batch {batch}")
        # the kernel gets the module, the new positions and the cache only; the earlier inputs the
        # cache was made from stay on the trusted side, for the oracle's full forward pass
        cases.append(Case(label, (mha, x[:, t:].clone(), past), aid={"earlier": x[:, :t].clone()}))
    return cases


def _attn(case: Case) -> Any:
    """The full causal forward pass over the earlier inputs and the new ones; its last n rows."""
    mha, new, earlier = case.args[0], case.args[1], case.aid["earlier"]
    x, t = torch.cat([earlier, new], dim=1), earlier.shape[1]
    with torch.no_grad():
        out = mha(x, mask=causal_mask(x.shape[1]))[0][:, t:]
        return out, _kv(mha, x)


def _attn_slip(case: Case, **knobs: Any) -> Any:
    with torch.no_grad():
        return _attend(*case.args, **knobs)


# ---------------------------------------------------------- decode_step ---

def _step_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    # (batch, cached positions t, new tokens n), as for cached_attention
    specs = [(2, 4, 1), (1, 0, 5), (2, 3, 2)] if not hidden else [
        (3, 6, 1), (2, 0, 7), (1, 9, 3), (2, 1, 1), (4, 5, 2)]
    cases = []
    for batch, t, n in specs:
        t = t + int(rng.integers(0, 3)) if t else 0
        n = n + int(rng.integers(0, 2)) if n > 1 else n
        torch.manual_seed(int(rng.integers(2**31)))
        model = ToyLM(LM_VOCAB, d_model=16, num_heads=2, d_ff=32, num_layers=2).eval()
        ids = torch.from_numpy(rng.integers(0, LM_VOCAB.size, size=(batch, t + n))).long()
        cache = _full(model, ids[:, :t])[1] if t else None
        label = (f"ToyLM(d_model=16, 2 heads, 2 layers), {n} new token{'s' * (n > 1)}, " +
                 (f"a cache of {t} positions" if t else "no cache") + f", batch {batch}")
        # the kernel gets the model, the new tokens and the cache only; the earlier tokens stay here
        cases.append(Case(label, (model, ids[:, t:].clone(), cache), aid={"earlier": ids[:, :t].clone()}))
    return cases


def _full(model: ToyLM, ids: torch.Tensor) -> tuple[torch.Tensor, list]:
    """The full forward pass of the whole sequence under a causal mask, and every layer's keys and values."""
    with torch.no_grad():
        x = model.positions(model.embedding(ids))
        cache = []
        for layer in model.layers:
            cache.append(_kv(layer.self_attn, layer.norm1(x)))
            x = layer(x, causal_mask(ids.shape[1]))
        return model.output(model.norm(x)), cache


def _step(case: Case) -> Any:
    """The full forward pass over the earlier tokens and the new ones; the logits of the last n."""
    earlier = case.aid["earlier"]
    logits, cache = _full(case.args[0], torch.cat([earlier, case.args[1]], dim=1))
    return logits[:, earlier.shape[1]:], cache


def _step_slip(case: Case, *, positions: str = "offset", **knobs: Any) -> Any:
    model, ids, cache = case.args
    start = 0 if cache is None or positions == "from zero" else cache[0][0].shape[2]
    with torch.no_grad():
        x = model.embedding(ids) + (model.positions.pe[start:start + ids.shape[1]] if positions != "none" else 0)
        new = []
        for i, layer in enumerate(model.layers):
            out, kv = _attend(layer.self_attn, layer.norm1(x), None if cache is None else cache[i], **knobs)
            x = x + out
            x = x + layer.ffn(layer.norm2(x))
            new.append(kv)
        return model.output(model.norm(x)), new


_NO_MASK = ("Did you leave out the causal mask among the new positions? With n > 1 new tokens, new position i may "
            "see the t cached ones and new positions 0 .. i only: mask = triu(full((n, t + n), -inf), "
            "diagonal=t + 1).")
_ORDER = ("Did you put the new keys before the cached ones? Concatenate in time order along the sequence axis "
          "(dim=2): torch.cat([past_k, k], dim=2).")
_PAST = "Did you ignore the cache? The new positions attend to the cached keys and values too."
_MASK_FROM_ZERO = ("Did you build the causal mask as if the new positions came first? New position i sits at "
                   "position t + i: mask = triu(full((n, t + n), -inf), diagonal=t + 1).")

register(
    __name__,
    Check(name="cached_attention", cases=_attn_cases, expected=_attn,
          mistakes=[Mistake(_NO_MASK, variant(_attn_slip, mask="none")),
                    Mistake(_MASK_FROM_ZERO, variant(_attn_slip, mask="from zero")),
                    Mistake(_ORDER, variant(_attn_slip, order="new, past")),
                    Mistake(_PAST, variant(_attn_slip, use_past=False))],
          hint="cached_attention: q, k, v from x with the module's W_q, W_k, W_v and split_heads; append k and v "
               "to the cached ones along the sequence axis (dim=2); attend with a causal mask that lets new "
               "position i see the t cached positions and new positions 0 .. i; return (W_o(merge_heads(out)), "
               "(k, v)) without changing past."),
    Check(name="decode_step", cases=_step_cases, expected=_step,
          mistakes=[Mistake("Did you restart the positions at 0? The new tokens sit at positions t .. t + n - 1 (t = "
                            "cache[0][0].shape[2]): add model.positions.pe[t:t + n].",
                            variant(_step_slip, positions="from zero")),
                    Mistake("Did you forget the positional encoding? Add model.positions.pe[t:t + n] to the "
                            "embeddings.", variant(_step_slip, positions="none")),
                    Mistake(_NO_MASK, variant(_step_slip, mask="none")),
                    Mistake(_PAST, variant(_step_slip, use_past=False))],
          hint="decode_step: x = embedding(ids) + pe[t:t + n]; for each layer x = x + cached_attention(self_attn, "
               "norm1(x), cache[i]) and x = x + ffn(norm2(x)); return (output(norm(x)), the new (k, v) of every "
               "layer)."),
)
