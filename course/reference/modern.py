"""Reference solutions of chapter 11_modern.

Generated from solutions/11_modern/11_modern.ipynb (cells tagged 'export') by
`python -m autograder release`. Do not edit: edit the solution notebook.
"""
from dataclasses import dataclass

import torch
from torch import nn

# earlier chapters' pieces: chapter 4's attention, chapter 5's heads, chapter 7's SwiGLU
from course.reference.attention import scaled_dot_product_attention
from course.reference.feed_forward import SwiGLUFeedForward
from course.reference.multi_head_attention import merge_heads, split_heads


class RMSNorm(nn.Module):
    """Root-mean-square layer normalisation (Zhang & Sennrich 2019): rescale, no centring, no bias."""

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # the gain g: starts at one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (..., d_model) -> x / sqrt(mean(x**2) + eps) * weight, the same shape and dtype."""
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(f"x has {x.shape[-1]} features, this RMSNorm {self.weight.shape[0]}")
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x    # half precision: float32
        rms = torch.sqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)     # (..., 1)
        return (h / rms * self.weight.to(h.dtype)).to(x.dtype)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding: rotate each pair of features of x by an angle set by its position.

    x: (..., seq, d_head) float, d_head even; positions: (seq,) int64, the position of each row.
    Pair i of a row at position p is (x[2i], x[2i + 1]); it turns by p * theta_i,
    theta_i = base ** (-2i / d_head):
        out[2i]     = x[2i] * cos(p theta_i) - x[2i + 1] * sin(p theta_i)
        out[2i + 1] = x[2i] * sin(p theta_i) + x[2i + 1] * cos(p theta_i)
    (the row vector times chapter 3's offset_matrix(-p, d_head)). Frequencies and angles in float64; returns a new
    tensor of x's shape and dtype. Raises ValueError for an odd d_head or positions of a shape other
    than (seq,).
    """
    d_head = x.shape[-1]
    if d_head % 2:
        raise ValueError(f"d_head must be even, got {d_head}")
    if positions.shape != (x.shape[-2],):
        raise ValueError(f"positions must have shape ({x.shape[-2]},), got {tuple(positions.shape)}")
    work = torch.device("cpu") if x.device.type == "mps" else x.device         # Apple's MPS has no float64
    i = torch.arange(d_head // 2, dtype=torch.float64, device=work)
    angle = positions.to(work, torch.float64)[:, None] * base ** (-2 * i / d_head)  # (seq, d_head / 2)
    cos, sin = torch.cos(angle).to(x.device, x.dtype), torch.sin(angle).to(x.device, x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]                                      # (..., seq, d_head / 2)
    out = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)  # (..., seq, d_head / 2, 2)
    return out.flatten(-2)


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with grouped queries (Ainslie et al. 2023) and rotary positions, no biases."""

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, rope_base: float = 10000.0) -> None:
        super().__init__()
        if num_kv_heads < 1 or d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError(f"need num_kv_heads >= 1, num_heads | d_model and num_kv_heads | num_heads, got "
                             f"d_model = {d_model}, num_heads = {num_heads}, num_kv_heads = {num_kv_heads}")
        if d_model // num_heads % 2:
            raise ValueError(f"d_head = {d_model // num_heads} is odd: apply_rope turns pairs of features")
        self.num_heads, self.num_kv_heads, self.rope_base = num_heads, num_kv_heads, rope_base
        self.d_head = d_model // num_heads
        self.W_q = nn.Linear(d_model, num_heads * self.d_head, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.W_o = nn.Linear(num_heads * self.d_head, d_model, bias=False)

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x: (batch, n, d_model); cache: (k, v), each (batch, num_kv_heads, t, d_head), or None (t = 0).
        Returns (out (batch, n, d_model), the new cache: t + n positions)."""
        t = 0 if cache is None else cache[0].shape[2]
        n = x.shape[1]
        positions = torch.arange(t, t + n, device=x.device)
        q = apply_rope(split_heads(self.W_q(x), self.num_heads), positions, self.rope_base)     # (b, h, n, d)
        k = apply_rope(split_heads(self.W_k(x), self.num_kv_heads), positions, self.rope_base)  # (b, g, n, d)
        v = split_heads(self.W_v(x), self.num_kv_heads)                                          # (b, g, n, d)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)               # (b, g, t+n, d)
        group = self.num_heads // self.num_kv_heads
        k_all, v_all = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)      # (b, h, t+n, d)
        future = torch.ones(n, t + n, dtype=torch.bool, device=x.device).triu(diagonal=t + 1)
        mask = torch.zeros(n, t + n, dtype=x.dtype, device=x.device).masked_fill(future, float("-inf"))
        heads, _ = scaled_dot_product_attention(q, k_all, v_all, mask)                          # (b, h, n, d)
        return self.W_o(merge_heads(heads)), (k, v)


class AdamW(torch.optim.Optimizer):
    """AdamW (Loshchilov & Hutter 2019), step for step what torch.optim.AdamW computes."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"need lr, eps, weight_decay >= 0 and betas in [0, 1), got lr={lr}, eps={eps}, "
                             f"weight_decay={weight_decay}, betas={betas}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():   # step runs under no_grad; the closure's backward needs a graph
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"], state["m"], state["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                state["step"] += 1
                t, m, v, g = state["step"], state["m"], state["v"], p.grad
                p.mul_(1 - lr * decay)                        # decoupled weight decay
                m.mul_(beta1).add_(g, alpha=1 - beta1)        # first moment
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)  # second moment
                m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
                p.sub_(lr * m_hat / (v_hat.sqrt() + eps))
        return loss


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's two parameter groups for `model`.

    [{"params": [the weight of every nn.Linear], "weight_decay": weight_decay},
     {"params": [every other parameter: biases, norm gains, embeddings], "weight_decay": 0.0}]
    Each list in model.parameters() order, every parameter once; a weight an nn.Embedding shares
    with an nn.Linear (a tied output layer) is an embedding's: no decay.
    """
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    linear = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)} - embeddings
    params = list(model.parameters())
    return [{"params": [p for p in params if id(p) in linear], "weight_decay": weight_decay},
            {"params": [p for p in params if id(p) not in linear], "weight_decay": 0.0}]


class ModernDecoderLayer(nn.Module):
    """A decoder-only block as Llama 2's largest models and Llama 3 build it: pre-norm RMSNorm,
    grouped-query attention with RoPE, SwiGLU, no biases."""

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, d_ff: int, rope_base: float = 10000.0,
                 eps: float = 1e-5) -> None:
        super().__init__()
        self.norm1 = RMSNorm(d_model, eps)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads, rope_base)
        self.norm2 = RMSNorm(d_model, eps)
        self.ffn = SwiGLUFeedForward(d_model, d_ff)

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x: (batch, n, d_model), cache as GroupedQueryAttention's -> (out (batch, n, d_model), new cache)."""
        attended, cache = self.attn(self.norm1(x), cache)
        h = x + attended
        return h + self.ffn(self.norm2(h)), cache


