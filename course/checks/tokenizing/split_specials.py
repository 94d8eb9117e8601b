"""1.8: special tokens in text, split_specials (cases worked on paper, overlapping and look-alike specials,
random texts with specials and pieces of specials)."""

from __future__ import annotations

import numpy as np

from .. import kit
from ..framework import Case, Check, Mistake, register
from ._oracles import _or_error, _split_specials
from ._shared import _by_hand, _cases, _lexicon

_E = "<|endoftext|>"
# Worked on paper. Where two specials start at the same place the longer is the piece: E+E then E. The
# leftmost comes first, even when a longer one starts later inside it: "<ab>" is "<a", "b>". A special's
# characters are literal: "<.>" is no pattern that "<x>" matches, "|" no alternative.
_HAND = _by_hand(
    _split_specials,
    {("Hello" + _E + "world", (_E,)): ["Hello", _E, "world"],
     ("a" + _E * 3, (_E, _E * 2)): ["a", _E * 2, _E],
     ("no special here", (_E,)): ["no special here"], ("", (_E,)): []},
    {(_E + _E + "a", (_E, _E * 2)): [_E * 2, "a"], ("a<s><s>b", ("<s>",)): ["a", "<s>", "<s>", "b"],
     ("<s>", ("<s>",)): ["<s>"], ("abc", ()): ["abc"], ("a<x>b<.>c", ("<.>",)): ["a<x>b", "<.>", "c"],
     ("x<|a|><|a|>b|>y", ("<|a|>", "<|a|>b|>")): ["x", "<|a|>", "<|a|>b|>", "y"],
     ("<a|b>", ("<a", "<a|b>", "b>")): ["<a|b>"], ("lone <|end", (_E,)): ["lone <|end"],
     ("<ab>", ("<a", "ab>")): ["<a", "b>"], ("xaby", ("ab", "aby")): ["x", "aby"],
     ("x", (_E, "")): kit.raises("an empty special token is an error")})


def _split_case(text: str, specials: list[str]) -> Case:
    return Case(f"text {text!r:.60}, specials {list(specials)}", (text, list(specials)))


def _random_texts(rng: np.random.Generator) -> list[tuple]:
    """(text, specials): words, specials, pieces of specials and specials that overlap, in random order;
    the specials listed shortest first (so that the order they come in decides nothing). Then texts with
    specials that overlap each other (the end of one is the start of the other), whose leftmost wins."""
    out = []
    for _ in range(2):
        word = "".join(str(c) for c in rng.choice(list("abcd"), size=5))
        left, right = "<" + word[:3], word[1:] + ">"  # "<abc" and "bcde>" overlap in "bc"
        parts = [left, right, "<" + word + ">", word, " "]
        out.append(("".join(str(p) for p in rng.choice(parts, size=8)), sorted({left, right}, key=len)))
    for _ in range(3):
        base = [f"<|{w}|>" for w in _lexicon(rng, "abc", 2, 3)]
        specials = sorted(dict.fromkeys(base + [base[0] + base[1]]), key=len)  # ties: in the order drawn
        parts = _lexicon(rng, "abc ", 4, 4) + specials + [base[0][:-1], base[1][2:]] + [base[0] + base[1]] * 2
        text = "".join(str(p) for p in rng.choice(parts, size=10))
        out.append((text, specials))
    return out


register(
    __name__,
    Check(name="split_specials", cases=_cases(_split_case, *_HAND, _random_texts),
          expected=lambda c: _or_error(_split_specials, *c.args),
          hint="Scan left to right; where specials start, the longest one is a piece of its own; the text "
               "between specials is one piece; no empty pieces; a special's characters match only "
               "themselves; ValueError for an empty special.",
          mistakes=[Mistake(h, kit.variant(lambda c, **k: _split_specials(*c.args, **k), **knobs)) for h, knobs in [
              ("Where two specials start at the same place, do you take the first listed (or the shortest)? "
               "Take the longest: sort the alternatives by length, longest first.", {"order": "given"}),
              ("Where two specials start at the same place, do you take the first listed (or the shortest)? "
               "Take the longest: sort the alternatives by length, longest first.", {"order": "shortest"}),
              ("Did you join the specials into a regular expression unescaped? '|' and '.' are pattern "
               "characters: re.escape each special.", {"escape": False}),
              ("Are there empty strings among your pieces? re.split gives '' where a special starts or ends the "
               "text, or two are adjacent: drop them.", {"keep_empty": True}),
              ("Are your specials missing from the pieces? re.split keeps the separators only when the "
               "pattern is a capturing group: '(' + pattern + ')'.", {"capture": False}),
              ("Did you split out one special everywhere, then the next? Scan left to right instead: the "
               "special that starts first is the piece, even when a longer one starts inside it.",
               {"one_by_one": True})]]),
)
