"""1.5: a BPE tokenizer with ids, BPETokenizer (its vocabulary, encode and decode)."""

from __future__ import annotations

from ..framework import register
from ._oracles import SPECIALS
from ._shared import _BC_AB, _DUP, _HUG, _tokenizer_check

_HUGS = (_HUG, "hug hugs pug hug")
_UNK_MERGES = [("<", "u"), ("<u", "n"), ("<un", "k"), ("<unk", ">")]  # they build a special's string


def _unk_built(sub):
    """Merges that build '<unk>' (left as it is: relabelled, it would be no special's string); the rest of
    the alphabet relabelled by `sub`."""
    return (_UNK_MERGES, "<unk> " + sub("ab")), "vocab", None, False, " (the merges build the string '<unk>')"


_SHUFFLED = ("<eos>", "<unk>", "<pad>", "<bos>")  # no special at its usual id
_CASES = {  # check: (visible cases, more hidden ones), as arguments of _tok
    "bpe_tokenizer_vocab": ([(_HUGS, "vocab"),
                             (_DUP, "vocab", None, False, " (one string is built by two merges)"),
                             _unk_built],
                            [(([], "ba ab"), "vocab")]),
    "bpe_tokenizer_encode": ([(_HUGS, "encode", "hug pug"), (_HUGS, "encode", "hugs!", True),
                              (_HUGS, "encode", "hug pug!", True, " (the specials in another order)", _SHUFFLED)],
                             [(_DUP, "encode", "abcabc cab", True), ((_BC_AB, "abc"), "encode", "abababc")]),
    "bpe_tokenizer_decode": ([(_HUGS, "decode", [1, 11, 12, 8, 3, 2, 0]),
                              (_HUGS, "roundtrip", "pug hugs  hug\n", True),
                              (_HUGS, "decode", [5, -2], False, " (a negative id)")],
                             [(_HUGS, "decode", [13], False, " (one past the last id)"),
                              (_HUGS, "decode", [3, 7, 11, 0, 12, 1, 2], False, "", SPECIALS[::-1])]),
}
_BPE_HINT = ("Check the contract: super().__init__(alphabet, specials), then one token per merge in learned "
             "order (none twice) and vocab_size updated; encode = bpe_encode + lookup, unknown -> <unk>; "
             "decode is CharTokenizer's (fix exercise 1.1 if it fails).")

register(__name__, *(_tokenizer_check(name, _BPE_HINT, *cases) for name, cases in _CASES.items()))
