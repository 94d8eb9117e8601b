"""A toy sequence task on which attention has a known right answer: reversal.

The task: read a short sequence of digits and output it reversed. Output
position ``i`` must copy input position ``n - 1 - i``, so a model that solves
it with one attention layer must learn to look *exactly there*: its attention
map should be the anti-diagonal. That makes it the smallest honest test of
*learned* attention (chapter 4), of per-head maps (chapter 5), and a source
of batches for decoding demos (chapters 8 and 9).

Pieces, all seeded and CPU-friendly:

* `Vocab` / `VOCAB`: special tokens ``<pad>``, ``<bos>``, ``<eos>`` (ids 0, 1,
  2) followed by the digits ``0`` .. ``9``; ``encode("3141")``, ``decode(ids)``.
* `reversal_batch(batch_size, length, generator=...)`: a `ReversalBatch` of
  source ids, reversed target ids and lengths (variable lengths are padded
  with ``<pad>``); ``decoder_input()`` / ``decoder_target()`` add
  ``<bos>``/``<eos>`` for sequence-to-sequence models.
* `ToyAttentionModel`: embedding + sinusoidal positions (the course's
  chapters 2 and 3) -> one attention module -> a linear read-out to the
  vocabulary. The attention module is an argument: anything called as
  ``attention(x, mask=...)`` returning ``(output, weights)``, e.g. chapter 4's
  ``AttentionHead`` or chapter 5's ``MultiHeadAttention``.
* `train_reversal(...)` -> `TrainedToy`: trains it (a few seconds on a CPU)
  and gives ``.accuracy``, ``.attention_maps(example)``, ``.predict(example)``.
* `plot_attention(weights, tokens_in, tokens_out)`: one map as a heat map.

And a decoder-only version of the task, for the decoding demos (chapter 9):

* `LM_VOCAB`: the same tokens plus a separator ``<sep>`` (id 3).
* `reversal_lm_batch(batch_size, length, ...)`: sequences ``<bos> digits <sep>
  reversed digits <eos>`` (padded), and which positions the loss counts: only
  the continuation after ``<sep>``, since the prompt's digits are random.
* `ToyLM`: embedding + positions -> `num_layers` pre-LN blocks (chapter 7's
  ``EncoderLayer`` under a causal mask: a decoder without cross-attention)
  -> final LayerNorm -> linear to the vocabulary. ``next_token_logits(ids)``
  gives the logits of the token after each row of ``ids``.
* `train_toy_lm(...)` -> `TrainedLM`: trains it in a few seconds on a CPU;
  ``.prompt("3141")`` builds the prompt ``<bos> 3 1 4 1 <sep>``.

Example::

    toy = train_reversal(seed=0)
    print(toy.accuracy, toy.seconds)
    weights = toy.attention_maps("31415926")        # (8, 8); (heads, 8, 8) for several heads
    plot_attention(weights, list("31415926"), list(toy.predict("31415926")))
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from course.reference.embedding import Embedding
from course.reference.positional_encoding import PositionalEncoding
from course.train import cpu_threads

__all__ = [
    "LM_VOCAB",
    "VOCAB",
    "ReversalBatch",
    "ToyAttentionModel",
    "ToyLM",
    "TrainedLM",
    "TrainedToy",
    "Vocab",
    "plot_attention",
    "reversal_batch",
    "reversal_lm_batch",
    "train_reversal",
    "train_toy_lm",
]


@dataclass(frozen=True)
class Vocab:
    """Special tokens first, then one token per symbol (by default the ten digits)."""

    symbols: str = "0123456789"
    specials: tuple[str, ...] = ("<pad>", "<bos>", "<eos>")

    @property
    def tokens(self) -> list[str]:
        return [*self.specials, *self.symbols]

    @property
    def size(self) -> int:
        return len(self.specials) + len(self.symbols)

    @property
    def pad(self) -> int:
        return self.specials.index("<pad>")

    @property
    def bos(self) -> int:
        return self.specials.index("<bos>")

    @property
    def eos(self) -> int:
        return self.specials.index("<eos>")

    @property
    def sep(self) -> int:
        """The separator's id (a vocabulary without ``<sep>`` raises ValueError)."""
        return self.specials.index("<sep>")

    @property
    def first_symbol(self) -> int:
        return len(self.specials)

    def encode(self, text: str) -> list[int]:
        """``"314"`` -> ids of the symbols (no special tokens added)."""
        return [self.first_symbol + self.symbols.index(ch) for ch in text]

    def decode(self, ids: Sequence[int] | torch.Tensor, keep_specials: bool = False) -> str:
        """ids -> text; special tokens are dropped unless `keep_specials`."""
        out = []
        for i in (ids.tolist() if isinstance(ids, torch.Tensor) else ids):
            if i >= self.first_symbol:
                out.append(self.symbols[i - self.first_symbol])
            elif keep_specials:
                out.append(self.specials[i])
        return "".join(out)


