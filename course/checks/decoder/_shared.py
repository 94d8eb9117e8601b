"""What the chapter's checks share: the course's modules' layout (`Skeleton*`, built from chapters 5-7's
reference pieces, for the parameter names, random weights and the mistakes), PyTorch's twins as oracles
(`twin_layer`, `twin_decoder`, `twin_transformer`, weights copied in with `course.twins`), masks in
PyTorch's layout (`course.twins.torch_attn_mask`), and the decoder written out in float64 with knobs for the usual slips
(`layer64`, `decoder64`, `transformer64`)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch
from torch import nn

from course.reference.add_norm import LayerNorm
from course.reference.feed_forward import Encoder, FeedForward
from course.reference.multi_head_attention import MultiHeadAttention

from .. import kit
from ..framework import NOT_APPLICABLE, Case
from ..kit import drawn_p, grown  # noqa: F401  (this package's checks import them from here)
from course.twins import load_twin, random_weights

NEG_INF = float("-inf")


# ------------------------------------------------------ the course's layout ---

class SkeletonLayer(nn.Module):
    """The parameters `DecoderLayer` must hold, by name, from earlier chapters' modules (no forward of
    its own: `layer64` runs it). Without cross-attention there is no cross_attn and no norm2."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, cross_attention: bool = True) -> None:
        super().__init__()
        self.norm1 = LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        if cross_attention:
            self.norm2 = LayerNorm(d_model)
            self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.norm3 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)


class SkeletonDecoder(nn.Module):
    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int,
                 cross_attention: bool = True) -> None:
        super().__init__()
        self.layers = nn.ModuleList(SkeletonLayer(d_model, num_heads, d_ff, cross_attention)
                                    for _ in range(num_layers))
        self.norm = LayerNorm(d_model)


class SkeletonTransformer(nn.Module):
    def __init__(self, d_model: int, num_heads: int, num_encoder_layers: int, num_decoder_layers: int,
                 d_ff: int) -> None:
        super().__init__()
        self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff)
        self.decoder = SkeletonDecoder(num_decoder_layers, d_model, num_heads, d_ff)


def weights_for(skeleton: nn.Module, rng: np.random.Generator) -> dict[str, torch.Tensor]:
    return random_weights(skeleton, rng)


def loaded64(skeleton: nn.Module, weights: dict[str, torch.Tensor]) -> nn.Module:
    """The skeleton in float64 holding `weights`, in eval mode."""
    skeleton = skeleton.double().eval()
    kit.load_weights(skeleton, weights)
    return skeleton


# -------------------------------------------------------- PyTorch's twins ---

