"""1.2: merging one pair, merge_pair."""

from __future__ import annotations

import numpy as np

from ..framework import Case, register
from ._oracles import _merge
from ._shared import _cases, _function_check

_MERGE_PAIRS = ([(list("hug"), ("u", "g")), (list("banana"), ("a", "n")), (list("aaa"), ("a", "a")),
                 (["a", "bc", "a", "b", "c"], ("ab", "c"))],  # visible, then more hidden
                [(list("aaaa"), ("a", "a")), (list("abcab"), ("a", "b")), ([], ("a", "b")),
                 (["x"], ("x", "x")), ([" ", "t", "he", " ", "th", "e"], ("t", "he")),
                 (list("abab"), ("b", "a")), (list("xyz"), ("y", "z"))])


def _pair_case(tokens: list[str], pair: tuple[str, str]) -> Case:
    return Case(f"tokens {tokens}, pair {pair}", (tokens, pair))


def _random_pairs(rng: np.random.Generator) -> list[tuple]:
    """(tokens, pair) with the pair taken from the tokens."""
    out = []
    for _ in range(4):
        toks = [str(t) for t in rng.choice(["a", "b", "ab", "ba", " "], size=int(rng.integers(5, 14)))]
        k = int(rng.integers(len(toks) - 1))
        out.append((toks, (toks[k], toks[k + 1])))
    return out


register(
    __name__,
    _function_check("merge_pair", _merge, _cases(_pair_case, *_MERGE_PAIRS, _random_pairs),
                    "Scan left to right: where (tokens[i], tokens[i + 1]) == pair, emit pair[0] + pair[1] "
                    "and go on at i + 2, else emit tokens[i]; into a new list."),
)