VOCAB = Vocab()
LM_VOCAB = Vocab(specials=("<pad>", "<bos>", "<eos>", "<sep>"))


@dataclass
class ReversalBatch:
    """A batch of the reversal task. src, tgt: (batch, n) int64, padded with `vocab.pad`
    after each sequence's length; tgt[b, i] = src[b, lengths[b] - 1 - i]."""

    src: torch.Tensor
    tgt: torch.Tensor
    lengths: torch.Tensor
    vocab: Vocab = VOCAB

    def padding_mask(self) -> torch.Tensor:
        """Additive key mask (batch, 1, n): 0 for real tokens, -inf for padding."""
        real = torch.arange(self.src.shape[1])[None, :] < self.lengths[:, None]
        return torch.zeros(real.shape).masked_fill(~real, float("-inf"))[:, None, :]

    def decoder_input(self) -> torch.Tensor:
        """(batch, n + 1): <bos> followed by the target (teacher forcing)."""
        bos = torch.full((len(self.tgt), 1), self.vocab.bos)
        return torch.cat([bos, self.tgt], dim=1)

    def decoder_target(self) -> torch.Tensor:
        """(batch, n + 1): the target followed by <eos> (then padding)."""
        out = torch.cat([self.tgt, torch.full((len(self.tgt), 1), self.vocab.pad)], dim=1)
        out[torch.arange(len(out)), self.lengths] = self.vocab.eos
        return out


def reversal_batch(batch_size: int, length: int, *, min_length: int | None = None,
                   generator: torch.Generator | None = None, vocab: Vocab = VOCAB) -> ReversalBatch:
    """Random symbol sequences and their reversals. Lengths are drawn uniformly from
    [min_length, length] (all equal to `length` when min_length is None)."""
    lo = length if min_length is None else min_length
    lengths = torch.randint(lo, length + 1, (batch_size,), generator=generator)
    src = torch.randint(vocab.first_symbol, vocab.size, (batch_size, length), generator=generator)
    real = torch.arange(length)[None, :] < lengths[:, None]
    src = src.masked_fill(~real, vocab.pad)
    rev = (lengths[:, None] - 1 - torch.arange(length)[None, :]).clamp(min=0)  # source index per output
    tgt = src.gather(1, rev).masked_fill(~real, vocab.pad)
    return ReversalBatch(src, tgt, lengths, vocab)


class ToyAttentionModel(nn.Module):
    """ids (batch, n) -> (logits (batch, n, |V|), attention weights).

    embedding (chapter 2) + sinusoidal positions (chapter 3) -> `attention` -> linear.
    `attention(x, mask=mask)` must return (output (batch, n, width), weights).
    """

    def __init__(self, attention: nn.Module, d_model: int, vocab: Vocab = VOCAB, max_len: int = 64) -> None:
        super().__init__()
        self.vocab = vocab
        self.embedding = Embedding(vocab.size, d_model)
        self.positions = PositionalEncoding(d_model, max_len=max_len)
        self.attention = attention
        with torch.no_grad():  # the attention's output width, whatever module it is
            width = attention(torch.zeros(1, 1, d_model))[0].shape[-1]
        self.readout = nn.Linear(width, vocab.size)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.positions(self.embedding(ids))
        out, weights = self.attention(x, mask=mask)
        return self.readout(out), weights


