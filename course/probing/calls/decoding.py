"""Probes for chapter 9: the output projection, log-softmax, the top-k and top-p filters, sampling,
generation (greedy and sampled), beam search and the key-value cache.

The small hand-made language models the cases drive the student's code with live here (`TableLM`,
`PrefixLM`, `DictLM`), with their transports and those of the earlier chapters' modules the cases
carry (chapter 5's ``MultiHeadAttention``, the ``ToyLM`` of `course.reversal`); the trusted side imports
them to build its cases. The sampling probes return the raw draws and the tied projection's probe
what its module holds; their `observe` functions, run by the judge, turn these into the facts the
answers describe (frequencies, "the weight is the embedding's Parameter", a parameter count).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from course.reference.embedding import Embedding
from course.reference.multi_head_attention import MultiHeadAttention
from course.reversal import ToyLM, Vocab

from ..cases import Case, module_from_state, module_state, transportable
from ..kit import build, load_weights, parameter_table, run_modes
from ..runner import Probe, register

# ------------------------------------------------ the hand-made models ---


class TableLM:
    """A hand-made language model: the logits of the next token depend on the sequence's length t and
    its last token, ``table[t % P, last]``, and the end token gets +30 when t equals ``stop[first token]``
    (the row ends there) and -30 otherwise. table: (P, vocab, vocab); seq (batch, t) -> (batch, vocab)."""

    def __init__(self, table: torch.Tensor, eos: int, stop: dict[int, int]) -> None:
        self.table, self.eos, self.stop = table, eos, stop

    def __call__(self, seq: torch.Tensor) -> torch.Tensor:
        t = seq.shape[1]
        logits = self.table[t % self.table.shape[0], seq[:, -1]].clone()
        ends = torch.tensor([self.stop.get(int(f), -1) == t for f in seq[:, 0]])
        logits[:, self.eos] = torch.where(ends, 30.0, -30.0)
        return logits

    def __repr__(self) -> str:
        return f"TableLM(vocab {self.table.shape[-1]}, eos {self.eos})"


class PrefixLM:
    """A hand-made model whose next-token log-probabilities depend on the whole prefix (a seeded hash of
    it), for beam search: ``logits(prefix) = scale * normal(seed(prefix))``, the end token shifted by
    `eos_bias`. seq (batch, t) -> (batch, vocab)."""

    def __init__(self, vocab: int, eos: int, seed: int, scale: float = 2.0, eos_bias: float = 0.0) -> None:
        self.vocab, self.eos, self.seed, self.scale, self.eos_bias = vocab, eos, seed, scale, eos_bias

    def row(self, prefix: list[int]) -> torch.Tensor:
        rng = np.random.default_rng([self.seed, *prefix])
        logits = torch.from_numpy(self.scale * rng.standard_normal(self.vocab).astype(np.float32))
        logits[self.eos] += self.eos_bias
        return logits

    def __call__(self, seq: torch.Tensor) -> torch.Tensor:
        return torch.stack([self.row(r) for r in seq.tolist()])

    def __repr__(self) -> str:
        return f"PrefixLM(vocab {self.vocab}, eos {self.eos})"


class DictLM:
    """A hand-built model: next-token probabilities looked up by the prefix (a tuple of ids) in `probs`;
    unknown prefixes are uniform. seq (batch, t) -> log-probabilities as logits, (batch, vocab)."""

    def __init__(self, vocab: int, probs: dict[tuple[int, ...], list[float]]) -> None:
        self.vocab, self.probs = vocab, probs

    def __call__(self, seq: torch.Tensor) -> torch.Tensor:
        rows = [self.probs.get(tuple(r), [1.0 / self.vocab] * self.vocab) for r in seq.tolist()]
        return torch.tensor(rows, dtype=torch.float32).clamp_min(1e-9).log()

    def __repr__(self) -> str:
        return "a hand-built model"


def _toy_lm_state(model: ToyLM) -> dict:
    """A ToyLM's vocabulary, sizes, weights and mode."""
    layer = model.layers[0]
    state = module_state(model, d_model=model.embedding.d_model, num_heads=layer.self_attn.num_heads,
                         d_ff=layer.ffn.linear1.out_features, num_layers=len(model.layers),
                         max_len=model.positions.pe.shape[0])
    return state | {"vocab": {"symbols": model.vocab.symbols, "specials": model.vocab.specials}}


