"""1.7: training BPE fast, train_bpe_fast: train_bpe's merges (cases worked on paper, merges that change the
pairs on both sides of an occurrence, random corpora), in less time than recounting every pair after every
merge takes (timed against one count of every pair, in the same kernel)."""

from __future__ import annotations

import numpy as np

from course.probing.calls.tokenizing import SPEED_BUDGET

from .. import kit
from ..framework import Case, Check, Mistake, register
from ._oracles import _or_error, _train_fast
from ._shared import _HUG, _TIES, _by_hand, _cases, _lexicon, _random_corpora, _text
from .train_bpe import _many_ties, _train_case

# Worked on paper: "azyb azyb azyb" (words azyb, ␣azyb, ␣azyb): (a,z) (z,y) (y,b) all 3, the greatest is
#   (z,y); merging it removes (a,z) and (y,b) and adds (a,zy) and (zy,b), 3 each, of which (zy,b) is the
#   greater; then (a,zyb) 3, then (␣,azyb) 2. A count left for (y,b) would win the second round; a count
#   never given to (zy,b) would lose it. "bzya ..." and "yzab ..." move the pair the merge builds to the
#   other side.
_HAND = _by_hand(
    _train_fast, {("hug hugs pug hug", 10): _HUG, ("azyb azyb azyb", 10): [("z", "y"), ("zy", "b"), ("a", "zyb"),
                                                                            (" ", "azyb")]},
    {("aaa aaa aaa", 10): [("a", "a"), ("aa", "a"), (" ", "aaa")], ("abab abab", 10): [("a", "b"), ("ab", "ab")],
     ("bzya bzya bzya", 10): [("z", "y"), ("zy", "a"), ("b", "zya"), (" ", "bzya")],
     ("yzab yzab yzab", 10): [("z", "a"), ("za", "b"), ("y", "zab"), (" ", "yzab")],
     ("cdcd abab efef", 10): [("e", "f"), ("c", "d"), ("a", "b")], ("", 3): [], ("hug hugs pug hug", 0): [],
     ("ab ab", -1): kit.raises("a negative num_merges is an error")})
# random corpora (alphabet, lexicon size, longest word, words, merges, mixed spaces): visible, hidden
_RANDOM = ([("abcd", 10, 6, 80, 30, True)],
           [("abc", 8, 5, 60, 20, False), ("ab", 6, 6, 50, 40, True), ("lowerst", 12, 7, 90, 25, True)])
#: the timed corpus: (lexicon size, longest word, words, merges); thousands of distinct words, so that one
#: count of every pair takes milliseconds, and recounting after each of the merges takes them that often
_TIMED = (12000, 9, 20000, 100)


def _correct_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    by_hand = _cases(_train_case, *_HAND, _many_ties)(rng, hidden)
    return by_hand + _random_corpora(_RANDOM)(rng, hidden)


def _timed_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    size, longest, n_words, merges = _TIMED
    corpus = _text(rng, _lexicon(rng, "abcdefghijklmnop", size, longest), n_words, odd_spaces=False)
    return [Case(f"a random corpus of {n_words} words ({len(set(corpus.split()))} distinct), "
                 f"num_merges={merges}, timed", (corpus, merges), meta={"budget": SPEED_BUDGET * merges})]


register(
    __name__,
    Check(name="train_bpe_fast", cases=_correct_cases, expected=lambda c: _or_error(_train_fast, *c.args),
          hint="Your merges differ from train_bpe's. After each merge, visit every word that holds the pair: "
               "remove the counts of all its old pairs (times its frequency), merge, add the counts of all "
               "its new pairs, so that the pairs on both sides of each occurrence change; and record that "
               "the word holds each new pair.",
          mistakes=[Mistake("Do you record which words hold the pairs a merge creates? A later merge of "
                            "such a pair must visit them too.", kit.variant(lambda c, **k: _train_fast(*c.args, **k),
                                                                            index_new=False)),
                    Mistake(_TIES, kit.variant(lambda c, **k: _train_fast(*c.args, **k), tie="smallest"))]),
    # the time an answer takes is a property any fast answer has, right or wrong: it counts once the merges
    # are right (those of the check above; `fast_enough` reads no merges)
    Check(name="train_bpe_fast_speed", guard=True, cases=_timed_cases, expected=lambda c: True,
          hint="Did you recount every pair after every merge? Count the pairs once; after each merge, update "
               "only the words that the index lists under the merged pair."),
)
