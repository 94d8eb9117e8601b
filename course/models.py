"""The two models chapter 10 trains, assembled from the course's pieces.

* `Seq2SeqModel(Seq2SeqConfig(...))`: token ids in, token ids out: embeddings (chapter 2, scaled by
  sqrt(d_model)) + sinusoidal positions (chapter 3) -> chapter 8's encoder-decoder `Transformer` ->
  chapter 9's `OutputProjection`, tied to the target embedding.
* `DecoderLM(DecoderLMConfig(...))`: a decoder-only language model: embedding + positions -> chapter 8's
  `Decoder` without cross-attention, under a causal mask -> tied output projection.

Each model is built from one config dataclass (its shape), and a `Parts` (`course.parts`): the course's
reference pieces by default, or a learner's own.

`use_fused_kernels(model)` switches their self-attention to PyTorch's fused
``F.scaled_dot_product_attention`` and their LayerNorms to ``F.layer_norm`` (same weights, same
results, faster); `benchmark_attention()` compares the course's attention with SDPA (agreement and
speed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial

import torch
import torch.nn.functional as F
from torch import nn

from course.parts import Parts, reference_parts
from course.reference.multi_head_attention import merge_heads, split_heads


def padding_mask(ids: torch.Tensor, pad: int) -> torch.Tensor:
    """ids (batch, n) -> additive key mask (batch, 1, n): 0 for real tokens, -inf for `pad`."""
    zeros = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
    return zeros.masked_fill(ids == pad, float("-inf"))[:, None, :]


@dataclass
class Seq2SeqConfig:
    """The shape of a `Seq2SeqModel`: vocabularies, widths, depths; `pad` is both vocabularies' padding id
    and `max_len` the longest sequence the positions cover."""

    src_vocab: int
    tgt_vocab: int
    d_model: int = 128
    num_heads: int = 4
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    d_ff: int = 512
    dropout: float = 0.0
    pad: int = 0
    max_len: int = 512


class Seq2SeqModel(nn.Module):
    """(src (batch, n_src), tgt_in (batch, n_tgt)) ids -> logits (batch, n_tgt, tgt_vocab)."""

    def __init__(self, config: Seq2SeqConfig, parts: Parts | None = None) -> None:
        super().__init__()
        parts = parts or reference_parts()
        self.config = config
        self.pad = config.pad
        self.src_embedding = parts.Embedding(config.src_vocab, config.d_model, scale=True)
        self.tgt_embedding = parts.Embedding(config.tgt_vocab, config.d_model, scale=True)
        self.positions = parts.PositionalEncoding(config.d_model, max_len=config.max_len)
        self.transformer = parts.Transformer(config.d_model, config.num_heads, config.num_encoder_layers,
                                             config.num_decoder_layers, config.d_ff, config.dropout)
        self.output = parts.OutputProjection(config.d_model, config.tgt_vocab, embedding=self.tgt_embedding)
        self.causal_mask = parts.causal_mask
        self.dropout = nn.Dropout(config.dropout)
        for embedding in (self.src_embedding, self.tgt_embedding):    # N(0, 1/d_model): scaled to unit size
            nn.init.normal_(embedding.weight, std=config.d_model ** -0.5)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """src (batch, n_src) -> memory (batch, n_src, d_model)."""
        x = self.dropout(self.positions(self.src_embedding(src)))
        return self.transformer.encode(x, padding_mask(src, self.pad))

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        """tgt_in (batch, n_tgt), memory from `encode(src)` -> logits (batch, n_tgt, tgt_vocab)."""
        n = tgt_in.shape[1]
        tgt_mask = self.causal_mask(n, device=tgt_in.device) + padding_mask(tgt_in, self.pad)
        x = self.dropout(self.positions(self.tgt_embedding(tgt_in)))
        h = self.transformer.decode(x, memory, tgt_mask, padding_mask(src, self.pad))
        return self.output(h)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.decode(tgt_in, self.encode(src), src)


@dataclass
class DecoderLMConfig:
    """The shape of a `DecoderLM`; `max_len` is its context: the longest sequence it reads (nanoGPT's
    block_size)."""

    vocab_size: int
    d_model: int = 128
    num_heads: int = 4
    num_layers: int = 4
    d_ff: int = 512
    dropout: float = 0.0
    max_len: int = 256


class DecoderLM(nn.Module):
    """ids (batch, t) -> next-token logits (batch, t, vocab_size)."""

    def __init__(self, config: DecoderLMConfig, parts: Parts | None = None) -> None:
        super().__init__()
        parts = parts or reference_parts()
        self.config = config
        self.embedding = parts.Embedding(config.vocab_size, config.d_model, scale=True)
        self.positions = parts.PositionalEncoding(config.d_model, max_len=config.max_len)
        self.decoder = parts.Decoder(config.num_layers, config.d_model, config.num_heads, config.d_ff, config.dropout,
                                     cross_attention=False)
        self.output = parts.OutputProjection(config.d_model, config.vocab_size, embedding=self.embedding)
        self.causal_mask = parts.causal_mask
        self.masks: dict[tuple[int, torch.device], torch.Tensor] = {}   # causal masks made, by length and device
        self.dropout = nn.Dropout(config.dropout)
        nn.init.normal_(self.embedding.weight, std=config.d_model ** -0.5)

    def mask(self, n: int, device: torch.device) -> torch.Tensor:
        """parts.causal_mask(n) on `device`, made once per length and device: a new one at every forward
        pass cost up to 3 ms a step on 2 busy cores."""
        key = (n, device)
        if key not in self.masks:
            self.masks[key] = self.causal_mask(n, device=device)
        return self.masks[key]

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.dropout(self.positions(self.embedding(ids)))
        return self.output(self.decoder(x, None, self.mask(ids.shape[1], ids.device)))

    @torch.no_grad()
    def next_token_logits(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (batch, t) -> logits of the token after each row, (batch, vocab)."""
        return self(ids)[:, -1]

    @torch.no_grad()
    def sample(self, prompt: torch.Tensor, new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
               generator: torch.Generator | None = None) -> torch.Tensor:
        """prompt (batch, t0) -> (batch, t0 + new_tokens): chapter 9's `sample` one token at a time,
        each from the last max_len tokens (the model's context), drawn on the CPU from `generator`."""
        # imported here: a student edition holds chapter 9's answers once it is due, and a model trains without them
        from course.reference.decoding import sample

        was_training = self.training
        self.eval()
        ids = prompt
        for _ in range(new_tokens):
            logits = self.next_token_logits(ids[:, -self.positions.max_len:]).float().cpu()
            token = sample(logits, temperature, top_k=top_k, generator=generator)        # (batch,)
            ids = torch.cat([ids, token[:, None].to(ids.device)], dim=1)
        self.train(was_training)
        return ids


