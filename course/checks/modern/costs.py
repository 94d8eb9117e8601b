"""11.8 `model_costs(config, context, batch=1, bytes_per_value=2)`: what a ModernLM costs, from its configuration.

Oracle: the parameters are counted on the course's own `ModernLM` built on PyTorch's meta device (no memory
for the values, so Llama 3 8B's shape costs nothing), a tied weight once; the rest is the chapter's
arithmetic on that count: weights at `bytes_per_value` each, AdamW's m and v in float32 (8 bytes a
parameter), the cache's keys and values (2 x num_layers x num_kv_heads x d_head values per token and
sequence), and 6 N + 12 L context d_model training FLOPs per token, N the parameters that multiply (all
but an untied input embedding, a lookup).

Mistakes are `_costs`, the same quantities written out, with knobs: the tied weight counted twice, keys
and values projected to num_heads heads, the norms' gains left out, SwiGLU with two matrices; a cache of
keys only, of num_heads heads, of one layer, of one sequence; 2N (the forward pass), N with the input
embedding, N without a tied output layer, no attention term, a forward-only attention term; one moment
in AdamW's state (also what two moments at bfloat16's width give).
"""

from __future__ import annotations


import numpy as np
import torch

from course.probing.calls.modern.costs import ADAMW_BYTES, FLOPS, KV_BYTES, PARAMETERS, READS, WEIGHT_BYTES
from course.reference.modern import ModernConfig, ModernLM

from ..framework import Case, Check, Mistake, register

#: Llama 3 8B's shape (Meta's released configuration: 128,256 tokens, untied output) at its 8,192-token context
LLAMA3_8B = dict(vocab_size=128_256, d_model=4096, num_heads=32, num_kv_heads=8, num_layers=32, d_ff=14_336,
                 rope_base=500_000.0, eps=1e-5, tie_embeddings=False)


def count_parameters(config: dict) -> int:
    """The parameters of the course's ModernLM of `config`, built on the meta device, each counted once."""
    with torch.device("meta"):
        model = ModernLM(ModernConfig(**config))
    return sum(p.numel() for p in model.parameters())


def _sizes(case: Case) -> tuple[dict, int, int, int]:
    """The case's configuration (fields), context, batch and bytes per value (the defaults where not given)."""
    return (case.meta["config"], case.args[0], case.kwargs.get("batch", 1), case.kwargs.get("bytes_per_value", 2))


def _oracle(case: Case) -> dict[str, int]:
    c, context, batch, size = _sizes(case)
    n = count_parameters(c)
    multiplied = n - (0 if c["tie_embeddings"] else c["vocab_size"] * c["d_model"])
    d_head = c["d_model"] // c["num_heads"]
    return {PARAMETERS: n, WEIGHT_BYTES: n * size, ADAMW_BYTES: 8 * n,
            KV_BYTES: 2 * c["num_layers"] * c["num_kv_heads"] * d_head * context * batch * size,
            FLOPS: 6 * multiplied + 12 * c["num_layers"] * context * c["d_model"]}


def _costs(case: Case, *, tied_twice=False, proj_heads="kv", norms=True, ffn_matrices=3, cache_kv=2,
           cache_heads="kv", cache_layers=True, cache_batch=True, passes=6, lookup_multiplies=False,
           tied_multiplies=True, attention=12, moments=2) -> dict[str, int]:
    """The quantities written out from the configuration; the knobs are the mistakes (see the module)."""
    c, context, batch, size = _sizes(case)
    d, v, layers, d_head = c["d_model"], c["vocab_size"], c["num_layers"], c["d_model"] // c["num_heads"]
    heads = {"kv": c["num_kv_heads"], "all": c["num_heads"]}
    per_layer = 2 * d * d + 2 * d * heads[proj_heads] * d_head + ffn_matrices * d * c["d_ff"] + 2 * d * norms
    n = v * d * (1 if c["tie_embeddings"] and not tied_twice else 2) + layers * per_layer + d * norms
    lookup = 0 if lookup_multiplies or (c["tie_embeddings"] and tied_multiplies) else v * d
    cached = cache_kv * (layers if cache_layers else 1) * (batch if cache_batch else 1) * heads[cache_heads] * d_head
    return {PARAMETERS: n, WEIGHT_BYTES: n * size,
            ADAMW_BYTES: 4 * moments * n,
            KV_BYTES: cached * context * size, FLOPS: passes * (n - lookup) + attention * layers * context * d}


def _case(label: str, config: dict, context: int, batch: int | None = None, bytes_per_value: int | None = None) -> Case:
    kwargs = {k: v for k, v in (("batch", batch), ("bytes_per_value", bytes_per_value)) if v is not None}
    shape = (f"{config['num_layers']} layers, d_model {config['d_model']}, {config['num_heads']} heads, "
             f"{config['num_kv_heads']} key/value heads, d_ff {config['d_ff']}, vocabulary {config['vocab_size']}, "
             + ("tied" if config["tie_embeddings"] else "untied"))
    given = ", ".join([f"context {context}", *(f"{k} {v}" for k, v in kwargs.items())])
    return Case(f"{label} ({shape}), {given}", (context,), kwargs, {"config": config})


