"""1.4: encoding new text, bpe_encode (cases worked on paper, random corpora)."""

from __future__ import annotations

from ..framework import Case, register
from ._oracles import _encode
from ._shared import _BC_AB, _HUG, _by_hand, _cases, _function_check, _random_corpora

# Worked on paper ("␣" is a space):
# bpe_encode: "hugs bug": h ug s -> hug s, ␣ b ug. "  hug\n": words "  hug", "\n" -> ␣ ␣hug, \n.
#   "abababc" with (b,c), (a,b): a b a b a bc -> ab ab a bc (in another order: ab ab ab c).
#   "aaaaa" with (a,a), (aa,a): aa aa a -> aa aaa.
_HAND = _by_hand(  # {arguments: answer} of its visible cases, the same of more hidden ones; merges as
    # tuples (dictionary keys); the cases pass lists
    _encode, {("hugs bug", tuple(_HUG)): ["hug", "s", " ", "b", "ug"],
              ("abababc", tuple(_BC_AB)): ["ab", "ab", "a", "bc"],
              ("  hug\n", tuple(_HUG)): [" ", " hug", "\n"]},
    {("aaaaa", (("a", "a"), ("aa", "a"))): ["aa", "aaa"], ("hi there", ()): list("hi there"),
     ("", tuple(_HUG)): []})
# random corpora (alphabet, lexicon size, longest word, words, merges, mixed spaces): visible, hidden
_RANDOM_ENCODE = ([("abc", 6, 4, 40, 10, False)],
                  [("abc", 8, 5, 60, 20, True), ("abcd", 10, 6, 80, 30, True), ("ab", 6, 6, 50, 25, True),
                   ("lowerst", 12, 7, 90, 40, True)])


def _encode_case(text: str, merges: tuple) -> Case:
    about = f"merges {list(merges)}" if merges else "no merges"
    return Case(f"text {text!r}, {about}", (text, list(merges)))


register(
    __name__,
    _function_check("bpe_encode", _encode, _cases(_encode_case, *_HAND),
                    "Apply merge_pair to each word from pretokenize() with merges[0], then merges[1], ... "
                    "(learned order); concatenate the words' tokens."),
    _function_check("bpe_encode_random", _encode, _random_corpora(_RANDOM_ENCODE, encode=True),
                    "Your tokens differ from replaying the merges in learned order; ''.join(tokens) must be "
                    "the text."),
)
