"""What the chapter's checks share: the trusted filters and sampler. (The small language models the
cases carry are the kernel's too: they live in `course.probing.calls.decoding`.)"""

from __future__ import annotations

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