def _toy_lm_from_state(state: dict) -> ToyLM:
    model = ToyLM(Vocab(**state["vocab"]), **state["init"])
    model.load_state_dict(state["weights"])
    return model.train(state["training"])


def _mha_state(mha: MultiHeadAttention) -> dict:
    return module_state(mha, d_model=mha.d_model, num_heads=mha.num_heads, d_q_in=mha.W_q.in_features,
                        d_kv_in=mha.W_k.in_features, bias=mha.W_q.bias is not None)


transportable("decoding.TableLM", TableLM, lambda m: {"table": m.table, "eos": m.eos, "stop": m.stop},
              lambda s: TableLM(s["table"], s["eos"], s["stop"]))
transportable("decoding.PrefixLM", PrefixLM,
              lambda m: {"vocab": m.vocab, "eos": m.eos, "seed": m.seed, "scale": m.scale, "eos_bias": m.eos_bias},
              lambda s: PrefixLM(**s))
transportable("decoding.DictLM", DictLM, lambda m: {"vocab": m.vocab, "probs": m.probs}, lambda s: DictLM(**s))
transportable("course.reference.multi_head_attention.MultiHeadAttention", MultiHeadAttention, _mha_state,
              module_from_state(MultiHeadAttention))
transportable("course.reversal.ToyLM", ToyLM, _toy_lm_state, _toy_lm_from_state)


# ------------------------------------------------ 9.1 OutputProjection ---

def _proj_call(cls: Any, case: Case) -> dict[str, Any]:
    """OutputProjection(d_model, vocab) with the case's weights, on x (..., d_model):
    {"eval", "train"} -> logits (..., vocab)."""
    module = build(cls, case.meta["d_model"], case.meta["vocab"])
    load_weights(module, case.meta["weights"], "The module holds weight (vocab_size, d_model) and bias "
                                               "(vocab_size,), both nn.Parameter.")
    return run_modes(module, lambda m, x: m(x), *case.args)


#: what `_tied_call` reports as the module's weight when it is the embedding's very Parameter
EMBEDDING_WEIGHT = "the embedding's weight Parameter"


def _tied_call(cls: Any, case: Case) -> dict[str, Any]:
    """Build the projection tied to an embedding, then change the embedding's weight in place: a tied
    projection sees the change. Reports the logits (..., vocab), what the module's `weight` is
    (`EMBEDDING_WEIGHT` when it is that very object, else the tensor it holds, or the name of its type)
    and its parameter table."""
    d, vocab = case.meta["d_model"], case.meta["vocab"]
    embedding = Embedding(vocab, d)
    with torch.no_grad():
        embedding.weight.copy_(case.meta["before"])
    module = build(cls, d, vocab, embedding=embedding)
    with torch.no_grad():
        embedding.weight.copy_(case.meta["after"])
        logits = module(case.args[0])
    weight = getattr(module, "weight", None)
    if weight is embedding.weight:
        weight = EMBEDDING_WEIGHT
    elif weight is not None and not isinstance(weight, torch.Tensor):
        weight = type(weight).__name__
    return {"logits": logits, "weight": weight, "parameters": parameter_table(module)}


def _tied_facts(case: Case, raw: dict) -> dict[str, Any]:
    """Observe (run by the judge): what `_tied_call`'s raw report says: the logits, whether the weight
    is the embedding's very Parameter, and how many parameters the module holds."""
    weight = raw["weight"]
    return {"logits": raw["logits"],
            "weight is the embedding's Parameter": isinstance(weight, str) and weight == EMBEDDING_WEIGHT,
            "parameters": len(raw["parameters"])}


