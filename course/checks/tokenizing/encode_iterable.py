"""1.9: encoding a stream, encode_iterable (words cut across chunks, whitespace at a chunk's edge, empty
chunks, texts in many small chunks read lazily). Its encoder is `word_ids` (two ids per word), which shows a
word cut in two or whitespace moved to another word."""

from __future__ import annotations

import numpy as np

from .. import kit
from ..framework import Case, Check, Mistake, register
from ._oracles import _stream
from ._shared import _cases, _lexicon, _text

#: (chunks,): visible, then more hidden; a word cut across chunks, whitespace ending a chunk or starting the
#: next, empty chunks, a text that ends in whitespace, nothing at all
_CHUNKS = ([(["the ca", "t sat", " on the mat"],), (["hello ", " world", "", "  "],), ([],)],
           [(["a", "b", "c", " d", "e"],), ([""],), (["  lead", "ing", " space"],), (["x\n", "\ny", " z"],),
            (["one"],), (["a ", "b ", "c "],)])


def _stream_case(chunks: list[str]) -> Case:
    return Case(f"{len(chunks)} chunks {chunks!r:.70}", (list(chunks),))


def _many_chunks(rng: np.random.Generator) -> list[tuple]:
    """A random text cut at random places into many chunks, some of them empty: an answer that reads them
    all before it yields shows."""
    out = []
    for n_words in (40, 60):
        text = _text(rng, _lexicon(rng, "abcde", 12, 6), n_words)
        cuts = sorted(int(c) for c in rng.integers(0, len(text) + 1, size=n_words))
        out.append(([text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])],))
    return out


register(
    __name__,
    Check(name="encode_iterable", cases=_cases(_stream_case, *_CHUNKS, _many_chunks),
          expected=lambda c: _stream(*c.args),
          hint="Keep the text of the last word read (the next chunk may continue it); after each chunk, encode "
               "and yield every word of pretokenize(pending + chunk) but the last; at the end, encode what is "
               "left.",
          mistakes=[Mistake(h, kit.variant(lambda c, **k: _stream(*c.args, **k), mistake=m)) for h, m in [
              ("Did you encode each chunk on its own? A chunk may end inside a word: keep the last word for "
               "the next chunk.", "per_chunk"),
              ("Did you forget the text left after the last chunk? Encode it once the chunks run out.",
               "no_tail"),
              ("Did you cut after the last whitespace character? Whitespace belongs to the word after it: "
               "keep the last word of pretokenize, its whitespace included.", "cut_ws")]]),
)