@dataclass
class ModernConfig:
    """The shape of a ModernLM."""

    vocab_size: int
    d_model: int = 128
    num_heads: int = 4
    num_kv_heads: int = 2             # grouped queries: num_heads // num_kv_heads query heads share one
    num_layers: int = 4
    d_ff: int = 344                   # SwiGLU's hidden width: about 8/3 d_model (three matrices, not two)
    rope_base: float = 10000.0
    eps: float = 1e-5                 # RMSNorm's epsilon
    tie_embeddings: bool = True       # the output layer's weight is the embedding's


class ModernLM(nn.Module):
    """ids (batch, n) -> next-token logits (batch, n, vocab_size): embedding, ModernDecoderLayers, a
    final RMSNorm, a linear output layer without bias (tied to the embedding by default)."""

    def __init__(self, config: ModernConfig) -> None:
        super().__init__()
        c = config
        self.embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.layers = nn.ModuleList(ModernDecoderLayer(c.d_model, c.num_heads, c.num_kv_heads, c.d_ff, c.rope_base,
                                                       c.eps) for _ in range(c.num_layers))
        self.norm = RMSNorm(c.d_model, c.eps)
        self.output = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_embeddings:
            self.output.weight = self.embedding.weight

    def forward(self, ids: torch.Tensor, caches: list | None = None) -> tuple[torch.Tensor, list]:
        """ids: (batch, n) int64; caches: one per layer (as the last call returned) or None.
        Returns (logits (batch, n, vocab_size), the new caches)."""
        x = self.embedding(ids)                                     # (batch, n, d_model): no positions here
        new = []
        for layer, cache in zip(self.layers, caches or [None] * len(self.layers)):
            x, cache = layer(x, cache)
            new.append(cache)
        return self.output(self.norm(x)), new


def model_costs(config: ModernConfig, context: int, batch: int = 1, bytes_per_value: int = 2) -> dict[str, int]:
    """What a ModernLM of `config` costs, from the configuration alone: its parameters (a tied weight
    once), the bytes of its weights, of AdamW's float32 m and v, and of the KV cache of `batch`
    sequences of `context` tokens, and its training FLOPs per token, 6 N + 12 L context d_model
    (N: every parameter but an untied input embedding)."""
    c = config
    kv_width = c.num_kv_heads * (c.d_model // c.num_heads)  # what W_k and W_v project to
    per_layer = (2 * c.d_model                              # the gains of norm1 and norm2
                 + 2 * c.d_model * c.d_model                # W_q and W_o
                 + 2 * c.d_model * kv_width                 # W_k and W_v
                 + 3 * c.d_model * c.d_ff)                  # w_gate, w_up and w_down
    embedding = c.vocab_size * c.d_model
    parameters = embedding * (1 if c.tie_embeddings else 2) + c.num_layers * per_layer + c.d_model
    multiplied = parameters - (0 if c.tie_embeddings else embedding)  # an untied input embedding is a lookup
    return {"parameters": parameters,
            "weight_bytes": parameters * bytes_per_value,
            "adamw_bytes": 8 * parameters,
            "kv_cache_bytes": 2 * c.num_layers * kv_width * context * batch * bytes_per_value,
            "train_flops_per_token": 6 * multiplied + 12 * c.num_layers * context * c.d_model}
