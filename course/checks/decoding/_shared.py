"""What the chapter's checks share: the trusted filters, sampler and small language models."""

from __future__ import annotations

import numpy as np
import torch

NEG_INF = float("-inf")


def oracle_top_k(logits: torch.Tensor, k: int, *, extra: int = 0, fill: float = NEG_INF,
                 break_ties: bool = False) -> torch.Tensor:
    """Keep each row's tokens whose logit is >= its k-th largest (k + `extra`); the others -> `fill`.
    `break_ties`: keep exactly k (the first k in torch.topk's order)."""
    k = k + extra
    if k >= logits.shape[-1]:
        return logits.clone()
    if break_ties:
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, torch.topk(logits, k, dim=-1).indices, True)
    else:
        kth = logits.sort(dim=-1, descending=True).values[..., k - 1:k]
        keep = logits >= kth
    return torch.where(keep, logits, torch.full_like(logits, fill))


def mass_above(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(probabilities, for each token the total probability of the tokens strictly more likely), float64."""
    probs = torch.softmax(logits.double(), dim=-1)
    above = (probs.unsqueeze(-2) * (probs.unsqueeze(-2) > probs.unsqueeze(-1))).sum(-1)
    return probs, above


def oracle_top_p(logits: torch.Tensor, p: float, *, rule: str = "right", fill: float = NEG_INF) -> torch.Tensor:
    """Keep token j iff the mass of the tokens strictly more likely than j is < p. Rules (mistakes):
    'exclusive' drops the token that crosses p, 'one more' keeps the next one too."""
    if p >= 1:
        return logits.clone()
    probs, above = mass_above(logits)
    if rule == "right":
        keep = above < p
    elif rule == "exclusive":
        keep = above + probs < p
    else:  # 'one more': a token is kept when everything above it, less the one just above, is < p
        sorted_probs = probs.sort(dim=-1, descending=True).values
        before = sorted_probs.cumsum(-1) - sorted_probs
        rank = (before < p).sum(-1, keepdim=True)  # one past the crossing token
        threshold = sorted_probs.gather(-1, rank.clamp(max=probs.shape[-1] - 1))
        keep = probs >= threshold
    return torch.where(keep, logits, torch.full_like(logits, fill))


def oracle_probs(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None, *,
                 after_softmax: bool = False, k_extra: int = 0, p_rule: str = "right",
                 p_first: bool = False) -> torch.Tensor:
    """The distribution `sample` draws from (float64), with knobs for the mistakes."""
    x = logits.double() if after_softmax else logits.double() / temperature
    filters = [(top_k is not None, lambda t: oracle_top_k(t, top_k, extra=k_extra)),
               (top_p is not None, lambda t: oracle_top_p(t, top_p, rule=p_rule))]
    for on, f in (filters[::-1] if p_first else filters):
        if on:
            x = f(x)
    probs = torch.softmax(x, dim=-1)
    if after_softmax:  # temperature applied to probabilities: the multinomial renormalises it away
        probs = probs / temperature
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


class TableLM:
    """A hand-made language model: the logits of the next token depend on the sequence's length t and
    its last token, ``table[t % P, last]``, and the end token gets +30 when t equals ``stop[first token]``
    (the row ends there) and -30 otherwise. Calls are counted."""

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
    it), for beam search: ``logits(prefix) = scale * normal(seed(prefix))``, the end token shifted by `eos_bias`."""

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
    unknown prefixes are uniform. Returns log-probabilities as logits."""

    def __init__(self, vocab: int, probs: dict[tuple[int, ...], list[float]]) -> None:
        self.vocab, self.probs = vocab, probs

    def __call__(self, seq: torch.Tensor) -> torch.Tensor:
        rows = [self.probs.get(tuple(r), [1.0 / self.vocab] * self.vocab) for r in seq.tolist()]
        return torch.tensor(rows, dtype=torch.float32).clamp_min(1e-9).log()

    def __repr__(self) -> str:
        return "a hand-built model"