@dataclass
class TrainedToy:
    """A trained `ToyAttentionModel` with what the demos need."""

    model: ToyAttentionModel
    length: int
    accuracy: float           # per-token accuracy on a fresh held-out batch
    sequence_accuracy: float  # fraction of held-out sequences reversed without a single error
    seconds: float            # training time
    losses: list[float] = field(default_factory=list)

    @property
    def vocab(self) -> Vocab:
        return self.model.vocab

    def _ids(self, example: str | Sequence[int] | torch.Tensor) -> torch.Tensor:
        ids = self.vocab.encode(example) if isinstance(example, str) else example
        return torch.as_tensor(ids, dtype=torch.long).reshape(1, -1)

    @torch.no_grad()
    def run(self, example: str | Sequence[int] | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One sequence (text or ids) -> (logits (n, |V|), weights without the batch axis)."""
        self.model.eval()
        logits, weights = self.model(self._ids(example))
        return logits[0], weights[0]

    def attention_maps(self, example: str | Sequence[int] | torch.Tensor) -> torch.Tensor:
        """The attention weights on one sequence: (n, n) for one head, (heads, n, n) for several.
        Row i (a query: output position i) is a distribution over the input positions."""
        return self.run(example)[1]

    def predict(self, example: str | Sequence[int] | torch.Tensor) -> str:
        """The model's output for one sequence, as text."""
        return self.vocab.decode(self.run(example)[0].argmax(dim=-1))


def _fit(model: nn.Module, loss: Callable[[], torch.Tensor], steps: int, lr: float) -> tuple[list[float], float]:
    """`steps` Adam steps on `loss()` (a fresh batch each call), on one CPU thread: tensors this
    small run fastest there, and immune to a busy machine. Returns the losses and the seconds
    taken; leaves the model in eval mode."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    model.train()
    with cpu_threads(1):
        start = time.perf_counter()
        for _ in range(steps):
            value = loss()
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
            losses.append(value.item())
        seconds = time.perf_counter() - start
    model.eval()
    return losses, seconds


def _default_attention(d_model: int, num_heads: int) -> nn.Module:
    if num_heads == 1:
        from course.reference.attention import AttentionHead
        return AttentionHead(d_model, d_model)
    from course.reference.multi_head_attention import MultiHeadAttention
    return MultiHeadAttention(d_model, num_heads)


def train_reversal(attention: nn.Module | Callable[[int], nn.Module] | None = None, *,
                   num_heads: int = 1, d_model: int = 32, length: int = 8, seed: int = 0,
                   steps: int = 300, batch_size: int = 64, lr: float = 1e-2,
                   vocab: Vocab = VOCAB) -> TrainedToy:
    """Train a one-layer attention model to reverse `length` symbols; CPU, a few seconds.

    attention: a module, or a factory ``d_model -> module`` (called after seeding, so the
    run is reproducible), or None for the course's reference (``AttentionHead(d_model,
    d_model)`` when num_heads is 1, else ``MultiHeadAttention(d_model, num_heads)``).
    Everything (initialisation, data) is drawn from `seed`.
    """
    torch.manual_seed(seed)
    if attention is None:
        attention = _default_attention(d_model, num_heads)
    elif not isinstance(attention, nn.Module):
        attention = attention(d_model)
    model = ToyAttentionModel(attention, d_model, vocab, max_len=max(64, length))
    data = torch.Generator().manual_seed(seed)

    def loss() -> torch.Tensor:
        batch = reversal_batch(batch_size, length, generator=data, vocab=vocab)
        logits, _ = model(batch.src)
        return F.cross_entropy(logits.reshape(-1, vocab.size), batch.tgt.reshape(-1), ignore_index=vocab.pad)

    losses, seconds = _fit(model, loss, steps, lr)
    with torch.no_grad():
        held_out = reversal_batch(1000, length, generator=torch.Generator().manual_seed(seed + 10_000), vocab=vocab)
        right = model(held_out.src)[0].argmax(dim=-1) == held_out.tgt
    return TrainedToy(model, length, right.float().mean().item(), right.all(dim=1).float().mean().item(),
                      seconds, losses)


def plot_attention(weights: torch.Tensor, tokens_in: Sequence[str], tokens_out: Sequence[str],
                   ax=None, title: str | None = None):
    """Draw one attention map (n_out, n_in): rows are queries (outputs), columns keys (inputs).
    Returns the matplotlib Axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(0.45 * len(tokens_in) + 1.5, 0.45 * len(tokens_out) + 1.2))
    w = weights.detach().cpu().numpy() if isinstance(weights, torch.Tensor) else weights
    ax.imshow(w, cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(tokens_in)), list(tokens_in))
    ax.set_yticks(range(len(tokens_out)), list(tokens_out))
    ax.set(xlabel="input position (key)", ylabel="output position (query)")
    if title:
        ax.set_title(title)
    return ax


# ------------------------------------------------ decoder-only version ---

