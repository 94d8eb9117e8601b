"""9.5 generate (greedy and sampled, stopping at the end token or the length limit), 9.6 beam search."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from course.probing.calls.decoding import DictLM, PrefixLM, TableLM

from ..framework import NOT_APPLICABLE, Case, Check, Mistake, register
from ..kit import raises, randn, variant
from ._shared import oracle_probs

# ---------------------------------------------------------- 9.5 generate ---

def _gen_case(rng: np.random.Generator, batch: int, t0: int, max_new: int, stops: list[int | None], *,
              vocab: int = 8, eos: int = 2, pad: int | None = None, sampling: dict | None = None) -> Case:
    """Rows whose first tokens differ; row b's end token comes when the sequence reaches length
    t0 + stops[b] (None: never)."""
    firsts = rng.choice(np.arange(3, vocab), size=batch, replace=False)
    prompt = torch.from_numpy(rng.integers(3, vocab, size=(batch, t0))).long()
    prompt[:, 0] = torch.from_numpy(firsts)
    stop = {int(f): t0 + s for f, s in zip(firsts, stops) if s is not None}
    model = TableLM(2.0 * randn(rng, 5, vocab, vocab), eos, stop)
    kw = {"eos": eos} | ({"pad": pad} if pad is not None else {}) | (sampling or {})
    ends = ", ".join("never" if s is None else f"after {s + 1} new" for s in stops)
    label = (f"prompt ({batch}, {t0}), max_new_tokens={max_new}, rows end {ends}, " +
             ", ".join(f"{k}={v}" for k, v in kw.items()))
    seed = int(rng.integers(2**31))  # the sampling generator's (greedy cases pass none)
    return Case(label, (model, prompt, max_new), kw, meta={"seed": seed} if kw.get("temperature", 0.0) > 0 else {})


def _gen_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(2, 2, 6, [1, None], {}), (3, 1, 8, [0, 3, 2], {}), (2, 3, 5, [None, 1], {"temperature": 1.0}),
             (1, 2, 0, [1], {}), (1, 2, -1, [1], {})] if not hidden else [
        (3, 2, 7, [2, None, 0], {}), (4, 1, 9, [1, 4, 2, 5], {"pad": 1}), (2, 4, 3, [5, None], {}),
        (1, 3, 6, [None], {}), (3, 2, 6, [0, 1, 2], {"temperature": 0.8, "top_k": 3}),
        (3, 1, 7, [2, None, 3], {"temperature": 1.3, "top_p": 0.9}), (2, 2, 4, [1, 3], {"temperature": 0.0}),
        (2, 2, -3, [1, 1], {}), (3, 2, 6, [None, None, 4], {"top_k": 4})]  # temperature left out: greedy
    cases = []
    for batch, t0, max_new, stops, kw in specs:
        pad = kw.pop("pad", None)
        cases.append(_gen_case(rng, batch, t0, max_new, stops, pad=pad, sampling=kw or None))
    return cases


def _generate(case: Case, *, eos_ignored: bool = False, grow: bool = False, extra: int = 0,
              last_only: bool = False) -> Any:
    model, prompt, max_new = case.args
    kw = case.kwargs
    if max_new < 0:
        return raises("max_new_tokens must be >= 0")
    eos, pad, t = kw["eos"], kw.get("pad", 0), kw.get("temperature", 0.0)
    gen = torch.Generator().manual_seed(case.meta["seed"]) if t > 0 else None
    seq = prompt.clone()
    done = [False] * len(prompt)
    for _ in range(max_new + extra):
        if all(done) and not eos_ignored:
            break
        logits = model(seq[:, -1:] if last_only else seq)
        if t == 0:
            token = logits.argmax(dim=-1)
        else:
            probs = oracle_probs(logits, t, kw.get("top_k"), kw.get("top_p")).float()
            token = torch.multinomial(probs, 1, generator=gen)[:, 0]
        row_tokens = [pad if d and not (grow or eos_ignored) else int(tok) for d, tok in zip(done, token)]
        seq = torch.cat([seq, torch.tensor(row_tokens)[:, None]], dim=1)
        done = [d or tok == eos for d, tok in zip(done, row_tokens)]
    return seq


# ------------------------------------------------------- 9.6 beam search ---

def _greedy_miss() -> DictLM:
    """bos=1, eos=2, A=3, B=4: A is likelier first (0.55), but only B is followed by a likely end."""
    return DictLM(5, {(1,): [0, 0, 0, 0.55, 0.45], (1, 3): [0, 0, 0.4, 0.3, 0.3], (1, 4): [0, 0, 0.9, 0.05, 0.05]})


def _long_wins() -> DictLM:
    """Ending at once has the higher probability (0.52), A A eos the higher length-normalised score."""
    return DictLM(5, {(1,): [0, 0, 0.52, 0.48, 0], (1, 3): [0, 0, 0.02, 0.95, 0.03],
                      (1, 3, 3): [0, 0, 0.95, 0.03, 0.02]})


def _shrinks() -> DictLM:
    """eos is the second of three at the first step (beam 2): a beam that shrinks for good keeps A A, whose
    end is unlikely, and misses A B eos (0.27), which beats ending at once (0.25)."""
    return DictLM(5, {(1,): [0, 0, 0.25, 0.6, 0.15], (1, 3): [0, 0, 0.05, 0.5, 0.45],
                      (1, 3, 3): [0, 0, 0.2, 0.45, 0.35], (1, 3, 4): [0, 0, 0.99, 0.005, 0.005]})


def _refills() -> DictLM:
    """Beam 2, length_penalty 2: replacing the finished eos child by B (0.2) brings in B B eos, whose normalised
    score beats the right rule's winner A A A."""
    return DictLM(5, {(1,): [0, 0, 0.3, 0.5, 0.2], (1, 3): [0, 0, 0.05, 0.7, 0.25], (1, 4): [0, 0, 0.005, 0.005, 0.99],
                      (1, 3, 3): [0, 0, 0.1, 0.5, 0.4], (1, 3, 4): [0, 0, 0.9, 0.05, 0.05],
                      (1, 4, 4): [0, 0, 0.99, 0.005, 0.005]})


