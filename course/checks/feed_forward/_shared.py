"""What chapter 7's checks share: random weights named the course's way, inputs and masks,
PyTorch's twins (``nn.TransformerEncoderLayer`` / ``nn.TransformerEncoder`` with the weights
copied in, run in float64) and the feed-forward network written out with knobs (`ffn64`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course.reference.add_norm import LayerNorm
from course.reference.multi_head_attention import MultiHeadAttention

from .. import kit
from ..kit import drawn_p, drawn_shape, grown  # noqa: F401  (this package's checks import them from here)
from course.twins import load_twin, random_weights, torch_attn_mask

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,                                        # exact: x * Phi(x), with erf
    "gelu-tanh": lambda h: F.gelu(h, approximate="tanh"),  # the tanh approximation
    "none": lambda h: h,
}
MASK_SHAPES = {"padding": "(batch, 1, seq)", "causal": "(seq, seq)", "full": "(batch, seq, seq)"}


# ------------------------------------------------------- weights by name ---

class _FFNLayout(nn.Module):
    """linear1 and linear2 as the contract names them (only used to name and size random weights)."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)


class _LayerLayout(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int) -> None:
        super().__init__()
        self.norm1, self.self_attn = LayerNorm(d_model), MultiHeadAttention(d_model, num_heads)
        self.norm2, self.ffn = LayerNorm(d_model), _FFNLayout(d_model, d_ff)


class _EncoderLayout(nn.Module):
    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_LayerLayout(d_model, num_heads, d_ff) for _ in range(num_layers))
        self.norm = LayerNorm(d_model)


def ffn_weights(rng: np.random.Generator, d_model: int, d_ff: int) -> dict[str, torch.Tensor]:
    return random_weights(_FFNLayout(d_model, d_ff), rng)


def layer_weights(rng: np.random.Generator, d_model: int, num_heads: int, d_ff: int) -> dict[str, torch.Tensor]:
    return random_weights(_LayerLayout(d_model, num_heads, d_ff), rng)


def encoder_weights(rng: np.random.Generator, num_layers: int, d_model: int, num_heads: int,
                    d_ff: int) -> dict[str, torch.Tensor]:
    return random_weights(_EncoderLayout(num_layers, d_model, num_heads, d_ff), rng)


# ------------------------------------------------------------ inputs ---
# Every case's sizes are drawn around its spec's, so that no two seeds share a case, while what the spec is
# there for stays: sizes of 1, odd sizes, d_ff below, equal to or a multiple of d_model, heads dividing d_model,
# one layer or several, dropout 0 or not.

