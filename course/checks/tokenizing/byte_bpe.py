"""1.6 (optional): byte-level BPE, ByteBPETokenizer: BPE on the UTF-8 bytes of the text, one BYTE_CHARS
character per byte; its oracle `_ByteTokenizer` is `_Tokenizer` on those characters."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import kit
from ..framework import Case, Check, Mistake, register
from ._oracles import _encode, _or_error, _Tokenizer, _train, _use
from ._shared import _BC_AB, _DUP, _HUG, _ORDER, _cases, _lexicon, _text, _tok

BYTE_CHARS = "".join(chr(b if b < 128 else 256 + b) for b in range(256))
_bytes = lambda text: "".join(BYTE_CHARS[b] for b in text.encode("utf-8"))  # noqa: E731
_raw = lambda chars: bytes(ord(c) - 256 * (ord(c) >= 128) for c in chars)  # noqa: E731  (the inverse)


class _ByteTokenizer(_Tokenizer):
    """The byte-level tokenizer; knobs: chars (BPE on characters, not bytes), per_token (each token's bytes
    decoded alone), errors ("strict": invalid UTF-8 raises), and _Tokenizer's dedupe, wrap, encoding."""

    def __init__(self, merges: list, *, chars: bool = False, per_token: bool = False, errors: str = "replace",
                 **knobs: Any) -> None:
        super().__init__(BYTE_CHARS, ("<pad>", "<bos>", "<eos>", "<unk>"), merges, **knobs)
        self.itos = self.itos[4:]  # no specials: drop the four the parent class put first
        self.stoi, self.vocab_size = {t: i for i, t in enumerate(self.itos)}, len(self.itos)
        self.chars, self.per_token, self.errors = chars, per_token, errors

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        return [self.stoi[t] for t in _encode(text if self.chars else _bytes(text), self.merges,
                                              **self.o["encoding"])]

    def decode(self, ids: list[int]) -> str:
        if any(not -self.vocab_size * self.o["wrap"] <= i < self.vocab_size for i in ids):
            raise ValueError(f"decode must reject ids outside 0..vocab_size-1 = 0..{self.vocab_size - 1}")
        raw = [_raw(self.itos[i]) for i in ids]
        return "".join(r.decode("utf-8", self.errors) for r in (raw if self.per_token else [b"".join(raw)]))

    @staticmethod
    def on(case: Case, **knobs: Any) -> Any:
        """The oracle on a byte case: args (merges,), or (corpus, num_merges) with meta "train"."""
        train = case.meta.get("train")
        merges = _train(case.args[0] if knobs.get("chars") else _bytes(case.args[0]), case.args[1]) if train \
            else case.args[0]
        return _use(_ByteTokenizer(merges, **knobs), case)


_UNICODE = "abc  éüß東京語🙂"  # random texts mix ASCII, 2-, 3- and 4-byte characters


def _random_bytes(rng: np.random.Generator, op: str) -> list[tuple]:
    """`_byte` arguments: `op` on byte tokenizers trained on random Unicode corpora; texts to encode bring
    characters never seen in training ('ñ', 'Ω', '🚀')."""
    out = []
    for _ in range(2):
        lex = _lexicon(rng, _UNICODE, 8, 4)
        corpus = _text(rng, lex, 40)
        merges = _train(_bytes(corpus), 40)
        text = _text(rng, lex + ["ñΩ", "🚀" + lex[0]], 10)
        if op == "vocab":
            out += [((corpus, 40), "vocab", None, " (built by train)"), ((merges,), "vocab")]
        elif op == "encode":
            out += [((merges,), "encode", text), ((merges,), "roundtrip", text)]
        else:
            ids = [int(i) for i in rng.integers(0, 256 + len(merges), size=12)]
            out += [((merges,), "decode", ids), ((merges,), "roundtrip", corpus[:30] + text)]
    return out


def _byte(args: tuple, op: str, arg: Any = None, note: str = "") -> Case:
    """A byte tokenizer case: built from args (merges,) or trained on args (corpus, num_merges)."""
    train, what = len(args) == 2, _tok(((), ""), op, arg).label.partition(": ")[2]
    built = [_raw(a + b) for a, b in args[0]] if not train else None
    where = f"train({args[0]!r:.40}, {args[1]})" if train else f"merges building {built!s:.50}"
    op_arg = ("vocab_size", "itos", "stoi", "merges") if op == "vocab" else arg
    return Case(f"{where}: {what}{note}", args, {}, {"op": (op, op_arg, False), "train": train})


