"""11.6 `ModernDecoderLayer` and 11.7 `ModernLM`: forward passes with known weights (one call, or a
prefill then steps through the caches) and a new module's parameters.

Oracle: the block and the model recomposed from PyTorch built-ins in float64: ``F.rms_norm``,
`.attention.gqa_step` (``F.scaled_dot_product_attention(..., enable_gqa=True)`` with the rotation by
complex multiplication), SwiGLU with ``F.silu``, the embedding a row lookup, logits x @ W^T with W the
embedding's table when tied. Mistakes are the same with knobs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from course.probing.calls.modern.attention import CALLS, GIVEN, RETURNED
from course.probing.calls.modern.model import TIED
from course.probing.kit import COUNT, PARAMS
from course.reference.positional_encoding import sinusoidal_encoding

from .. import kit
from ..framework import Case, Check, Mistake, register
from ..kit import randn, variant
from .attention import as_float, chunk_sizes, drawn_cache, gqa_step, gqa_weights

DEFAULT_BASE, DEFAULT_EPS = 10000.0, 1e-5


# ------------------------------------------------------------- the oracle ---

def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight.double(), eps)


def layer_step(w: dict[str, Any], x: torch.Tensor, cache: Any, h: int, g: int, base: float, eps: float,
               prefix: str = "", *, order: str = "pre", residual: str = "input") -> tuple[torch.Tensor, Any]:
    """One block in float64: h = x + attn(norm1(x)), out = h + ffn(norm2(h)); w by name (under `prefix`).
    Knobs: order 'post' (norm after each residual sum); residual 'normed' (the sums start from the normed input)."""
    p = {k[len(prefix):]: v.double() for k, v in w.items() if k.startswith(prefix) and v is not None}
    attn = {k[len("attn."):]: v for k, v in p.items() if k.startswith("attn.")}

    def ffn(z: torch.Tensor) -> torch.Tensor:
        return (F.silu(z @ p["ffn.w_gate.weight"].T) * (z @ p["ffn.w_up.weight"].T)) @ p["ffn.w_down.weight"].T

    x = x.double()
    if order == "post":
        a, cache = gqa_step(attn, x, cache, h, g, base)
        mid = _rms(x + a, p["norm1.weight"], eps)
        return _rms(mid + ffn(mid), p["norm2.weight"], eps), cache
    n1 = _rms(x, p["norm1.weight"], eps)
    a, cache = gqa_step(attn, n1, cache, h, g, base)
    mid = (n1 if residual == "normed" else x) + a
    n2 = _rms(mid, p["norm2.weight"], eps)
    return (n2 if residual == "normed" else mid) + ffn(n2), cache


def layer_weights(rng: np.random.Generator, d: int, h: int, g: int, d_ff: int, prefix: str = "") -> dict:
    """norm gains around 1, the attention's weights (`gqa_weights`), SwiGLU's scaled by 1/sqrt(fan_in);
    no biases anywhere (None: the module must not have them)."""
    w: dict[str, torch.Tensor | None] = {"norm1.weight": 1 + 0.2 * randn(rng, d), "norm1.bias": None,
                                         "norm2.weight": 1 + 0.2 * randn(rng, d), "norm2.bias": None}
    w |= {f"attn.{k}": v for k, v in gqa_weights(rng, d, h, g).items()}
    for name, (rows, cols) in {"w_gate": (d_ff, d), "w_up": (d_ff, d), "w_down": (d, d_ff)}.items():
        w[f"ffn.{name}.weight"] = randn(rng, rows, cols) / math.sqrt(cols)
    return {prefix + k: v for k, v in w.items()}


def _chained(step: Any, x: torch.Tensor, cache: Any, chunks: list[int] | None) -> dict[str, Any]:
    """The expected report of one call (chunks None) or of a prefill and steps, `step(x, cache)` -> (out, cache)."""
    def floats(c: Any) -> Any:
        return [as_float(one) for one in c] if isinstance(c, list) else as_float(c)
    if chunks is None:
        out, new = step(x, cache)
        report: dict[str, Any] = {RETURNED: (out.float(), floats(new))}
    else:
        calls, c, start = [], cache, 0
        for n in chunks:
            out, c = step(x[:, start:start + n], c)
            calls.append((out.float(), floats(c)))
            start += n
        report = {CALLS: calls}
    return kit.both_modes(report if cache is None else {**report, GIVEN: cache})


# ----------------------------------------------------- ModernDecoderLayer ---
# (batch, heads, kv heads, n, cached t, rope_base, eps): eps large enough to matter where given

_LAYER_SPECS = {False: [(2, 4, 2, 5, 0, None, None), (1, 2, 1, 3, 4, 100.0, 0.5)],
                True: [(3, 4, 2, 6, 0, None, 0.25), (2, 6, 3, 1, 5, None, None), (1, 4, 4, 7, 0, 500.0, None),
                       (2, 2, 1, 4, 3, 100.0, 1.0), (1, 8, 2, 5, 0, None, 0.1)]}


def _sizes(rng: np.random.Generator, h: int) -> tuple[int, int]:
    """d_model = h * d_head (d_head 4, 6 or 8) and a d_ff around 8/3 d_model."""
    d = h * kit.even(rng, 2, 5)
    return d, int(rng.integers(2 * d, 3 * d + 1))


def _layer_case(rng: np.random.Generator, b: int, h: int, g: int, n: int, t: int, base: float | None,
                eps: float | None) -> Case:
    d, d_ff = _sizes(rng, h)
    n, t = (n + int(rng.integers(0, 3)) if n > 1 else n), (t + int(rng.integers(0, 3)) if t else 0)
    x, cache = randn(rng, b, n, d), drawn_cache(rng, b, g, t, d // h)
    extra = "".join(f", {k}={v:g}" for k, v in (("rope_base", base), ("eps", eps)) if v is not None)
    return Case(f"ModernDecoderLayer({d}, {h}, {g}, {d_ff}{extra}), x {kit.shape_of(x)}, {_cache_label(cache)}",
                (x,) if cache is None else (x, cache),
                meta={"init": (d, h, g, d_ff), "rope_base": base, "eps": eps,
                      "weights": layer_weights(rng, d, h, g, d_ff)})


def _cache_label(cache: Any) -> str:
    return f"a cache of {cache[0].shape[2]} positions (k, v {kit.shape_of(cache[0])})" if cache else "no cache"


def _layer(case: Case, *, base_ignored: bool = False, eps_ignored: bool = False, **knobs: Any) -> Any:
    m = case.meta
    _, h, g, _ = m["init"]
    base = DEFAULT_BASE if base_ignored or m["rope_base"] is None else m["rope_base"]
    eps = DEFAULT_EPS if eps_ignored or m["eps"] is None else m["eps"]
    cache = case.args[1] if len(case.args) > 1 else None
    return _chained(lambda x, c: layer_step(m["weights"], x, c, h, g, base, eps, **knobs), case.args[0], cache, None)


def _layer_table(case: Case, *, shared: bool = False, layer_norm: bool = False) -> dict:
    d, h, g, d_ff = case.meta["init"]
    kv = g * (d // h)
    table = {"attn.W_q.weight": (d, d), "attn.W_k.weight": (kv, d), "attn.W_v.weight": (kv, d),
             "attn.W_o.weight": (d, d), "ffn.w_gate.weight": (d_ff, d), "ffn.w_up.weight": (d_ff, d),
             "ffn.w_down.weight": (d, d_ff), "norm1.weight": (d,), "norm2.weight": (d,)}
    if shared:
        del table["norm2.weight"]
    if layer_norm:
        table |= {"norm1.bias": (d,), "norm2.bias": (d,)}
    table = {k: (s, "float32") for k, s in sorted(table.items())}
    return {PARAMS: table, COUNT: sum(math.prod(s) for s, _ in table.values())}


def _layer_table_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    cases = []
    for h, g in ([(4, 2), (2, 2)] if not hidden else [(8, 2), (4, 1), (6, 3), (2, 2)]):
        d, d_ff = _sizes(rng, h)
        cases.append(Case(f"a new ModernDecoderLayer({d}, {h}, {g}, {d_ff})", meta={"init": (d, h, g, d_ff)}))
    return cases


_LAYER_MISTAKES = [
    Mistake("Did you normalise after the residual sums (post-norm, as in 2017)? The modern block is pre-norm: "
            "h = x + attn(norm1(x)), out = h + ffn(norm2(h)).", variant(_layer, order="post")),
    Mistake("Did you start the residual sums from the normalised input? The residual carries x itself: "
            "h = x + attn(norm1(x)), not norm1(x) + attn(norm1(x)); and out = h + ffn(norm2(h)).",
            variant(_layer, residual="normed")),
    Mistake("Did you pass eps on to the norms? RMSNorm(d_model, eps) for norm1 and norm2.",
            variant(_layer, eps_ignored=True)),
    Mistake("Did you pass rope_base on to the attention? GroupedQueryAttention(d_model, num_heads, num_kv_heads, "
            "rope_base).", variant(_layer, base_ignored=True)),
]
_SHARED = ("Did you use one norm twice? norm1 and norm2 are two RMSNorm(d_model, eps), each with a gain of its "
           "own.")


# -------------------------------------------------------------- ModernLM ---
# (batch, n or chunks, cached t, heads, kv heads, layers, tied, rope_base, eps)

_LM_SPECS = {False: [(2, 5, 0, 4, 2, 2, True, 10000.0, 1e-5), (1, 4, 0, 2, 1, 1, False, 500.0, 0.2),
                     (1, 3, 3, 2, 1, 2, True, 10000.0, 1e-5)],
             True: [(3, 6, 0, 4, 2, 2, True, 10000.0, 1e-5), (2, 7, 0, 4, 4, 1, False, 10000.0, 0.5),
                    (1, 3, 4, 4, 2, 3, True, 10000.0, 1e-5), (2, 1, 5, 2, 1, 2, False, 100.0, 0.5),
                    (1, 8, 0, 6, 3, 3, True, 1000.0, 1e-5)]}
_CHAIN_SPECS = {False: [(2, [4, 1, 1], 0, 4, 2, 2, True, 10000.0, 1e-5),
                        (1, [1, 1, 1, 2], 0, 2, 1, 1, False, 10000.0, 1e-5)],
                True: [(2, [5, 1, 1, 1], 0, 4, 2, 3, True, 10000.0, 1e-5),
                       (1, [1, 1, 1, 1], 0, 4, 2, 2, False, 500.0, 1e-5),
                       (3, [3, 4, 1], 0, 2, 2, 2, True, 10000.0, 0.3),
                       (1, [2, 3], 4, 4, 1, 2, True, 10000.0, 1e-5),
                       (2, [6, 2], 0, 6, 3, 1, False, 100.0, 1e-5)]}


def _config(rng: np.random.Generator, h: int, g: int, layers: int, tied: bool, base: float, eps: float) -> dict:
    d, d_ff = _sizes(rng, h)
    return {"vocab_size": int(rng.integers(10, 41)), "d_model": d, "num_heads": h, "num_kv_heads": g,
            "num_layers": layers, "d_ff": d_ff, "rope_base": base, "eps": eps, "tie_embeddings": tied}


def _lm_weights(rng: np.random.Generator, c: dict) -> dict:
    v, d, h = c["vocab_size"], c["d_model"], c["num_heads"]
    w: dict[str, torch.Tensor | None] = {"embedding.weight": randn(rng, v, d)}
    for i in range(c["num_layers"]):
        w |= layer_weights(rng, d, h, c["num_kv_heads"], c["d_ff"], f"layers.{i}.")
    w |= {"norm.weight": 1 + 0.2 * randn(rng, d), "norm.bias": None, "output.bias": None}
    if not c["tie_embeddings"]:
        w["output.weight"] = randn(rng, v, d) / math.sqrt(d)
    return w


def _lm_label(c: dict) -> str:
    return "ModernLM(ModernConfig(" + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                                for k, v in c.items()) + "))"


def _lm_case(rng: np.random.Generator, b: int, n: int | list[int], t: int, h: int, g: int, layers: int, tied: bool,
             base: float, eps: float) -> Case:
    c = _config(rng, h, g, layers, tied, base, eps)
    chunks = chunk_sizes(rng, n) if isinstance(n, list) else None
    total = sum(chunks) if chunks else (n + int(rng.integers(0, 3)) if n > 1 else n)
    t = t + int(rng.integers(0, 3)) if t else 0
    ids = torch.from_numpy(rng.integers(0, c["vocab_size"], size=(b, total))).long()
    caches = [drawn_cache(rng, b, g, t, c["d_model"] // h) for _ in range(layers)] if t else None
    what = f"chunks of {', '.join(map(str, chunks))} tokens" if chunks else "one call"
    start = f"caches of {t} positions for each layer" if caches else "no caches"
    meta = {"config": c, "weights": _lm_weights(rng, c)} | ({"chunks": chunks} if chunks else {})
    return Case(f"{_lm_label(c)}, ids {kit.shape_of(ids)} in {what}, starting from {start}",
                (ids,) if caches is None else (ids, caches), meta=meta)


def lm_step(w: dict, c: dict, ids: torch.Tensor, caches: list | None, *, final_norm: bool = True,
            per_layer: str = "own", positions: bool = False, scaled: bool = False) -> tuple[torch.Tensor, list]:
    """The model in float64: (logits (b, n, vocab), the new caches). Knobs: final_norm; per_layer ('own', 'none':
    caches ignored, 'first': every layer given the first layer's); positions (a sinusoidal table added); scaled
    (the embedding multiplied by sqrt(d_model), as chapter 10's model does)."""
    x = w["embedding.weight"].double()[ids]
    if scaled:
        x = x * math.sqrt(c["d_model"])
    if positions:
        x = x + sinusoidal_encoding(ids.shape[1], c["d_model"]).double()
    new = []
    for i in range(c["num_layers"]):
        cache = None if caches is None or per_layer == "none" else caches[0 if per_layer == "first" else i]
        x, cache = layer_step(w, x, cache, c["num_heads"], c["num_kv_heads"], c["rope_base"], c["eps"], f"layers.{i}.")
        new.append(cache)
    if final_norm:
        x = _rms(x, w["norm.weight"], c["eps"])
    table = w["embedding.weight"] if c["tie_embeddings"] else w["output.weight"]
    return x @ table.double().T, new


def _lm(case: Case, **knobs: Any) -> Any:
    m = case.meta
    caches = case.args[1] if len(case.args) > 1 else None
    return _chained(lambda ids, cs: lm_step(m["weights"], m["config"], ids, cs, **knobs), case.args[0], caches,
                    m["chunks"] if "chunks" in m else None)


def _lm_table(case: Case, *, tied: bool | None = None, bias: bool = False, final_norm: bool = True) -> dict:
    c = case.meta["config"]
    v, d, f = c["vocab_size"], c["d_model"], c["d_ff"]
    tied = c["tie_embeddings"] if tied is None else tied
    table = {"embedding.weight": (v, d), "output.weight": (v, d)} | ({"norm.weight": (d,)} if final_norm else {})
    table |= {"output.bias": (v,)} if bias else {}
    for i in range(c["num_layers"]):
        one = _layer_table(Case("", meta={"init": (d, c["num_heads"], c["num_kv_heads"], f)}))[PARAMS]
        table |= {f"layers.{i}.{k}": s for k, s in one.items()}
    table = {k: (s if isinstance(s[-1], str) else (s, "float32")) for k, s in table.items()}
    total = sum(math.prod(s) for s, _ in table.values()) - (v * d if tied else 0)
    return {PARAMS: dict(sorted(table.items())), TIED: tied, COUNT: total}


def _lm_table_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(4, 2, 2, True), (2, 1, 1, False)] if not hidden else [
        (4, 2, 3, True), (2, 2, 1, False), (6, 3, 2, False), (4, 1, 1, True)]
    return [Case(f"a new {_lm_label(c)}", meta={"config": c})
            for c in (_config(rng, h, g, layers, tied, DEFAULT_BASE, DEFAULT_EPS) for h, g, layers, tied in specs)]


_LM_MISTAKES = [
    Mistake("Did you leave out the final norm? logits = output(norm(x)) after the last layer.",
            variant(_lm, final_norm=False)),
    Mistake("Did you ignore the caches? Give layer i the cache caches[i] (None on the first call) and return the "
            "caches the layers return, one per layer.", variant(_lm, per_layer="none")),
    Mistake("Did you give every layer the first layer's cache? Layer i gets caches[i], its own keys and values.",
            variant(_lm, per_layer="first")),
    Mistake("Did you add positions at the embedding? The model has no position table: RoPE inside each "
            "attention layer is its only position information.", variant(_lm, positions=True)),
    Mistake("Did you scale the embedding by sqrt(d_model), as chapter 10's model does? Llama's model feeds the "
            "embedding's rows in as they are: x = embedding(ids).", variant(_lm, scaled=True)),
]
_LM_HINT = ("forward(ids, caches=None): x = embedding(ids); for each layer i, x, cache = layers[i](x, caches[i]) "
            "(None on the first call), each new cache appended to a new list: the caller's list of caches is left "
            "unchanged; return (output(norm(x)), the new caches, one per layer). No positions at the embedding: "
            "RoPE is inside the attention.")

register(
    __name__,
    Check(name="layer", cases=lambda rng, hidden: [_layer_case(rng, *s) for s in _LAYER_SPECS[hidden]],
          expected=_layer, mistakes=_LAYER_MISTAKES,
          hint="forward(x, cache=None): a, cache = attn(norm1(x), cache); h = x + a; return (h + ffn(norm2(h)), "
               "cache). norm1, norm2 = RMSNorm(d_model, eps), attn = GroupedQueryAttention(d_model, num_heads, "
               "num_kv_heads, rope_base), ffn = SwiGLUFeedForward(d_model, d_ff). x and the cache are left "
               "unchanged; " + kit.same_in_both_modes("layer")),
    Check(name="layer_parameters", guard=True, cases=_layer_table_cases, expected=_layer_table,
          mistakes=[Mistake(_SHARED, variant(_layer_table, shared=True)),
                    Mistake("Did you use LayerNorm? RMSNorm has a gain (weight) and no bias.",
                            variant(_layer_table, layer_norm=True))],
          hint="norm1 and norm2 (RMSNorm: weight (d_model,)), attn (W_q, W_k, W_v, W_o without bias) and ffn "
               "(w_gate, w_up, w_down without bias), all float32, nothing else."),
    Check(name="lm", cases=lambda rng, hidden: [_lm_case(rng, *s) for s in _LM_SPECS[hidden]], expected=_lm,
          mistakes=_LM_MISTAKES, hint=_LM_HINT),
    Check(name="lm_cache", cases=lambda rng, hidden: [_lm_case(rng, *s) for s in _CHAIN_SPECS[hidden]],
          expected=_lm, mistakes=_LM_MISTAKES,
          hint="Fed the ids a few at a time, each call given the caches the last one returned, the logits must be "
               "the rows of one full pass. " + _LM_HINT),
    Check(name="lm_parameters", guard=True, cases=_lm_table_cases, expected=_lm_table,
          mistakes=[Mistake("Did you tie the weights? With tie_embeddings=True the output layer's weight is the "
                            "embedding's Parameter (self.output.weight = self.embedding.weight), counted once.",
                            variant(_lm_table, tied=False)),
                    Mistake("Did you tie the weights although tie_embeddings=False? Then the output layer keeps a "
                            "weight of its own.", variant(_lm_table, tied=True)),
                    Mistake("Did you give the output layer a bias? nn.Linear(d_model, vocab_size, bias=False).",
                            variant(_lm_table, bias=True)),
                    Mistake("Did you leave out the final norm? The model holds norm = RMSNorm(d_model, eps), applied "
                            "after the last layer.", variant(_lm_table, final_norm=False))],
          hint="embedding (vocab_size, d_model), num_layers ModernDecoderLayers under layers.0 ..., norm (a final "
               "RMSNorm) and output (nn.Linear(d_model, vocab_size, bias=False)), whose weight is the embedding's "
               "when tie_embeddings, counted once; no position table."),
)
