"""PyTorch's own Transformer modules as twins of the course's, with the course's weights copied in.

The course's modules (chapters 5-8) name their parameters the course's way
(``self_attn.W_q.weight``, ``norm1.gamma``, ``ffn.linear1.bias``);
``nn.TransformerEncoderLayer``, ``nn.TransformerDecoderLayer``,
``nn.TransformerEncoder``/``Decoder`` and ``nn.Transformer`` name the same
numbers PyTorch's way (``self_attn.in_proj_weight``, ``norm1.weight``,
``linear1.bias``). `torch_state_dict` renames one into the other, so a check
(or a reader, in chapters 7 and 8) can draw random weights once, load them into
the course's module and into PyTorch's twin with `load_twin`, and compare;
`torch_attn_mask` puts the course's masks in the layout those modules take, and
`padding_mask` makes one in the course's layout. Public: the student edition and
the grading sandbox ship it (it holds no answer: PyTorch's modules do the work).
"""

from __future__ import annotations

import re

import numpy as np
import torch
from torch import nn

from course.probing.kit import randn

_QKV = re.compile(r"(?P<prefix>.*)W_(?P<which>[qkv])\.(?P<kind>weight|bias)")
_RENAMES = (                      # the course's name piece -> PyTorch's
    ("cross_attn.", "multihead_attn."),
    ("ffn.", ""),                 # PyTorch's layers hold linear1/linear2 directly
    ("W_o.", "out_proj."),
    (".gamma", ".weight"),
    (".beta", ".bias"),
)


def _rename(name: str) -> str:
    for ours, theirs in _RENAMES:
        name = name.replace(ours, theirs)
    return name


def torch_state_dict(ours: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The course's parameters under PyTorch's names: W_q, W_k, W_v stacked into
    ``in_proj_weight``/``in_proj_bias`` (rows q, then k, then v), W_o as ``out_proj``,
    gamma/beta as weight/bias, ``ffn.linearK`` as ``linearK``, ``cross_attn`` as
    ``multihead_attn``. Other names (``layers.0.``, ``encoder.``, ``norm.``) are kept."""
    out: dict[str, torch.Tensor] = {}
    stacks: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    for name, value in ours.items():
        qkv = _QKV.fullmatch(name)
        if qkv:
            stacks.setdefault((qkv["prefix"], qkv["kind"]), {})[qkv["which"]] = value
        else:
            out[_rename(name)] = value
    for (prefix, kind), parts in stacks.items():
        out[_rename(prefix) + f"in_proj_{kind}"] = torch.cat([parts[c] for c in "qkv"])
    return out


def load_twin(twin: nn.Module, ours: dict[str, torch.Tensor]) -> nn.Module:
    """Copy the course-named weights `ours` into PyTorch's module `twin` (strict: every
    parameter of the twin must be given, and nothing else); returns the twin in eval mode."""
    theirs = torch_state_dict(ours)
    expected = {name for name, _ in twin.named_parameters()}
    if set(theirs) != expected:
        raise KeyError(f"weights do not match {type(twin).__name__}: missing {sorted(expected - set(theirs))}, "
                       f"unexpected {sorted(set(theirs) - expected)}")
    with torch.no_grad():
        params = dict(twin.named_parameters())
        for name, value in theirs.items():
            params[name].copy_(value)
    return twin.eval()


def random_weights(module: nn.Module, rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """Random float32 values for every parameter of `module` (the course's reference module
    of the right sizes), by name: gains around 1, biases and LayerNorm shifts around 0, weight
    matrices scaled by 1/sqrt(fan_in) so activations stay of order one through a stack."""
    weights = {}
    for name, p in module.named_parameters():
        x = randn(rng, *p.shape)
        if name.endswith("gamma"):
            weights[name] = 1.0 + 0.3 * x
        elif p.dim() == 1:
            weights[name] = 0.3 * x
        else:
            weights[name] = x / p.shape[-1] ** 0.5
    return weights


def torch_attn_mask(mask: torch.Tensor | None, batch: int, num_heads: int, n_q: int,
                    n_k: int) -> torch.Tensor | None:
    """The course's additive mask, broadcastable to (batch, n_q, n_k) and the same for every
    head, in the layout PyTorch's attention modules take: (batch * num_heads, n_q, n_k),
    batch-major, float64. None stays None."""
    if mask is None:
        return None
    full = mask.double().expand(batch, n_q, n_k)
    return full.unsqueeze(1).expand(batch, num_heads, n_q, n_k).reshape(batch * num_heads, n_q, n_k)


def padding_mask(lengths: list[int], n_k: int) -> torch.Tensor:
    """(batch, 1, n_k) additive mask hiding the keys past each sequence's length."""
    keep = torch.arange(n_k)[None, :] < torch.tensor(lengths)[:, None]
    return torch.where(keep, 0.0, float("-inf"))[:, None, :]