def reversal_lm_batch(batch_size: int, length: int, *, min_length: int | None = None,
                      generator: torch.Generator | None = None,
                      vocab: Vocab = LM_VOCAB) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, counted), both (batch, 2 * length + 3): rows ``<bos> s <sep> reversed(s) <eos>`` then
    padding, and a bool mask of the positions whose *next* token the loss counts (from ``<sep>`` to
    the token before ``<eos>``: the model is asked for the continuation, never for the random prompt)."""
    batch = reversal_batch(batch_size, length, min_length=min_length, generator=generator, vocab=vocab)
    total = 2 * length + 3
    ids = torch.full((batch_size, total), vocab.pad)
    counted = torch.zeros(batch_size, total, dtype=torch.bool)
    for b, n in enumerate(batch.lengths.tolist()):
        row = [vocab.bos, *batch.src[b, :n].tolist(), vocab.sep, *batch.tgt[b, :n].tolist(), vocab.eos]
        ids[b, :len(row)] = torch.tensor(row)
        counted[b, n + 1:2 * n + 2] = True  # predicting the tokens after <sep> (the last one: <eos>)
    return ids, counted


class ToyLM(nn.Module):
    """A decoder-only language model: ids (batch, t) -> logits (batch, t, |V|).

    embedding (chapter 2) + sinusoidal positions (chapter 3) -> `num_layers` pre-LN blocks
    (chapter 7's ``EncoderLayer``; under a causal mask each position sees only itself and the
    past) -> a final LayerNorm (chapter 6) -> ``output``, a linear layer to the vocabulary.
    Attributes: embedding, positions (its ``pe`` buffer is (max_len, d_model)), layers, norm, output.
    """

    def __init__(self, vocab: Vocab = LM_VOCAB, d_model: int = 32, num_heads: int = 2, d_ff: int = 64,
                 num_layers: int = 2, max_len: int = 64) -> None:
        super().__init__()
        from course.reference.add_norm import LayerNorm
        from course.reference.feed_forward import EncoderLayer

        self.vocab = vocab
        self.embedding = Embedding(vocab.size, d_model)
        self.positions = PositionalEncoding(d_model, max_len=max_len)
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff) for _ in range(num_layers))
        self.norm = LayerNorm(d_model)
        self.output = nn.Linear(d_model, vocab.size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        causal = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        x = self.positions(self.embedding(ids))
        for layer in self.layers:
            x = layer(x, causal)
        return self.output(self.norm(x))

    @torch.no_grad()
    def next_token_logits(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (batch, t) -> the logits of the token that follows each row, (batch, |V|)."""
        return self(ids)[:, -1]


@dataclass
class TrainedLM:
    """A trained `ToyLM` with what the decoding demos need."""

    model: ToyLM
    length: int
    accuracy: float           # greedy next-token accuracy on held-out continuations (teacher forcing)
    seconds: float
    losses: list[float] = field(default_factory=list)

    @property
    def vocab(self) -> Vocab:
        return self.model.vocab

    def prompt(self, digits: str) -> torch.Tensor:
        """``"3141"`` -> the prompt ``<bos> 3 1 4 1 <sep>`` as ids of shape (1, len + 2)."""
        return torch.tensor([[self.vocab.bos, *self.vocab.encode(digits), self.vocab.sep]])

    def next_token_logits(self, ids: torch.Tensor) -> torch.Tensor:
        self.model.eval()
        return self.model.next_token_logits(ids)


def train_toy_lm(*, length: int = 6, min_length: int = 2, d_model: int = 32, num_heads: int = 2,
                 d_ff: int = 64, num_layers: int = 2, steps: int = 400, batch_size: int = 64,
                 lr: float = 3e-3, seed: int = 0, vocab: Vocab = LM_VOCAB) -> TrainedLM:
    """Train a `ToyLM` to continue ``<bos> s <sep>`` with ``reversed(s) <eos>`` (s: `min_length`
    to `length` digits) by next-token prediction with teacher forcing; CPU, a few seconds."""
    torch.manual_seed(seed)
    model = ToyLM(vocab, d_model, num_heads, d_ff, num_layers, max_len=max(64, 2 * length + 3))
    data = torch.Generator().manual_seed(seed)

    def loss() -> torch.Tensor:
        ids, counted = reversal_lm_batch(batch_size, length, min_length=min_length, generator=data, vocab=vocab)
        logits = model(ids[:, :-1])             # predict token i + 1 from tokens 0 .. i
        return F.cross_entropy(logits[counted[:, :-1]], ids[:, 1:][counted[:, :-1]])

    losses, seconds = _fit(model, loss, steps, lr)
    with torch.no_grad():
        ids, counted = reversal_lm_batch(500, length, min_length=min_length,
                                         generator=torch.Generator().manual_seed(seed + 10_000), vocab=vocab)
        right = model(ids[:, :-1]).argmax(dim=-1) == ids[:, 1:]
        accuracy = right[counted[:, :-1]].float().mean().item()
    return TrainedLM(model, length, accuracy, seconds, losses)