def drawn_d_ff(rng: np.random.Generator, d: int, new_d: int, d_ff: int, most: int = 4) -> int:
    """d_ff for a d_model drawn as `new_d` in place of `d` (both of the same parity): the same multiple of it
    where d_ff is one (d_ff = d, 4 d, ...), still below it where it was below, still above it where it was above."""
    if d_ff % d == 0:
        return new_d * (d_ff // d)
    if d_ff < d:
        return d_ff if d_ff <= 1 else d_ff + kit.even(rng, 0, (new_d - d) // 2 + 1)
    return grown(rng, d_ff + new_d - d, most)


def drawn_ffn(rng: np.random.Generator, shape: tuple[int, ...], d_ff: int) -> tuple[tuple[int, ...], int]:
    """x's shape (..., d_model) and d_ff drawn around a spec's."""
    new = drawn_shape(rng, shape)
    return new, drawn_d_ff(rng, shape[-1], new[-1], d_ff)


def drawn(rng: np.random.Generator, spec: dict, most: int = 4) -> dict:
    """A spec's sizes drawn: batch `b`, sequence `n` and layers `N` (one stays one), d_model `d` as `h` heads of a
    `grown` width, `d_ff` as `drawn_d_ff`, `dropout` as `drawn_p`; other entries as they are. `most`: the
    largest offset (wider for a new module's parameters, which cost nothing to compute)."""
    out = dict(spec)
    for key in ("b", "n"):
        if key in spec:
            out[key] = grown(rng, spec[key], most)
    if "N" in spec:
        out["N"] = spec["N"] if spec["N"] <= 1 else spec["N"] + int(rng.integers(0, 2))
    if "d" in spec:
        h = spec.get("h", 1)
        out["d"] = h * grown(rng, spec["d"] // h, most)
        if "d_ff" in spec:
            out["d_ff"] = drawn_d_ff(rng, spec["d"], out["d"], spec["d_ff"], most)
    if "dropout" in spec:
        out["dropout"] = drawn_p(rng, spec["dropout"])
    return out


def make_mask(rng: np.random.Generator, kind: str | None, b: int, n: int) -> torch.Tensor | None:
    """An additive mask broadcastable to (b, n, n): padding (b, 1, n) with the first sequence
    padded and every sequence at least one position long, causal (n, n), or any finite values
    (b, n, n)."""
    if kind is None:
        return None
    if kind == "padding":
        lengths = [max(n - 1 - int(rng.integers(0, max(n // 2, 1))), 1), n,
                   *rng.integers(1, n + 1, size=max(b - 2, 0)).tolist()][:b]
        return kit.padding_mask(lengths, n)
    if kind == "causal":
        return kit.causal_mask(n)
    return torch.from_numpy(rng.uniform(-3, 0, size=(b, n, n)).astype(np.float32))


def mask_kind(mask: torch.Tensor | None) -> str | None:
    """What `make_mask` made, read off its shape: 'padding' (batch, 1, seq), 'causal' (seq, seq) or 'full'."""
    if mask is None:
        return None
    return "causal" if mask.dim() == 2 else "padding" if mask.shape[1] == 1 else "full"


def mask_label(kind: str | None) -> str:
    return f", {kind} mask {MASK_SHAPES[kind]}" if kind else ""


# ------------------------------------------------------------- twins ---

def twin_layer(d_model: int, num_heads: int, d_ff: int, weights: dict[str, torch.Tensor],
               activation: str = "relu") -> nn.TransformerEncoderLayer:
    """PyTorch's pre-LN encoder layer in float64, with the course-named `weights` copied in."""
    twin = nn.TransformerEncoderLayer(d_model, num_heads, dim_feedforward=d_ff, dropout=0.0, activation=activation,
                                      batch_first=True, norm_first=True, dtype=torch.float64)
    return load_twin(twin, weights)


def twin_encoder(num_layers: int, d_model: int, num_heads: int, d_ff: int,
                 weights: dict[str, torch.Tensor]) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(d_model, num_heads, dim_feedforward=d_ff, dropout=0.0, batch_first=True,
                                       norm_first=True, dtype=torch.float64)
    twin = nn.TransformerEncoder(layer, num_layers, norm=nn.LayerNorm(d_model, dtype=torch.float64),
                                 enable_nested_tensor=False)
    return load_twin(twin, weights)


def run_twin(twin: nn.Module, x: torch.Tensor, mask: torch.Tensor | None, num_heads: int) -> torch.Tensor:
    """The twin on x in float64, cast back to float32. A padding mask (`mask_kind`) goes in as PyTorch's
    boolean ``src_key_padding_mask`` (True = padding), any other mask as a float additive mask.
    Gradients stay on, which keeps PyTorch off its fused inference path: the plain path is the
    one documented."""
    b, n = x.shape[0], x.shape[1]
    kwargs: dict[str, Any] = {}
    if mask_kind(mask) == "padding":
        kwargs["src_key_padding_mask"] = torch.isinf(mask[:, 0, :])
    elif mask is not None:
        name = "mask" if isinstance(twin, nn.TransformerEncoder) else "src_mask"
        kwargs[name] = torch_attn_mask(mask, b, num_heads, n, n)
    with torch.enable_grad():
        out = twin(x.double(), **kwargs)
    return out.detach().float()


# ------------------------------------------------------ the FFN written out ---

def ffn64(x: torch.Tensor, w: dict[str, torch.Tensor], *, act: str = "relu", where: str = "between",
          bias: bool = True, prefix: str = "") -> torch.Tensor:
    """act(x W1^T + b1) W2^T + b2 in float64. Knobs: the activation (`ACTIVATIONS`), `where` it goes
    ('between' the linears, 'after' the second, 'both'), the biases dropped."""
    f = ACTIVATIONS[act]
    p = {k.removeprefix(prefix): v.double() for k, v in w.items() if k.startswith(prefix)}
    b1, b2 = (p["linear1.bias"], p["linear2.bias"]) if bias else (0.0, 0.0)
    h = x.double() @ p["linear1.weight"].T + b1
    if where in ("between", "both"):
        h = f(h)
    out = h @ p["linear2.weight"].T + b2
    return f(out) if where in ("after", "both") else out


# ------------------------------------------------------ parameter tables ---

def layer_table(d: int, d_ff: int, prefix: str = "", *, norm2: bool = True) -> dict[str, tuple]:
    """{name: (shape, 'float32')} of an EncoderLayer(d, h, d_ff) (the number of heads does not show)."""
    shapes = {"norm1.gamma": (d,), "norm1.beta": (d,)}
    for w in ("W_q", "W_k", "W_v", "W_o"):
        shapes |= {f"self_attn.{w}.weight": (d, d), f"self_attn.{w}.bias": (d,)}
    if norm2:
        shapes |= {"norm2.gamma": (d,), "norm2.beta": (d,)}
    shapes |= {"ffn.linear1.weight": (d_ff, d), "ffn.linear1.bias": (d_ff,), "ffn.linear2.weight": (d, d_ff),
               "ffn.linear2.bias": (d,)}
    return {prefix + name: (shape, "float32") for name, shape in shapes.items()}