def _no_cross(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A decoder-only layer's weights under nn.TransformerEncoderLayer's layout: its norm3 is the
    encoder layer's norm2 (the norm before the feed-forward network)."""
    return {name.replace("norm3.", "norm2."): w for name, w in weights.items()}


def twin_layer(d_model: int, num_heads: int, d_ff: int, weights: dict, cross_attention: bool = True) -> nn.Module:
    """nn.TransformerDecoderLayer (nn.TransformerEncoderLayer without cross-attention), pre-LN,
    batch-first, float64, no dropout, with `weights` copied in."""
    kind = nn.TransformerDecoderLayer if cross_attention else nn.TransformerEncoderLayer
    twin = kind(d_model, num_heads, d_ff, dropout=0.0, batch_first=True, norm_first=True, dtype=torch.float64)
    return load_twin(twin, weights if cross_attention else _no_cross(weights))


def twin_decoder(num_layers: int, d_model: int, num_heads: int, d_ff: int, weights: dict,
                 cross_attention: bool = True) -> nn.Module:
    kind = nn.TransformerDecoder if cross_attention else nn.TransformerEncoder
    layer = (nn.TransformerDecoderLayer if cross_attention else nn.TransformerEncoderLayer)(
        d_model, num_heads, d_ff, dropout=0.0, batch_first=True, norm_first=True, dtype=torch.float64)
    norm = nn.LayerNorm(d_model, dtype=torch.float64)
    extra = {} if cross_attention else {"enable_nested_tensor": False}
    twin = kind(layer, num_layers, norm=norm, **extra)
    return load_twin(twin, weights if cross_attention else _no_cross(weights))


def twin_transformer(d_model: int, num_heads: int, n_enc: int, n_dec: int, d_ff: int, weights: dict) -> nn.Module:
    with warnings.catch_warnings():  # "enable_nested_tensor is True, but ... norm_first was True": harmless
        warnings.simplefilter("ignore")
        twin = nn.Transformer(d_model, num_heads, n_enc, n_dec, d_ff, dropout=0.0, batch_first=True,
                              norm_first=True, dtype=torch.float64)
    return load_twin(twin, weights)


# ------------------------------------------------------------------ inputs ---
# Every case's sizes are drawn around its spec's, so that no two seeds share a case, while what the spec is
# there for stays: sizes of 1, odd sizes, a source longer, shorter than or as long as the target, heads
# dividing d_model, one layer or several, dropout 0 or not.

def drawn(rng: np.random.Generator, spec: dict, most: int = 4) -> dict:
    """A spec's sizes drawn: the batch `b` `grown`; the target and source lengths `nt`, `ns` grown by one drawn
    offset (so that their order, and their equality, stay; a length of one stays one); the layer counts `n`,
    `ne`, `nd` (one stays one) up by 0 or 1; d_model `d` as `h` heads of a grown width; `ff` grown; `p` and
    `dropout` as `drawn_p`; other entries as they are. `most`: the largest offset."""
    out = dict(spec)
    if "b" in spec:
        out["b"] = grown(rng, spec["b"], most)
    offset = kit.even(rng, 0, most // 2 + 1)
    for key in ("nt", "ns"):
        if spec.get(key) is not None and spec[key] > 1:
            out[key] = spec[key] + offset
    for key in ("n", "ne", "nd"):
        if key in spec and spec[key] > 1:
            out[key] = spec[key] + int(rng.integers(0, 2))
    if "d" in spec:
        h = spec.get("h", 1)
        out["d"] = h * grown(rng, spec["d"] // h, most)
    if "ff" in spec:
        out["ff"] = grown(rng, spec["ff"], most)
    for key in ("p", "dropout"):
        if key in spec:
            out[key] = drawn_p(rng, spec[key])
    return out


def lengths_for(rng: np.random.Generator, batch: int, n: int) -> list[int]:
    """>= 1 real token each; the first sequence padded (when n > 1), the second not."""
    return [max(n - 2, 1), n, *rng.integers(1, n + 1, size=max(batch - 2, 0)).tolist()][:batch]


# ------------------------------------------------ the decoder, written out ---

def numeric(output: Any) -> Any:
    """A mistake's output, NOT_APPLICABLE where the wrong code raises (a shape error names nothing)."""
    def gated(case: Case) -> Any:
        try:
            return output(case)
        except RuntimeError:
            return NOT_APPLICABLE
    return gated


def layer64(L: nn.Module, x: torch.Tensor, memory: torch.Tensor | None, tgt_mask: torch.Tensor | None,
            memory_mask: torch.Tensor | None, *, self_mask: str = "tgt", cross_mask: str = "memory",
            q_from: str = "decoder", skip: tuple[str, ...] = (), order: tuple[str, ...] = ("self", "cross", "ffn"),
            post_ln: bool = False, cross_norm: str = "norm2", weights: list | None = None) -> torch.Tensor:
    """One pre-LN decoder layer in float64, the skeleton `L`'s weights; the knobs are the slips:
    `self_mask`/`cross_mask` name the mask each attention gets ('tgt', 'memory', 'causal', 'none');
    `q_from='encoder'` takes the cross-attention's queries from memory (keys/values from the decoder);
    `skip` lists sub-layers without a residual; `order` the sub-layers' order; `post_ln` wires
    norm(x + sublayer(x)); `cross_norm` the norm before cross-attention. `weights` collects the
    cross-attention weights."""
    n = x.shape[1]
    masks = {"tgt": tgt_mask, "memory": memory_mask, "none": None, "causal": kit.causal_mask(n).double()}
    masks = {k: None if v is None else v.double() for k, v in masks.items()}

    def self_block(h: torch.Tensor) -> torch.Tensor:
        return L.self_attn(h, mask=masks[self_mask])[0]

    def cross_block(h: torch.Tensor) -> torch.Tensor:
        q, kv = (h, memory) if q_from == "decoder" else (memory, h)
        out, w = L.cross_attn(q, kv, kv, mask=masks[cross_mask])
        if weights is not None:
            weights.append(w)
        return out

    blocks = {"self": (L.norm1, self_block), "ffn": (L.norm3, L.ffn)}
    if hasattr(L, "cross_attn"):
        blocks["cross"] = (getattr(L, cross_norm), cross_block)
    for name in order:
        if name not in blocks:
            continue
        norm, sub = blocks[name]
        if post_ln:
            x = norm(x + sub(x))
        elif name in skip:
            x = sub(norm(x))
        else:
            x = x + sub(norm(x))
    return x


def decoder64(D: nn.Module, x: torch.Tensor, memory: torch.Tensor | None, tgt_mask: torch.Tensor | None,
              memory_mask: torch.Tensor | None, *, final_norm: str = "end", pass_masks: bool = True,
              chain: bool = True, **layer_knobs: Any) -> torch.Tensor:
    """The decoder stack in float64: `final_norm` 'end' (right), 'none' or 'every' (after each layer);
    `pass_masks=False` gives the layers no masks; `chain=False` feeds every layer the stack's input."""
    x0 = x
    for layer in D.layers:
        x = layer64(layer, x if chain else x0, memory, tgt_mask if pass_masks else None,
                    memory_mask if pass_masks else None, **layer_knobs)
        if final_norm == "every":
            x = D.norm(x)
    return D.norm(x) if final_norm == "end" else x