_HAND = {"miss": (_greedy_miss, "a hand-built model where the likelier first token leads to an unlikely end"),
         "long": (_long_wins, "a hand-built model where ending at once is likelier than a longer sequence"),
         "shrink": (_shrinks, "a hand-built model where a hypothesis finishes at the first step"),
         "refill": (_refills, "a hand-built model where a hypothesis finishes at the first step, ahead of a "
                              "live one")}


def _relabelled(rng: np.random.Generator, model: DictLM) -> tuple[DictLM, torch.Tensor, int]:
    """A hand-built model (bos=1, eos=2, A=3, B=4 over 5 ids) under ids drawn from the seed: a vocabulary
    of 5 to 8 ids, eos < A < B kept in that order (so that ties between them break as designed), bos
    anywhere else, and the prompt a few other tokens then bos. The probabilities are the same, so the
    case still exposes what it was built for. Returns (model, prompt (1, t0), eos)."""
    vocab = int(rng.integers(5, 9))
    eos, a, b = (int(i) for i in np.sort(rng.choice(vocab, size=3, replace=False)))
    others = [i for i in range(vocab) if i not in (eos, a, b)]
    bos = int(rng.choice(others))
    head = tuple(int(i) for i in rng.choice(others, size=int(rng.integers(0, 3))))
    ids = {1: bos, 2: eos, 3: a, 4: b}
    probs = {}
    for key, row in model.probs.items():
        new = [0.0] * vocab
        for old, pr in enumerate(row):
            if old in ids:
                new[ids[old]] = pr
        probs[head + tuple(ids[t] for t in key)] = new
    return DictLM(vocab, probs), torch.tensor([[*head, bos]]), eos