# ------------------------------------------------------------ fused attention ---

@lru_cache(maxsize=16)
def _causal(n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The additive causal mask (n, n): -inf above the diagonal, 0 elsewhere (built once per shape)."""
    return torch.full((n, n), float("-inf"), dtype=dtype, device=device).triu(diagonal=1)


def _is_causal(mask: torch.Tensor) -> bool:
    """Whether an additive (n, n) mask is exactly the causal one: -inf above the diagonal, 0 elsewhere.
    One comparison with a cached causal mask: it runs in every self-attention layer at every step, where
    building the comparison afresh (seven small operations) cost 1 to 3 ms a call on 2 busy cores."""
    if mask.dim() != 2 or mask.shape[0] != mask.shape[1]:
        return False
    return torch.equal(mask, _causal(mask.shape[0], mask.dtype, mask.device))


def _fused_forward(mha: nn.Module, query: torch.Tensor, key: torch.Tensor | None = None,
                   value: torch.Tensor | None = None, mask: torch.Tensor | None = None, *,
                   causal: bool = False) -> tuple[torch.Tensor, None]:
    """Chapter 5's MultiHeadAttention.forward with F.scaled_dot_product_attention (one fused kernel)
    in place of chapter 4's attention: the same weights, the same output; no weights returned.
    Self-attention computes q, k and v with one matrix product (the three weights side by side),
    and a causal mask becomes SDPA's is_causal, its fastest path. With `causal` (a decoder-only model,
    whose every self-attention mask is the causal one) a mask is taken as causal without comparing its
    values: the comparison breaks a compiled graph and waits for the GPU, in every layer at every step."""
    key = key if key is not None else query        # MultiHeadAttention's defaults: self-attention
    value = value if value is not None else key
    if key is query and value is query:
        weight = torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight])          # (3 d_model, d_in)
        bias = None if mha.W_q.bias is None else torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias])
        q, k, v = (split_heads(t, mha.num_heads) for t in F.linear(query, weight, bias).chunk(3, dim=-1))
    else:
        q = split_heads(mha.W_q(query), mha.num_heads)   # (batch, h, n_q, d_head)
        k = split_heads(mha.W_k(key), mha.num_heads)     # (batch, h, n_k, d_head)
        v = split_heads(mha.W_v(value), mha.num_heads)   # (batch, h, n_k, d_head)
    if mask is not None and (causal or _is_causal(mask)):
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        if mask is not None:
            mask = mask.unsqueeze(-3).to(q.dtype)        # (..., 1, n_q, n_k): the same for every head
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return mha.W_o(merge_heads(heads)), None


def _fused_layer_norm(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Chapter 6's LayerNorm.forward as F.layer_norm (one kernel): x (..., d_model) -> the same shape."""
    return F.layer_norm(x, norm.gamma.shape, norm.gamma, norm.beta, norm.eps)


