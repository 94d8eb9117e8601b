"""1.10 (optional): encoding GPT-2's way, bpe_encode_fast: bpe_encode's tokens (its cases), found by merging the
lowest-ranked adjacent pair of each distinct word until none has a rank, in less time than replaying every merge
takes (timed against one count of every pair of the text's distinct words, in the same kernel)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..framework import Case, Check, Mistake, register
from ._oracles import _encode, _ranked, _train_fast
from ._shared import _cases, _function_check, _lexicon, _random_corpora, _text
from .bpe_encode import _HAND, _RANDOM_ENCODE, _encode_case

#: the timed text: (lexicon size, longest word, words, merges). About 2,000 distinct words that occur ten times
#: each on average: replaying 1,000 merges on each distinct word takes hundreds of counts of every pair, the
#: ranked loop with a cache a few, the ranked loop without one (every occurrence encoded) tens.
_TIMED = (2000, 9, 20000, 1000)
#: the budget in counts of every pair of the text's distinct words (`course.probing.calls.tokenizing`)
BUDGET = 40.0


def _timed_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    size, longest, n_words, n_merges = _TIMED
    lexicon = _lexicon(rng, "abcdefghijklmnop", size, longest)
    merges = _train_fast(_text(rng, lexicon, n_words, odd_spaces=False), n_merges)
    text = _text(rng, lexicon, n_words, odd_spaces=False)
    return [Case(f"a random text of {n_words} words ({len(set(text.split()))} distinct), {len(merges)} merges "
                 "learned on another text of the same words, timed", (text, merges),
                 meta={"budget": BUDGET, "warm_up": ("ab ab", [("a", "b")])})]


_HIGHEST = Mistake("Did you merge the pair of the highest rank? The lowest rank (the earliest merge) goes first.",
                   lambda c: _ranked(*c.args, pick="highest"))
_HINT = ("Your tokens differ from bpe_encode's. With rank = {pair: i for i, pair in enumerate(merges)}, take each "
         "word from pretokenize(); while some adjacent pair has a rank, merge_pair the one of the lowest rank.")


def _with_highest(check: Check) -> Check:
    return dataclasses.replace(check, mistakes=[*check.mistakes, _HIGHEST])


register(
    __name__,
    _with_highest(_function_check("bpe_encode_fast", _encode, _cases(_encode_case, *_HAND), _HINT)),
    _with_highest(_function_check("bpe_encode_fast_random", _encode, _random_corpora(_RANDOM_ENCODE, encode=True),
                                  _HINT)),
    # the time an answer takes is a property any fast answer has, right or wrong: it counts once the tokens are
    # right (those of the checks above)
    Check(name="bpe_encode_fast_speed", guard=True, cases=_timed_cases, expected=lambda c: True,
          hint="Did you replay every merge on every word, or encode a word each time it occurs? Look the ranks up "
               "in a dict, merge only pairs the word holds, and encode each distinct word once (a dict from word "
               "to tokens)."),
)
