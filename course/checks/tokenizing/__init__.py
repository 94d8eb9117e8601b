"""Checks for chapter 1: a character tokenizer and byte-pair encoding (BPE).

The oracles are written independently of the solution cells: `_merge`, `_train`, `_encode`, and
`_Tokenizer` for both tokenizer classes (run by `_use` as the student's are), with knobs for known
mistakes, in `_oracles`; answers worked out on paper pin them down (asserted at import); `_ByteTokenizer`
(in `byte_bpe`) is `_Tokenizer` on the UTF-8 bytes of the text. Every case is drawn from the seed: the
cases worked out on paper are relabelled (`_shared._substitution`: letters to other letters in the same
order, so that ties, sorted vocabularies and ids come out as on paper), the others are random.

One module per exercise: `char_tokenizer` (1.1), `merge_pair` (1.2), `train_bpe` (1.3), `bpe_encode`
(1.4), `bpe_tokenizer` (1.5), `byte_bpe` (1.6), `train_bpe_fast` (1.7),
`split_specials` (1.8), `encode_iterable` (1.9), `bpe_encode_fast` (1.10); `_shared` holds the inputs, the
mistakes of the functions and of the tokenizer classes, and the check factories they share.
"""

# in the exercises' order, the order their checks are registered and listed in
from . import (char_tokenizer, merge_pair, train_bpe, bpe_encode, bpe_tokenizer, byte_bpe,  # noqa: I001
               train_bpe_fast, split_specials, encode_iterable, bpe_encode_fast)

__all__ = ["char_tokenizer", "merge_pair", "train_bpe", "bpe_encode", "bpe_tokenizer", "byte_bpe",
           "train_bpe_fast", "split_specials", "encode_iterable", "bpe_encode_fast"]  # noqa: RUF022