def _beam_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [("prefix", 6, 2, 2, 5, 0.0, -0.5), ("prefix", 6, 2, 1, 5, 0.0, 0.0), ("miss", 5, 1, 2, 4, 0.0, 0),
             ("long", 5, 1, 2, 4, 1.0, 0), ("prefix", 6, 2, 3, 4, 0.6, 0.5), ("shrink", 5, 1, 2, 3, 0.0, 0),
             ("refill", 5, 1, 2, 3, 2.0, 0)] if not hidden else [
        ("prefix", 7, 2, 3, 6, 0.0, 0.0), ("prefix", 8, 1, 4, 5, 1.0, 0.5), ("prefix", 6, 3, 1, 6, 0.0, -0.5),
        ("prefix", 9, 2, 2, 7, 0.6, 1.0), ("prefix", 7, 2, 5, 4, 2.0, 0.8), ("miss", 5, 1, 2, 4, 0.0, 0),
        ("miss", 5, 1, 1, 4, 0.0, 0), ("long", 5, 1, 2, 4, 1.0, 0), ("long", 5, 1, 3, 4, 0.0, 0),
        ("batch", 6, 2, 2, 4, 0.0, 0.0), ("zero beams", 6, 2, 0, 4, 0.0, 0.0), ("shrink", 5, 1, 2, 3, 0.0, 0),
        ("refill", 5, 1, 2, 3, 2.0, 0), ("prefix", 6, 2, 2, 0, 0.0, 0.0), ("prefix", 6, 1, 3, -1, 0.0, 0.0)]
    cases = []
    for kind, vocab, t0, beam, max_new, alpha, bias in specs:
        if kind in _HAND:
            (model, prompt, eos), what = _relabelled(rng, _HAND[kind][0]()), _HAND[kind][1]
        else:
            model, eos = PrefixLM(vocab, 2, int(rng.integers(2**31)), eos_bias=bias), 2
            prompt = torch.from_numpy(rng.integers(3, vocab, size=(2 if kind == "batch" else 1, t0))).long()
            what = f"a random model over {vocab} tokens"
        kw = {"length_penalty": alpha} if alpha or rng.random() < 0.5 else {}
        label = (f"{what}, prompt {tuple(prompt.shape)}, beam_size={beam}, max_new_tokens={max_new}, eos={eos}" +
                 "".join(f", {k}={v}" for k, v in kw.items()))
        cases.append(Case(label, (model, prompt, beam, max_new, eos), kw))
    return cases


def _beam(case: Case, *, alpha_ignored: bool = False, lp: str = "gnmt", best_only: bool = False,
          eos_ignored: bool = False, rule: str = "right") -> Any:
    """The contract's beam search; `rule` 'shrink': the beam narrows for good by each finished child;
    'refill': a finished child is replaced by the next best live one (beam_size live after every step)."""
    model, prompt, beam, max_new, eos = case.args
    alpha = 0.0 if alpha_ignored else case.kwargs.get("length_penalty", 0.0)
    if prompt.shape[0] != 1:
        return raises("beam_search decodes one sequence: prompt must have shape (1, t0)")
    if beam < 1 or max_new < 1:
        return raises("beam_size and max_new_tokens must be at least 1")
    if (alpha_ignored or lp != "gnmt") and not case.kwargs.get("length_penalty"):
        return NOT_APPLICABLE
    t0 = prompt.shape[1]
    live, finished = [(prompt[0].tolist(), 0.0)], []
    for _ in range(max_new):
        candidates = []
        for tokens, score in live[:1] if best_only else live:
            logp = torch.log_softmax(model(torch.tensor([tokens])).double(), dim=-1)[0]
            candidates += [(score + float(logp[v]), tokens + [v]) for v in range(len(logp))]
        candidates.sort(key=lambda c: -c[0])
        live = []
        for rank, (score, tokens) in enumerate(candidates):
            ends = tokens[-1] == eos and not eos_ignored
            if rule == "refill" and not ends and len(live) < beam or rank < beam and rule != "refill":
                (finished if ends else live).append((tokens, score))
            elif rule == "refill" and ends and rank < beam:
                finished.append((tokens, score))
        if rule == "shrink":
            beam -= sum(tokens[-1] == eos for score, tokens in candidates[:beam])
        if not live or beam < 1:
            break
    finished += live

    def normalised(item: tuple[list[int], float]) -> float:
        n = len(item[0]) - t0
        return item[1] / (((5 + n) / 6) ** alpha if lp == "gnmt" else n ** alpha)

    best = max(finished, key=normalised)
    return torch.tensor([best[0]]), normalised(best)