def _e(sub: Callable[[Any], Any]) -> tuple[str, str]:
    """The two bytes of a 2-byte character ('é', relabelled by `sub`) as BYTE_CHARS characters."""
    return tuple(_bytes(sub("é")))


def _ids(sub: Callable[[Any], Any], *parts: str | int) -> list[int]:
    """Ids with no merges: an int part is an id; a text part gives the ids of its bytes (relabelled by
    `sub`); `_HALF` the first of the two bytes of `_e`: half a character."""
    return [i for p in parts for i in ([p] if isinstance(p, int) else [ord(_e(sub)[0]) - 256] if p == _HALF
                                       else sub(p).encode("utf-8"))]


def _pairs(sub: Callable[[Any], Any], merges: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(_bytes(sub(a)), _bytes(sub(b))) for a, b in merges]


_HALF = "½"  # in `_ids`: half a character
_BYTE_CASES = {  # check: (visible cases, more hidden ones), each the arguments of _byte as a function of the
    # relabelling of its text (see `_cases`)
    "byte_bpe_vocab": ([lambda s: (([],), "vocab"),
                        lambda s: ((s("東京 東京 東京"), 4), "vocab", None, " (built by train)")],
                       [lambda s: ((_pairs(s, _DUP[0]),), "vocab", None, " (one string is built by two merges)"),
                        lambda s: ((s("café cafés éé"), 6), "vocab", None, " (built by train)")]),
    "byte_bpe_encode": ([lambda s: (([],), "encode", s("é東🙂")),
                         lambda s: ((_pairs(s, _HUG),), "encode", s("hug pug")),
                         lambda s: (([_e(s), (_bytes(s("f")), "".join(_e(s)))],), "roundtrip",
                                    s("naïve café, 東京, 🙂"))],
                        [lambda s: ((_pairs(s, _BC_AB),), "encode", s("abababc")),
                         lambda s: (([_e(s)],), "encode", s(" café\n"))]),
    "byte_bpe_decode": ([lambda s: (([],), "decode", _ids(s, "é 東")),
                         lambda s: (([],), "decode", _ids(s, "h", _HALF, "i"), " (half a character)"),
                         lambda s: (([_e(s)],), "decode", _ids(s, 256, _HALF, 256), " (half a character)"),
                         lambda s: (([],), "decode", _ids(s, "A", -1), " (a negative id)")],
                        [lambda s: (([_e(s)],), "decode", [257], " (one past the last id)"),
                         lambda s: (([],), "roundtrip", s("Zoë 東京 🙂\n"))])}

_BYTE_MISTAKES = [  # (operations: v(ocab), e(ncode), d(ecode); hint; knobs)
    ("ved", "Did you run BPE on the characters instead of the UTF-8 bytes? Train and encode on "
            "to_bytechars(text): every character outside ASCII is several bytes.", {"chars": True}),
    ("ed", "Did you decode each token's bytes on its own? Join the bytes of all the ids first, then decode "
           "once: a character's bytes may sit in two tokens.", {"per_token": True}),
    ("d", "Did you decode with errors='strict'? Invalid or cut UTF-8 must give UNK_CHAR: "
          "bytes.decode('utf-8', errors='replace').", {"errors": "strict"}),
    ("d", "Did a negative id index the vocabulary from the end? decode must raise ValueError for any id "
          "outside 0..vocab_size-1.", {"wrap": True}),
    ("v", "Did you add a merged token twice? Two merges can build the same string: add it once.",
     {"dedupe": False}),
    ("e", _ORDER, {"encoding": {"order": "reversed"}})]


def _byte_check(name: str) -> Check:
    op = name.rpartition("_")[2]
    return Check(name=name, expected=lambda c: _or_error(_ByteTokenizer.on, c),
                 cases=_cases(_byte, *_BYTE_CASES[name], lambda rng: _random_bytes(rng, op)),
                 hint="Check the contract: vocabulary = BYTE_CHARS then one token per merge; train and encode on "
                      "to_bytechars(text); decode joins all the bytes, then decodes with errors='replace'.",
                 mistakes=[Mistake(h, kit.variant(_ByteTokenizer.on, **k)) for ops, h, k in _BYTE_MISTAKES
                           if op[0] in ops])

register(__name__, *(_byte_check(name) for name in ("byte_bpe_vocab", "byte_bpe_encode", "byte_bpe_decode")))
