"""1.3: training BPE, train_bpe (cases worked on paper, ties, random corpora)."""

from __future__ import annotations

import numpy as np

from .. import kit
from ..framework import Case, register
from ._oracles import _train
from ._shared import _HUG, _TIES, _by_hand, _cases, _function_check, _lexicon, _random_corpora

# Worked on paper ("␣" is a space; the notebook's prose derives the first one step by step):
# "hug hugs pug hug": words hug, ␣hugs, ␣pug, ␣hug. (u,g) 4 > (h,u) 3 > (␣,h) 2; then (h,ug) 3; then
#   (␣,hug) 2; then every count is 1: stop. "aaa aaa aaa": (a,a) 1*2 + 2*2 = 6 (overlaps count) -> aaa
#   = aa a; (aa,a) 3; (␣,aaa) 2. "ab ab ab": (a,b) 3; (␣,ab) 2 (across words, (ab,␣) would win).
#   "abab abab": (a,b) 4 -> ab ab; (ab,ab) 2 (merging only a word's first (a,b) would give ab a b).
#   "cd ab ab ab cd": (a,b) 3 ties (␣,a) 3; (␣,ab) 3; (c,d) 2 (counting each distinct word once would
#   stop here); (␣,cd) 1.
# Ties, to the greatest pair: "cdcd abab efef": (e,f), (c,d), (a,b). "abab acac": (a,c), (a,b). "AbAb
#   abab": (a,b) before (A,b). "xyxy xyxy abab abab": (x,y) 4 ties (a,b) 4 -> (x,y); (a,b) 4; then (xy,xy),
#   (ab,ab), (␣,ab) tie at 2: (xy,xy), (ab,ab), (␣,abab).
_HAND = _by_hand(  # {arguments: answer} of its visible cases, the same of more hidden ones
    _train, {("hug hugs pug hug", 10): _HUG, ("aaa aaa aaa", 10): [("a", "a"), ("aa", "a"), (" ", "aaa")],
             ("ab ab ab", 5): [("a", "b"), (" ", "ab")], ("hug hugs pug hug", 0): [],
             ("ab ab", -1): kit.raises("a negative num_merges is an error")},
    {("hug hugs pug hug", 2): _HUG[:2], ("cd ab ab ab cd", 10): [("a", "b"), (" ", "ab"), ("c", "d")],
     ("   ", 4): [(" ", " ")], ("", 3): [], ("abab abab", 10): [("a", "b"), ("ab", "ab")]})
_HAND_TIES = _by_hand(
    _train, {("cdcd abab efef", 10): [("e", "f"), ("c", "d"), ("a", "b")],
             ("abab acac", 10): [("a", "c"), ("a", "b")], ("AbAb abab", 10): [("a", "b"), ("A", "b")]},
    {("xyxy xyxy abab abab", 10): [("x", "y"), ("a", "b"), ("xy", "xy"), ("ab", "ab"), (" ", "abab")]})
# random corpora (alphabet, lexicon size, longest word, words, merges, mixed spaces): visible, hidden
_RANDOM_TRAIN = ([("abc", 6, 4, 30, 8, False)],
                 [("abc", 8, 5, 60, 20, False), ("abcd", 10, 6, 80, 30, True), ("ab", 6, 6, 50, 40, True),
                  ("lowerst", 12, 7, 90, 25, True), ("xyz", 4, 3, 15, 50, False)])


def _train_case(corpus: str, num_merges: int, note: str = "") -> Case:
    note += " (negative)" if num_merges < 0 else ""
    return Case(f"corpus {corpus!r}{note}, num_merges={num_merges}", (corpus, num_merges))


def _many_ties(rng: np.random.Generator) -> list[tuple]:
    """(corpus, num_merges, note): every word occurs exactly twice, so pairs tie everywhere."""
    out = []
    for _ in range(3):
        words = [w for w in _lexicon(rng, "bcad", 5, 4) for _ in range(2)]
        out.append((" ".join(str(w) for w in rng.permutation(words)), 12, " (many ties)"))
    return out


register(
    __name__,
    _function_check("train_bpe", _train, _cases(_train_case, *_HAND),
                    "Follow the contract step by step: count pairs inside words from pretokenize(), weighted "
                    "by word frequency; ties to the greatest pair; stop below a count of 2; ValueError if "
                    "num_merges < 0."),
    _function_check("train_bpe_ties", _train, _cases(_train_case, *_HAND_TIES, _many_ties), _TIES),
    _function_check("train_bpe_random", _train, _random_corpora(_RANDOM_TRAIN),
                    "Your merges differ from the contract's on a random corpus: re-read its counting, tie "
                    "and stop rules."),
)
