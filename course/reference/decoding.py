"""Reference solutions of chapter 09_decoding.

Generated from solutions/09_decoding/09_decoding.ipynb (cells tagged 'export') by
`python -m autograder release`. Do not edit: edit the solution notebook.
"""
import math
from collections.abc import Callable

import torch
from torch import nn

from course.reference.attention import scaled_dot_product_attention
from course.reference.multi_head_attention import merge_heads, split_heads


class OutputProjection(nn.Module):
    """The final linear layer: vectors (..., d_model) -> logits (..., vocab_size).

    With `embedding` (a chapter-2 Embedding of shape (vocab_size, d_model)) the weight is tied:
    `self.weight` is the embedding's own Parameter, so both layers learn one matrix.
    """

    def __init__(self, d_model: int, vocab_size: int, embedding: nn.Module | None = None) -> None:
        super().__init__()
        if embedding is None:
            self.weight = nn.Parameter(torch.randn(vocab_size, d_model) / math.sqrt(d_model))
        else:
            if tuple(embedding.weight.shape) != (vocab_size, d_model):
                raise ValueError(f"cannot tie: the embedding's weight has shape {tuple(embedding.weight.shape)}, "
                                 f"the output projection needs ({vocab_size}, {d_model})")
            self.weight = embedding.weight  # the same Parameter object: tied, not copied
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (..., d_model) -> logits (..., vocab_size) = x @ weight.T + bias."""
        return x @ self.weight.T + self.bias


def log_softmax(logits: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """log(softmax(logits)) along `dim`, computed without overflow: x - max - log(sum(exp(x - max)))."""
    shifted = logits - logits.amax(dim=dim, keepdim=True)
    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits of each row (ties with the k-th largest kept too); the rest -> -inf."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # the k-th largest value of each row
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose probability reaches p (nucleus); the rest -> -inf."""
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits, dim=-1)
    sorted_probs = probs.sort(dim=-1, descending=True).values
    running = sorted_probs.cumsum(dim=-1)                             # the running sums, most likely first
    crossing = (running < p).sum(dim=-1, keepdim=True)                # the first rank whose running sum >= p
    crossing = crossing.clamp(max=probs.shape[-1] - 1)                # (rounding may leave the total below p)
    threshold = sorted_probs.gather(-1, crossing)
    return logits.masked_fill(probs < threshold, float("-inf"))


def sample(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
           top_p: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row of logits (batch, vocab): (batch,) int64. temperature 0 is greedy."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature           # before the softmax
    if top_k is not None:
        scaled = top_k_filter(scaled, top_k)
    if top_p is not None:
        scaled = top_p_filter(scaled, top_p)
    probs = torch.softmax(scaled, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]


def generate(next_token_logits: Callable[[torch.Tensor], torch.Tensor], prompt: torch.Tensor,
             max_new_tokens: int, eos: int, pad: int = 0, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """Extend prompt (batch, t0) one token at a time until every row has produced eos, or
    max_new_tokens were added. Returns (batch, t0 + n) int64; after its eos a row gets pad."""
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    seq = prompt.clone()
    done = torch.zeros(prompt.shape[0], dtype=torch.bool)
    for _ in range(max_new_tokens):
        if done.all():
            break
        token = sample(next_token_logits(seq), temperature, top_k, top_p, generator)
        token = torch.where(done, torch.full_like(token, pad), token)
        seq = torch.cat([seq, token[:, None]], dim=1)
        done = done | (token == eos)
    return seq


def greedy_decode(next_token_logits: Callable[[torch.Tensor], torch.Tensor], prompt: torch.Tensor,
                  max_new_tokens: int, eos: int, pad: int = 0) -> torch.Tensor:
    """Greedy decoding: `generate` at temperature 0 (the argmax at every step)."""
    return generate(next_token_logits, prompt, max_new_tokens, eos, pad, temperature=0.0)


def beam_search(next_token_logits: Callable[[torch.Tensor], torch.Tensor], prompt: torch.Tensor,
                beam_size: int, max_new_tokens: int, eos: int,
                length_penalty: float = 0.0) -> tuple[torch.Tensor, float]:
    """The most likely continuation of prompt (1, t0) that beam search finds.
    Returns (tokens (1, t0 + n) int64, its score: the sum of log-probabilities / ((5 + n) / 6) ** length_penalty)."""
    if prompt.dim() != 2 or prompt.shape[0] != 1:
        raise ValueError(f"beam_search decodes one sequence: prompt must have shape (1, t0), got {tuple(prompt.shape)}")
    if beam_size < 1 or max_new_tokens < 1:
        raise ValueError("beam_size and max_new_tokens must be at least 1")
    beams, scores = prompt.clone(), torch.zeros(1)             # live hypotheses (n_live, t), their log-probs
    finished: list[tuple[torch.Tensor, float]] = []
    for _ in range(max_new_tokens):
        log_probs = log_softmax(next_token_logits(beams), dim=-1)     # (n_live, vocab)
        vocab = log_probs.shape[-1]
        candidates = (scores[:, None] + log_probs).reshape(-1)      # every child of every live beam
        top = torch.topk(candidates, min(beam_size, candidates.numel())).indices
        parents, tokens = top // vocab, top % vocab
        children = torch.cat([beams[parents], tokens[:, None]], dim=1)
        ends = tokens == eos
        finished += [(children[i], candidates[top[i]].item()) for i in range(len(top)) if ends[i]]
        beams, scores = children[~ends], candidates[top][~ends]
        if len(beams) == 0:
            break
    finished += [(beams[i], scores[i].item()) for i in range(len(beams))]
    t0 = prompt.shape[1]

    def normalised(item: tuple[torch.Tensor, float]) -> float:
        return item[1] / ((5 + len(item[0]) - t0) / 6) ** length_penalty

    best = max(finished, key=normalised)
    return best[0][None, :], normalised(best)


def cached_attention(mha: nn.Module, x: torch.Tensor,
                     past: tuple[torch.Tensor, torch.Tensor] | None = None
                     ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Causal self-attention of n new positions x (batch, n, d_model) over the cached keys and values
    `past` = (k, v), each (batch, h, t, d_head), or None; returns (out (batch, n, d_model), (k, v) for all t + n)."""
    h = mha.num_heads
    q = split_heads(mha.W_q(x), h)
    k, v = split_heads(mha.W_k(x), h), split_heads(mha.W_v(x), h)
    if past is not None:
        k = torch.cat([past[0], k], dim=2)       # along the sequence axis
        v = torch.cat([past[1], v], dim=2)
    n, total = x.shape[1], k.shape[2]
    mask = torch.triu(torch.full((n, total), float("-inf")), diagonal=total - n + 1)  # new i sees 0 .. t + i
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    return mha.W_o(merge_heads(out)), (k, v)


def decode_step(model: nn.Module, ids: torch.Tensor, cache: list | None = None) -> tuple[torch.Tensor, list]:
    """Run a ToyLM on the n new tokens ids (batch, n) that follow the t cached ones.
    Returns (logits (batch, n, vocab), the new cache: one (k, v) per layer, covering t + n positions)."""
    start = 0 if cache is None else cache[0][0].shape[2]                # how many positions came before
    x = model.embedding(ids) + model.positions.pe[start:start + ids.shape[1]]
    new_cache = []
    for i, layer in enumerate(model.layers):
        out, kv = cached_attention(layer.self_attn, layer.norm1(x), None if cache is None else cache[i])
        x = x + out
        x = x + layer.ffn(layer.norm2(x))
        new_cache.append(kv)
    return model.output(model.norm(x)), new_cache