def use_fused_kernels(model: nn.Module, enabled: bool = True, causal: bool = False) -> nn.Module:
    """Make `model` use PyTorch's fused kernels with its own weights: F.scaled_dot_product_attention in
    every self-attention module (chapter 5's MultiHeadAttention, or any module with W_q, W_k, W_v,
    W_o and num_heads) and F.layer_norm in every LayerNorm (chapter 6's, any module with gamma,
    beta and eps). enabled=False restores the course's pieces. Cross-attention modules (named
    ``cross_attn``) keep the course's attention, so DecoderLayer.cross_weights stays available for
    plots. `causal`: every self-attention mask the model is given is the causal one (`_fused_forward`).
    Returns `model`."""
    for name, module in model.named_modules():
        if all(hasattr(module, a) for a in ("W_q", "W_k", "W_v", "W_o", "num_heads")) \
                and not name.endswith("cross_attn"):
            fused = partial(_fused_forward, module, causal=causal)
        elif all(hasattr(module, a) for a in ("gamma", "beta", "eps")):
            fused = partial(_fused_layer_norm, module)
        else:
            continue
        if enabled:
            module.forward = fused                   # an instance attribute: the same parameters
        elif "forward" in module.__dict__:
            del module.forward
    return model


def benchmark_attention(batch: int = 8, num_heads: int = 4, seq: int = 256, d_head: int = 32,
                        attention: Callable | None = None, device: str = "cpu", dtype: torch.dtype = torch.float32,
                        repeats: int = 10) -> dict[str, float]:
    """Chapter 4's attention (or `attention(q, k, v, mask) -> (out, weights)`, a learner's), given the causal
    mask, against F.scaled_dot_product_attention with is_causal=True (an explicit mask would rule out its
    FlashAttention kernel) on causal self-attention of random q, k, v (batch, heads, seq, d_head)
    of `dtype` on `device`. Returns the largest absolute difference of the outputs and the
    milliseconds per call of each."""
    parts = reference_parts()
    attention = attention or parts.scaled_dot_product_attention
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(batch, num_heads, seq, d_head, generator=g).to(device, dtype) for _ in range(3))
    mask = parts.causal_mask(seq, dtype=dtype, device=device)

    def timed(f: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, float]:
        out = f()                                              # warm-up
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(repeats):
            f()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return out, (time.perf_counter() - start) / repeats * 1e3

    with torch.no_grad():
        ours, ours_ms = timed(lambda: attention(q, k, v, mask)[0])
        fused, fused_ms = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))  # its fastest path
    return {"max_abs_diff": (ours - fused).abs().max().float().item(), "course_ms": ours_ms, "sdpa_ms": fused_ms}
