"""1.1: a character tokenizer, CharTokenizer (its vocabulary, encode and decode)."""

from __future__ import annotations

from ..framework import register
from ._shared import _tokenizer_check

_HW = ("hello world",)  # ids: specials 0..3, then ' ' d e h l o r w: 4..11 (relabelled: the same ids)
_SHUFFLED = ("<eos>", "<unk>", "<pad>", "<bos>")  # no special at its usual id
_CASES = {  # check: (visible cases, more hidden ones), as arguments of _tok
    "char_vocab": ([(_HW, "vocab"), (("banana",), "vocab")],
                   [(("",), "vocab", None, False, " (an empty corpus: specials only)"),
                    (("To be, or not to be:\nthat is the question.",), "vocab")]),
    "char_encode": ([(_HW, "encode", "hello"), (_HW, "encode", "low", True),
                     (_HW, "encode", "hi!", False, " (two characters not in the vocabulary)"),
                     (_HW, "encode", "hello!", True, " (the specials in another order)", _SHUFFLED)],
                    [(_HW, "encode", "", True)]),
    "char_decode": ([(_HW, "decode", [1, 7, 6, 8, 8, 9, 2]),
                     (_HW, "decode", [0, 7, 9, 11, 3, 0], False, " (<pad>, <unk>)"),
                     (_HW, "roundtrip", "world hello"), (_HW, "decode", [7, -1], False, " (a negative id)"),
                     (_HW, "decode", [0, 1, 7, 2, 3], False, " (the specials in another order)", _SHUFFLED),
                     (_HW, "extend", ("z", "hello wz"))],
                    [(_HW, "decode", [5, 12], False, " (one past the last id)")]),
}
_CHAR_HINT = ("Check the contract: specials first, then sorted(set(corpus)); unknown characters -> <unk>; "
              "decode skips <pad>/<bos>/<eos>, writes UNK_CHAR for <unk>, raises ValueError for a bad id.")

register(__name__, *(_tokenizer_check(name, _CHAR_HINT, *cases) for name, cases in _CASES.items()))