def _random_config(rng: np.random.Generator, *, tied: bool, group: str) -> dict:
    """A small config: d_head 4..16, heads 2..8, and key/value heads as `group` says ('gqa', 'mha', 'mqa')."""
    heads = int(rng.choice([2, 4, 6, 8]))
    kv = {"mha": heads, "mqa": 1, "gqa": int(rng.choice([k for k in range(2, heads) if heads % k == 0] or [1]))}[group]
    d_model = heads * int(rng.integers(2, 9)) * 2
    return dict(vocab_size=int(rng.integers(50, 5000)), d_model=d_model, num_heads=heads, num_kv_heads=kv,
                num_layers=int(rng.integers(1, 13)), d_ff=int(rng.integers(d_model, 4 * d_model)), rope_base=10000.0,
                eps=1e-5, tie_embeddings=tied)


#: the comparison's modern model (course.modern_lm, 0.80M parameters: d_ff 384, not the default 344)
COURSE = dict(vocab_size=69, d_model=128, num_heads=4, num_kv_heads=2, num_layers=4, d_ff=384, rope_base=10000.0,
              eps=1e-5, tie_embeddings=True)


def _cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    small = _random_config(rng, tied=bool(rng.integers(0, 2)), group="gqa")
    visible = [_case("Llama 3 8B", LLAMA3_8B, 8192),
               _case("the chapter's comparison model", COURSE, 64, 12, 4),
               _case("a random model", small, int(rng.integers(20, 200)) * 2 + 1)]
    if not hidden:
        return visible
    return [*visible[:2],
            _case("a random tied model, grouped queries", _random_config(rng, tied=True, group="gqa"),
                  int(rng.integers(10, 300)), int(rng.integers(2, 9)), 4),
            _case("a random untied model, grouped queries", _random_config(rng, tied=False, group="gqa"),
                  int(rng.integers(10, 300)) * 2 + 1, int(rng.integers(2, 9))),
            _case("a random untied model, multi-head", _random_config(rng, tied=False, group="mha"),
                  int(rng.integers(10, 300)), 1, 4),
            _case("a random tied model, multi-query", _random_config(rng, tied=True, group="mqa"),
                  int(rng.integers(10, 300)), int(rng.integers(2, 9)), 2),
            _case("Llama 3 8B at 128K tokens, 4 sequences", LLAMA3_8B, 131_072, 4, 2)]


#: 4 bytes a parameter: one float32 moment, or two at bfloat16's width (the same number)
_ONE_MOMENT = ("Did you keep one moment, or store the moments at bytes_per_value? AdamW keeps two float32 moments, "
               "m and v, whatever the weights' dtype: 8 bytes per parameter.")
#: (hint, knobs of `_costs`, the quantities they change)
_MISTAKES = [
    ("Did you count the tied weight twice? With tie_embeddings, the output layer's weight is the embedding's: "
     "one matrix of vocab_size x d_model.", {"tied_twice": True}, "pwaf"),
    ("Did you give W_k and W_v num_heads heads? They project to num_kv_heads heads of d_head features: "
     "d_model x (num_kv_heads * d_head) each.", {"proj_heads": "all"}, "pwaf"),
    ("Did you leave out the RMSNorm gains? Two per layer and the final norm, d_model parameters each.",
     {"norms": False}, "pwaf"),
    ("Did you give SwiGLU two matrices? It has three, w_gate, w_up and w_down, of d_model x d_ff each.",
     {"ffn_matrices": 2}, "pwaf"),
    ("Did you cache the keys only? The cache holds keys and values: 2 x num_layers x num_kv_heads x d_head "
     "values per token of each sequence.", {"cache_kv": 1}, "k"),
    ("Did you cache num_heads heads? Only the num_kv_heads key/value heads are cached.", {"cache_heads": "all"}, "k"),
    ("Did you cache one layer? Every layer caches its own keys and values.", {"cache_layers": False}, "k"),
    ("Did you cache one sequence? The cache holds `batch` sequences.", {"cache_batch": False}, "k"),
    ("Did you count 2N? That is the forward pass; training (forward and backward) costs about 6N per token.",
     {"passes": 2}, "f"),
    ("Did you count the input embedding in N? It is a lookup, not a product: leave an untied embedding out.",
     {"lookup_multiplies": True}, "f"),
    ("Did you leave the tied output layer out of N? Its weight is the embedding's, but it multiplies: count it.",
     {"tied_multiplies": False}, "f"),
    ("Did you leave out the attention scores? No parameter counts them: add 12 x num_layers x context x d_model.",
     {"attention": 0}, "f"),
    ("Did you count the attention scores' forward pass only (4 x num_layers x context x d_model)? With the "
     "backward pass it is 12 x num_layers x context x d_model.", {"attention": 4}, "f"),
    (_ONE_MOMENT, {"moments": 1}, "a"),
]
_LETTER = {PARAMETERS: "p", WEIGHT_BYTES: "w", ADAMW_BYTES: "a", KV_BYTES: "k", FLOPS: "f"}


def _mistakes(keys: tuple[str, ...]) -> list[Mistake]:
    """The mistakes that change a quantity the check reads, each as the check reads it."""
    return [Mistake(hint, lambda case, knobs=knobs: {k: _costs(case, **knobs)[k] for k in keys})
            for hint, knobs, changes in _MISTAKES if any(_LETTER[k] in changes for k in keys)]


for _name, _keys in READS.items():
    register(__name__, Check(
        name=_name, cases=_cases, expected=lambda case, keys=_keys: {k: _oracle(case)[k] for k in keys},
        hint="Check the contract: every quantity from the configuration; a tied weight once; keys and values "
             "at num_kv_heads heads; 6N + 12 L context d_model with N all but an untied input embedding.",
        mistakes=_mistakes(_keys), rtol=0.0, atol=0.0))