register(
    __name__,
    Check(name="generate", cases=_gen_cases, expected=_generate,
          mistakes=[Mistake("Did you ignore the end token? A row that has produced eos is finished: it gets pad from "
                            "then on, and generation stops as soon as every row is finished.",
                            variant(_generate, eos_ignored=True)),
                    Mistake("Did finished rows keep growing? After its eos a row must get pad (the model's token for "
                            "it is ignored).", variant(_generate, grow=True)),
                    Mistake("Did you generate one token too many? At most max_new_tokens tokens are added: "
                            "for _ in range(max_new_tokens).", variant(_generate, extra=1)),
                    Mistake("Did you give the model only the last token? next_token_logits takes the whole "
                            "sequence so far, (batch, t).", variant(_generate, last_only=True))],
          hint="generate: prompt (batch, t0) int64; at each step call next_token_logits(seq) on the whole sequence, "
               "pick one token per row with sample(logits, temperature, top_k, top_p, generator), put pad in the rows "
               "already finished, append; stop when every row has produced eos or after max_new_tokens steps. "
               "Return (batch, t0 + n) int64; max_new_tokens < 0 raises ValueError."),
    Check(name="beam_search", cases=_beam_cases, expected=_beam, rtol=1e-4, atol=1e-4,
          mistakes=[Mistake("Did you ignore length_penalty? The final choice compares scores divided by "
                            "((5 + n) / 6) ** length_penalty, n the number of new tokens (eos included).",
                            variant(_beam, alpha_ignored=True)),
                    Mistake("Did you divide by n ** length_penalty? This chapter uses GNMT's length penalty, "
                            "((5 + n) / 6) ** length_penalty.", variant(_beam, lp="length")),
                    Mistake("Did the beam shrink for good as hypotheses finished? Every step keeps the beam_size "
                            "best children of the live hypotheses, however many have finished before.",
                            variant(_beam, rule="shrink")),
                    Mistake("Did you replace a finished child by the next best live one? Of the children, exactly the "
                            "beam_size best are kept; those ending in eos are finished and leave the beam, which "
                            "then has fewer live hypotheses until the next step.", variant(_beam, rule="refill")),
                    Mistake("Did you expand only the best beam? At every step the children of *every* live "
                            "hypothesis compete for the beam_size places.", variant(_beam, best_only=True)),
                    Mistake("Did you keep expanding hypotheses that ended with eos? A hypothesis that produces eos is "
                            "finished: set it aside and stop extending it.", variant(_beam, eos_ignored=True))],
          hint="beam_search: keep up to beam_size live hypotheses with their summed log-probabilities (log_softmax); "
               "at each step score every child of every live hypothesis, keep the beam_size best; children ending "
               "in eos are finished, the rest stay live; stop when none is live or after max_new_tokens steps "
               "(live ones then count as finished); beam_size < 1, max_new_tokens < 1 or a prompt of more than "
               "one row raise ValueError. Return the finished hypothesis of the highest "
               "sum / ((5 + n) / 6) ** length_penalty as ((1, t0 + n) int64, that score as a float)."),
)