def _new_call(cls: Any, case: Case) -> Any:
    """A new OutputProjection(d_model, vocab): its parameter table and its bias (vocab,); tied to an
    Embedding of the wrong shape, whatever it does (the contract says: raise)."""
    d, v, bad = case.meta["d_model"], case.meta["vocab"], case.meta["bad"]
    if bad:
        return build(cls, d, v, embedding=Embedding(*bad))  # must raise
    module = build(cls, d, v)
    with torch.no_grad():
        return {"parameters": parameter_table(module), "bias": module.bias}


#: exercise 9.4 samples from exercise 9.3's filtered logits
_ON_FILTERS = dict(builds_on=("top_k_filter", "top_p_filter"), answer="sample")
_LSM_FORBID = ("torch.log_softmax", "torch.Tensor.log_softmax", "torch.nn.functional.log_softmax",
               "torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.log_softmax")


# ------------------------------------------------------------ 9.4 sample ---

DRAWS = 4000  # draws of the same logits in one call (sample_distribution, sample_support)


def _sample_call(fn: Any, case: Case) -> Any:
    """sample(logits (batch, vocab), ...) with the case's seeded generator, or with none after
    torch.manual_seed (the default, the global generator) -> (batch,) token ids."""
    if "global seed" in case.meta:
        torch.manual_seed(case.meta["global seed"])
        return fn(*case.args, **case.kwargs)
    return fn(*case.args, **case.kwargs, generator=torch.Generator().manual_seed(case.meta["seed"]))


def _draws(fn: Any, case: Case) -> Any:
    """DRAWS rows of the same logits (vocab,), sampled in one seeded call: the raw draws, (DRAWS,)."""
    x = case.args[0]
    return fn(x.expand(DRAWS, -1).clone(), **case.kwargs, generator=torch.Generator().manual_seed(case.meta["seed"]))


def token_ids(case: Case, draws: Any) -> np.ndarray:
    """The raw draws (plain data, an array) as token ids (DRAWS,), clamped into the vocabulary."""
    if not isinstance(draws, np.ndarray):
        raise TypeError(f"sample returned a {type(draws).__name__}, not a tensor of token ids")
    with np.errstate(invalid="ignore"):
        ids = draws.reshape(-1).astype(np.int64)
    return ids.clip(0, len(case.args[0]) - 1)


def _frequencies(case: Case, draws: Any) -> np.ndarray:
    """Observe (run by the judge): the frequency of each token over the DRAWS draws, float64 (vocab,)."""
    return np.bincount(token_ids(case, draws), minlength=len(case.args[0])).astype(np.float64) / DRAWS


# ---------------------------------------------------------- 9.5 generate ---

def _gen_call(fn: Any, case: Case) -> Any:
    """generate(model, prompt (batch, t0), max_new_tokens, ...), with the case's seeded generator
    when it samples -> (batch, t0 + n)."""
    if "temperature" in case.kwargs and case.kwargs["temperature"] > 0:
        return fn(*case.args, **case.kwargs, generator=torch.Generator().manual_seed(case.meta["seed"]))
    return fn(*case.args, **case.kwargs)


# ------------------------------------------------------------ 9.7 cache ---

def _call_no_grad(fn: Any, case: Case) -> Any:
    """The function on the case's arguments, without grad (the modules it is given hold parameters)."""
    with torch.no_grad():
        return fn(*case.args)


register(
    Probe("decoding.output_projection", call=_proj_call),
    Probe("decoding.output_projection_tied", call=_tied_call, observe=_tied_facts),
    Probe("decoding.output_projection_new", call=_new_call),
    Probe("decoding.log_softmax", forbid=_LSM_FORBID),
    Probe("decoding.top_k_filter"),
    Probe("decoding.top_p_filter"),
    Probe("decoding.sample", call=_sample_call, **_ON_FILTERS),
    Probe("decoding.sample_distribution", call=_draws, observe=_frequencies, **_ON_FILTERS),
    Probe("decoding.sample_support", call=_draws, observe=_frequencies, **_ON_FILTERS),
    Probe("decoding.generate", call=_gen_call, builds_on=("sample",), answer="generate"),
    Probe("decoding.beam_search", builds_on=("log_softmax",), answer="beam_search"),
    Probe("decoding.cached_attention", call=_call_no_grad),
    Probe("decoding.decode_step", call=_call_no_grad),
)
