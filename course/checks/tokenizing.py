"""Checks for chapter 1: a character tokenizer and byte-pair encoding (BPE).

The oracles here are written independently of the chapter's solution cells:
small, deliberately plain implementations of the contracts stated in the
notebook, each with switches that reproduce a known mistake (the `Mistake`
hints are matched against those). Hand-computed answers pin the oracles down:
`_HAND_MERGES` and `_HAND_ENCODINGS` below were worked out on paper, and the
module checks at import that the oracles reproduce them.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable

import numpy as np

from .framework import Case, Check, Mistake, Raises, register

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
UNK_CHAR = "\ufffd"
_WORD = re.compile(r"\s*\S+|\s+")


def _or_raises(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The oracle's answer, or Raises(ValueError) where the contract asks for one."""
    try:
        return fn(*args, **kwargs)
    except ValueError as err:
        return Raises(("ValueError",), str(err))


def _words(text: str) -> list[str]:
    """The contract's pre-tokenization: whitespace sticks to the word after it."""
    return _WORD.findall(text)


# ------------------------------------------------------------ merge_pair ---

def _merge(tokens: list[str], pair: tuple[str, str], how: str = "ok") -> list[str]:
    """Replace non-overlapping occurrences of `pair`, scanning left to right.

    `how` reproduces a mistake: "first" (first occurrence only), "noskip"
    (no jump past a merged pair), "text" (compare concatenated strings),
    "nolast" (the last position is never tested). See `_merge_rtl` for a right-to-left scan.
    """
    a, b = pair
    out: list[str] = []
    i, n, done = 0, len(tokens), False
    last = n - 2 if how == "nolast" else n - 1
    while i < n:
        hit = i < last and (tokens[i] + tokens[i + 1] == a + b if how == "text"
                            else tokens[i] == a and tokens[i + 1] == b)
        if hit and not done:
            out.append(a + b)
            i += 1 if how == "noskip" else 2
            done = how == "first"
        else:
            out.append(tokens[i])
            i += 1
    return out


def _merge_rtl(tokens: list[str], pair: tuple[str, str]) -> list[str]:
    a, b = pair
    out: list[str] = []
    i = len(tokens) - 1
    while i >= 0:
        if i >= 1 and tokens[i - 1] == a and tokens[i] == b:
            out.append(a + b)
            i -= 2
        else:
            out.append(tokens[i])
            i -= 1
    return out[::-1]


# ------------------------------------------------------------- training ---

def _train(corpus: str, num_merges: int, *, tie: str = "greatest", cross_words: bool = False,
           skip_last: bool = False, weighted: bool = True, min_count: int = 2,
           recount: bool = True, merge: str = "ok") -> list[tuple[str, str]]:
    """Byte-pair-encoding training as the notebook specifies it, with switches
    that reproduce known mistakes (the defaults are the contract)."""
    if num_merges < 0:
        raise ValueError("a negative num_merges is an error")
    words = [corpus] if cross_words else _words(corpus)
    freq: dict[str, int] = {}
    for w in words:  # insertion order = first occurrence, like a Counter
        freq[w] = freq.get(w, 0) + 1
    segs = [[list(w), f if weighted else 1] for w, f in freq.items()]

    def count() -> dict[tuple[str, str], int]:
        counts: dict[tuple[str, str], int] = {}
        for toks, f in segs:
            stop = len(toks) - 2 if skip_last else len(toks) - 1
            for i in range(stop):
                key = (toks[i], toks[i + 1])
                counts[key] = counts.get(key, 0) + f
        return counts

    merges: list[tuple[str, str]] = []
    frozen = count()
    while len(merges) < num_merges:
        counts = count() if recount else {p: c for p, c in frozen.items() if p not in merges}
        if not counts:
            break
        top = max(counts.values())
        tied = [p for p in counts if counts[p] == top]
        best = {"greatest": max(tied), "smallest": min(tied), "first": tied[0]}[tie]
        if top < min_count:
            break
        merges.append(best)
        for seg in segs:
            seg[0] = _merge(seg[0], best, merge)
    return merges


# ------------------------------------------------------------- encoding ---

def _encode(text: str, merges: list[tuple[str, str]], *, order: str = "learned",
            split: str = "contract", merge: str = "ok") -> list[str]:
    """Encode `text` by replaying `merges` on each word, in learned order.

    Mistakes: order "reversed" / "sorted" / "frequent" (most frequent known
    pair of the word first) / "scan" (one left-to-right pass merging any known
    pair); split "whitespace" (text.split(), spaces lost).
    """
    words = text.split() if split == "whitespace" else _words(text)
    known = set(merges)
    out: list[str] = []
    for w in words:
        toks = list(w)
        if order == "scan":
            merged: list[str] = []
            for t in toks:
                if merged and (merged[-1], t) in known:
                    merged[-1] += t
                else:
                    merged.append(t)
            toks = merged
        elif order == "frequent":
            while True:
                c = Counter(p for p in zip(toks, toks[1:]) if p in known)
                if not c:
                    break
                toks = _merge(toks, max(c, key=c.get), merge)
        else:
            seq = {"learned": merges, "reversed": merges[::-1], "sorted": sorted(merges)}[order]
            for p in seq:
                toks = _merge(toks, p, merge)
        out.extend(toks)
    return out


# Worked out by hand (the derivations are in the notebook's prose and here):
#
# "hug hugs pug hug" -> words "hug", " hugs", " pug", " hug" (once each).
#   counts: (u,g) 4, (h,u) 3, (' ',h) 2, rest 1      -> merge ('u','g')
#   then:   (h,ug) 3, (' ',h) 2, rest 1               -> merge ('h','ug')
#   then:   (' ',hug) 2, rest 1                       -> merge (' ','hug')
#   then:   (' hug',s), (' ',p), (p,ug): 1 each       -> stop (best count < 2)
# "aaa aaa aaa" -> "aaa" once, " aaa" twice.
#   (a,a) 2*1 + 2*2 = 6 (overlapping pairs count)     -> ('a','a'): "aaa" -> [aa, a]
#   (aa,a) 3, (' ',aa) 2                              -> ('aa','a')
#   (' ',aaa) 2                                       -> (' ','aaa'), then no pairs.
# "ab ab ab" -> "ab" once, " ab" twice: (a,b) 3, (' ',a) 2 -> ('a','b'), then
#   (' ',ab) 2 -> (' ','ab'). Counting across words would see (b,' ') and
#   (ab,' ') too, and pick ('ab',' ') at the second step.
# "cdcd abab efef": (c,d), (a,b), (e,f) all 2: greatest is ('e','f'); then
#   (c,d) and (a,b) tie at 2: ('c','d'); then ('a','b'); then all counts are 1.
# "abab acac": (a,b) and (a,c) tie at 2: ('a','c') (greater second string), then ('a','b').
# "cd ab ab ab cd": "cd" 1, " ab" 3, " cd" 1. (a,b) 3 and (' ',a) 3 tie:
#   ('a','b') ("a" > " "); then (' ',ab) 3; then (c,d) 2; then (' ',cd) 1: stop.
#   Counting each distinct word once would give (c,d) 2 first, then stop.
# "   " (one word of three spaces): (' ',' ') 2 -> merge -> ['  ', ' '], then count 1: stop.
_HUG = [("u", "g"), ("h", "ug"), (" ", "hug")]
_HAND_MERGES: dict[tuple[str, int], list[tuple[str, str]]] = {
    ("hug hugs pug hug", 10): _HUG,
    ("hug hugs pug hug", 2): _HUG[:2],
    ("aaa aaa aaa", 10): [("a", "a"), ("aa", "a"), (" ", "aaa")],
    ("ab ab ab", 5): [("a", "b"), (" ", "ab")],
    ("cdcd abab efef", 10): [("e", "f"), ("c", "d"), ("a", "b")],
    ("abab acac", 10): [("a", "c"), ("a", "b")],
    ("cd ab ab ab cd", 10): [("a", "b"), (" ", "ab"), ("c", "d")],
    ("   ", 4): [(" ", " ")],
    ("hug hugs pug hug", 0): [],
    ("", 3): [],
}
# bpe_encode by hand:
# "hugs bug" with _HUG: "hugs" -> h u g s -> h ug s -> hug s; " bug" -> ' ' b u g -> ' ' b ug.
# "  hug\n": words "  hug" and "\n"; "  hug" -> ' ' ' ' h ug -> ' ' ' ' hug -> ' ' ' hug'.
# "abababc" with [(b,c), (a,b)]: (b,c) first -> a b a b a bc; then (a,b) -> ab ab a bc.
#   Applying (a,b) first (wrong order) gives ab ab ab c.
# "aaaaa" with [(a,a), (aa,a)]: aa aa a -> aa aaa.
_HAND_ENCODINGS: dict[tuple[str, tuple], list[str]] = {
    ("hugs bug", tuple(_HUG)): ["hug", "s", " ", "b", "ug"],
    ("  hug\n", tuple(_HUG)): [" ", " hug", "\n"],
    ("abababc", (("b", "c"), ("a", "b"))): ["ab", "ab", "a", "bc"],
    ("aaaaa", (("a", "a"), ("aa", "a"))): ["aa", "aaa"],
    ("hi there", ()): ["h", "i", " ", "t", "h", "e", "r", "e"],
    ("", tuple(_HUG)): [],
}
for (_c, _n), _m in _HAND_MERGES.items():
    assert _train(_c, _n) == _m, (_c, _n)
for (_t, _m), _e in _HAND_ENCODINGS.items():
    assert _encode(_t, list(_m)) == _e, (_t, _m)


# ------------------------------------------------------------ tokenizers ---

class _Tokenizer:
    """Oracle for both tokenizer classes. With `merges` it is the BPE one.

    Switches reproduce mistakes: specials_last, order ("sorted"/"appearance"),
    unk ("id"/"crash"), keep_specials, unk_text, no_eos, fixed_ids (ids 0..3
    hard-coded), wrap (negative ids index from the end), dedupe, sort_merges,
    joiner.
    """

    def __init__(self, corpus: str, specials: tuple[str, ...] = SPECIALS, merges: list | None = None,
                 *, specials_last: bool = False, order: str = "sorted", unk: str = "id",
                 keep_specials: bool = False, unk_text: str = UNK_CHAR, no_eos: bool = False,
                 fixed_ids: bool = False, wrap: bool = False, dedupe: bool = True,
                 sort_merges: bool = False, joiner: str = "", encoding: dict | None = None) -> None:
        chars = sorted(set(corpus)) if order == "sorted" else list(dict.fromkeys(corpus))
        self.itos = chars + list(specials) if specials_last else list(specials) + chars
        self.merges = list(merges) if merges is not None else None
        for a, b in (sorted(self.merges) if sort_merges else self.merges) if merges is not None else []:
            if not dedupe or a + b not in self.itos:
                self.itos.append(a + b)
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.vocab_size = len(self.itos)
        names = ("<pad>", "<bos>", "<eos>", "<unk>")
        self.pad, self.bos, self.eos, self.unk = range(4) if fixed_ids else (self.stoi[s] for s in names)
        self.o = dict(unk=unk, keep=keep_specials, unk_text=unk_text, no_eos=no_eos, wrap=wrap, joiner=joiner,
                      encoding=encoding or {})

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        pieces = list(text) if self.merges is None else _encode(text, self.merges, **self.o["encoding"])
        ids = [self.stoi[p] if self.o["unk"] == "crash" else self.stoi.get(p, self.unk) for p in pieces]
        if add_special:
            ids = [self.bos] + ids + ([] if self.o["no_eos"] else [self.eos])
        return ids

    def decode(self, ids: list[int]) -> str:
        out = []
        for i in ids:
            if not 0 <= i < self.vocab_size and not (self.o["wrap"] and -self.vocab_size <= i < 0):
                raise ValueError(f"decode must reject id {i}: ids lie in 0..vocab_size-1 = 0..{self.vocab_size - 1}")
            if i in (self.pad, self.bos, self.eos) and not self.o["keep"]:
                continue
            out.append(self.o["unk_text"] if i == self.unk and not self.o["keep"] else self.itos[i])
        return self.o["joiner"].join(out)


def _tokenizer_call(build: Callable[..., Any], case: Case) -> Any:
    """Build a tokenizer from case.args = (ctor_args, ctor_kwargs, op, op_args)
    and run one operation on it: "vocab", "encode", "decode" or "roundtrip"."""
    ctor_args, ctor_kwargs, op, op_args = case.args
    tok = build(*ctor_args, **ctor_kwargs)
    if op == "vocab":
        return {"vocab_size": tok.vocab_size, "itos": list(tok.itos), "stoi": dict(tok.stoi)}
    if op == "encode":
        text, add_special = op_args
        return tok.encode(text, add_special=add_special)
    if op == "decode":
        return tok.decode(list(op_args[0]))
    if op == "roundtrip":
        text, add_special = op_args
        return tok.decode(tok.encode(text, add_special=add_special))
    raise ValueError(op)


def _char_oracle(**switches: Any) -> Callable[[Case], Any]:
    def output(case: Case) -> Any:
        def build(corpus: str, specials: tuple[str, ...] = SPECIALS) -> _Tokenizer:
            return _Tokenizer(corpus, specials, **switches)
        return _tokenizer_call(build, case)
    return output


def _bpe_oracle(**switches: Any) -> Callable[[Case], Any]:
    def output(case: Case) -> Any:
        def build(merges: list, alphabet: str, specials: tuple[str, ...] = SPECIALS) -> _Tokenizer:
            return _Tokenizer(alphabet, specials, merges, **switches)
        return _tokenizer_call(build, case)
    return output


# ---------------------------------------------------------- random data ---

def _random_lexicon(rng: np.random.Generator, alphabet: str, size: int, max_len: int) -> list[str]:
    letters = list(alphabet)
    return ["".join(rng.choice(letters, size=int(rng.integers(1, max_len + 1)))) for _ in range(size)]


def _random_text(rng: np.random.Generator, lexicon: list[str], n_words: int,
                 odd_spaces: bool = False) -> str:
    """Words drawn with Zipf-like weights, so some repeat often (as in real text)."""
    weights = 1.0 / np.arange(1, len(lexicon) + 1)
    picks = rng.choice(len(lexicon), size=n_words, p=weights / weights.sum())
    seps = [" ", " ", " ", " ", "  ", "\n", " \n"] if odd_spaces else [" "]
    text = ""
    for k, i in enumerate(picks):
        text += (seps[int(rng.integers(len(seps)))] if k else "") + lexicon[int(i)]
    return text


def _random_specials(rng: np.random.Generator) -> tuple[str, ...]:
    return tuple(SPECIALS[i] for i in rng.permutation(4))


def _show(s: str, limit: int = 40) -> str:
    r = repr(s)
    return r if len(r) <= limit else r[:limit - 4] + "...'"


# ------------------------------------------------------- CharTokenizer ---

def _char_case(corpus: str, op: str, op_args: tuple, specials: tuple[str, ...] = SPECIALS,
               what: str = "") -> Case:
    kwargs = {} if specials == SPECIALS else {"specials": specials}
    where = f"corpus {_show(corpus)}" + ("" if specials == SPECIALS else f", specials {specials}")
    return Case(f"{where}: {what}" if what else where, ((corpus,), kwargs, op, op_args))


def _char_vocab_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    cases = [_char_case("hello world", "vocab", (), what="the vocabulary"),
             _char_case("banana", "vocab", (), what="the vocabulary")]
    if hidden:
        cases.append(_char_case("", "vocab", (), what="an empty corpus: specials only"))
        cases.append(_char_case("To be, or not to be:\nthat is the question.", "vocab", (),
                                what="the vocabulary (punctuation, capitals, a newline)"))
        for _ in range(2):
            corpus = _random_text(rng, _random_lexicon(rng, "zyxwcba", 6, 5), 12, odd_spaces=True)
            cases.append(_char_case(corpus, "vocab", (), _random_specials(rng),
                                    what="the vocabulary, specials in another order"))
    return cases


def _char_encode_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    cases = [_char_case("hello world", "encode", ("hello", False), what="encode 'hello'"),
             _char_case("hello world", "encode", ("low", True), what="encode 'low' with add_special=True"),
             _char_case("hello world", "encode", ("hi!", False),
                        what="encode 'hi!' ('i' and '!' are not in the vocabulary)")]
    if hidden:
        cases.append(_char_case("hello world", "encode", ("", True), what="encode '' with add_special=True"))
        for _ in range(3):
            lex = _random_lexicon(rng, "dcba", 5, 4)
            corpus = _random_text(rng, lex, 10)
            specials = _random_specials(rng)
            text = _random_text(rng, lex + ["qz", "a?"], 6, odd_spaces=True)
            for add in (False, True):
                cases.append(_char_case(corpus, "encode", (text, add), specials,
                                        what=f"encode {_show(text)} (add_special={add})"))
    return cases


def _char_decode_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    hw = _Tokenizer("hello world")
    ids = hw.encode("hello", add_special=True)
    cases = [_char_case("hello world", "decode", (ids,), what=f"decode {ids}"),
             _char_case("hello world", "decode", ([hw.pad, 7, 9, 11, hw.unk, hw.pad],),
                        what="decode ids with <pad> and <unk>"),
             _char_case("hello world", "roundtrip", ("world hello", False),
                        what="decode(encode('world hello'))"),
             _char_case("hello world", "decode", ([7, -1],), what="decode [7, -1] (a negative id)")]
    if hidden:
        cases.append(_char_case("hello world", "decode", ([5, hw.vocab_size],),
                                what=f"decode [5, {hw.vocab_size}] (one past the last id)"))
        for _ in range(3):
            lex = _random_lexicon(rng, "edcba", 6, 5)
            corpus = _random_text(rng, lex, 12, odd_spaces=True)
            specials = _random_specials(rng)
            tok = _Tokenizer(corpus, specials)
            text = _random_text(rng, lex, 5, odd_spaces=True)
            cases.append(_char_case(corpus, "roundtrip", (text, True), specials,
                                    what=f"decode(encode({_show(text)}, add_special=True))"))
            some = [int(i) for i in rng.integers(0, tok.vocab_size, size=9)] + [tok.unk, tok.eos]
            cases.append(_char_case(corpus, "decode", (some,), specials, what=f"decode {some}"))
    return cases


_CHAR_MISTAKES = [
    Mistake("Unknown characters must not raise: did you index stoi[ch] directly? Use the id of <unk> "
            "for characters that are not in the vocabulary (e.g. stoi.get(ch, unk_id)).",
            _char_oracle(unk="crash")),
    Mistake("Did you put the special tokens after the characters? They come first, with ids "
            "0, 1, 2, ... in the order given by `specials`.", _char_oracle(specials_last=True)),
    Mistake("Is your vocabulary in order of first appearance? The characters must be sorted "
            "(sorted(set(corpus))) after the specials.", _char_oracle(order="appearance")),
    Mistake("Did you hard-code the ids of the special tokens as 0..3? Look them up in stoi: "
            "`specials` may come in another order.", _char_oracle(fixed_ids=True)),
    Mistake("Did decode keep the special tokens? <pad>, <bos> and <eos> produce no text, and <unk> "
            "decodes to UNK_CHAR.", _char_oracle(keep_specials=True)),
    Mistake("Did <unk> decode to the string '<unk>'? The contract writes UNK_CHAR ('\\ufffd') for it.",
            _char_oracle(unk_text="<unk>")),
    Mistake("Did <unk> decode to nothing? The contract writes UNK_CHAR ('\\ufffd') for it.",
            _char_oracle(unk_text="")),
    Mistake("With add_special=True, did you forget the <eos> id at the end?", _char_oracle(no_eos=True)),
    Mistake("Did a negative id index the vocabulary from the end? decode must raise ValueError for any "
            "id outside 0..vocab_size-1.", _char_oracle(wrap=True)),
]
_CHAR_HINT = ("Check the contract: specials first (in the given order), then sorted(set(corpus)); unknown "
              "characters encode to the <unk> id (no KeyError); decode drops <pad>/<bos>/<eos>, writes "
              "UNK_CHAR for <unk> and raises ValueError for ids outside the vocabulary.")


def _char_expected(case: Case) -> Any:
    return _or_raises(_char_oracle(), case)


# ---------------------------------------------------------- merge_pair ---

def _merge_pair_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    fixed = [(list("hug"), ("u", "g")), (list("banana"), ("a", "n")), (list("aaa"), ("a", "a")),
             (["a", "bc", "a", "b", "c"], ("ab", "c"))]
    if hidden:
        fixed += [(list("aaaa"), ("a", "a")), (list("abcab"), ("a", "b")), ([], ("a", "b")),
                  (["x"], ("x", "x")), ([" ", "t", "he", " ", "th", "e"], ("t", "he")),
                  (list("abab"), ("b", "a")), (list("xyz"), ("y", "z"))]
        for _ in range(4):
            toks = [str(t) for t in rng.choice(["a", "b", "ab", "ba", " "], size=int(rng.integers(5, 14)))]
            k = int(rng.integers(len(toks) - 1))
            fixed.append((toks, (toks[k], toks[k + 1])))
    return [Case(f"tokens {t}, pair {p}", (t, p)) for t, p in fixed]


# ----------------------------------------------------------- train_bpe ---

def _hand_case(corpus: str, n: int) -> Case:
    return Case(f"corpus {corpus!r}, num_merges={n}", (corpus, n))


def _train_bpe_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    names = [("hug hugs pug hug", 10), ("aaa aaa aaa", 10), ("ab ab ab", 5), ("hug hugs pug hug", 0)]
    if hidden:
        names += [("hug hugs pug hug", 2), ("cd ab ab ab cd", 10), ("   ", 4), ("", 3)]
    cases = [_hand_case(c, n) for c, n in names]
    if hidden:
        cases.append(Case("corpus 'ab ab', num_merges=-1 (negative)", ("ab ab", -1)))
    return cases


def _train_ties_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    cases = [_hand_case("cdcd abab efef", 10), _hand_case("abab acac", 10)]
    if hidden:
        for _ in range(3):  # every word exactly twice: ties everywhere
            lex = _random_lexicon(rng, "bcad", 5, 4)
            words = [w for w in lex for _ in range(2)]
            corpus = " ".join(str(w) for w in rng.permutation(words))
            cases.append(Case(f"corpus {corpus!r} (many ties), num_merges=12", (corpus, 12)))
    return cases


def _train_random_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [("abc", 6, 4, 30, 8, False)] if not hidden else \
            [("abc", 8, 5, 60, 20, False), ("abcd", 10, 6, 80, 30, True), ("ab", 6, 6, 50, 40, True),
             ("lowerst", 12, 7, 90, 25, True), ("xyz", 4, 3, 15, 50, False)]
    cases = []
    for alphabet, size, max_len, n_words, merges, odd in specs:
        corpus = _random_text(rng, _random_lexicon(rng, alphabet, size, max_len), n_words, odd)
        cases.append(Case(f"random corpus of {n_words} words over {alphabet!r} "
                          f"({'mixed whitespace' if odd else 'single spaces'}), num_merges={merges}",
                          (corpus, merges)))
    return cases


def _train_expected(case: Case) -> Any:
    corpus, n = case.args
    if (corpus, n) in _HAND_MERGES:
        return _HAND_MERGES[(corpus, n)]
    return _or_raises(_train, corpus, n)


def _train_mistake(**switches: Any) -> Callable[[Case], Any]:
    return lambda case: _train(*case.args, **switches)


_TIES = ("How do you break ties? Among the pairs with the top count, the contract takes the "
         "lexicographically greatest (max over (count, pair)), not the first one found (e.g. "
         "max(counts, key=counts.get)) and not the smallest.")
_NOSKIP = ("Does your merge step re-use the second token of a merged pair? After merging tokens[i] and "
           "tokens[i + 1], continue at i + 2 (check your merge_pair).")
_FIRST_ONLY = ("Did you merge only the first occurrence of the pair in each word? Merge all of them "
               "(check your merge_pair).")
_NOLAST = ("Is a pair at the very end of a word never merged? Test every i with i + 1 < len(tokens) "
           "(check your merge_pair).")
_TRAIN_MISTAKES = [
    Mistake("Did you count pairs across word boundaries? Pre-tokenize with pretokenize() and count "
            "pairs inside each word only: a pair never spans two words.", _train_mistake(cross_words=True)),
    Mistake("Did you miss the last pair of each word? A word of n tokens has n - 1 adjacent pairs "
            "(i from 0 to n - 2).", _train_mistake(skip_last=True)),
    Mistake(_TIES, _train_mistake(tie="first")),
    Mistake(_TIES, _train_mistake(tie="smallest")),
    Mistake("Did you count each distinct word once? Each word's pairs count as often as the word "
            "occurs in the corpus.", _train_mistake(weighted=False)),
    Mistake("Did you keep merging pairs that occur only once? Stop as soon as the best count is "
            "below 2.", _train_mistake(min_count=1)),
    Mistake("Did you count the pairs only once, before the first merge? Recount after every merge: "
            "merging changes the pairs.", _train_mistake(recount=False)),
    Mistake(_NOSKIP, _train_mistake(merge="noskip")),
    Mistake(_FIRST_ONLY, _train_mistake(merge="first")),
    Mistake(_NOLAST, _train_mistake(merge="nolast")),
]


# ---------------------------------------------------------- bpe_encode ---

def _encode_case(text: str, merges: list[tuple[str, str]], what: str) -> Case:
    return Case(f"text {_show(text)}, {what}", (text, merges))


def _encode_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    hug = list(_HUG)
    cases = [_encode_case("hugs bug", hug, f"merges {hug}"),
             _encode_case("abababc", [("b", "c"), ("a", "b")], "merges [('b', 'c'), ('a', 'b')]"),
             _encode_case("  hug\n", hug, f"merges {hug}")]
    if hidden:
        cases += [_encode_case("aaaaa", [("a", "a"), ("aa", "a")], "merges [('a', 'a'), ('aa', 'a')]"),
                  _encode_case("hi there", [], "no merges"),
                  _encode_case("", hug, "an empty text")]
    return cases


def _encode_random_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [("abc", 6, 4, 40, 10)] if not hidden else \
            [("abc", 8, 5, 60, 20), ("abcd", 10, 6, 80, 30), ("ab", 6, 6, 50, 25), ("lowerst", 12, 7, 90, 40)]
    cases = []
    for alphabet, size, max_len, n_words, n_merges in specs:
        lex = _random_lexicon(rng, alphabet, size, max_len)
        corpus = _random_text(rng, lex, n_words, odd_spaces=hidden)
        merges = _train(corpus, n_merges)
        fresh = _random_lexicon(rng, alphabet, 3, max_len) + ["q" + lex[0]]  # new words, an unseen 'q'
        text = " " + _random_text(rng, lex + fresh, 12, odd_spaces=True) + "\n"
        cases.append(Case(f"text {_show(text)}, {len(merges)} merges learned on a random corpus "
                          f"over {alphabet!r}", (text, merges)))
        if hidden:
            cases.append(Case(f"the training corpus itself ({n_words} words over {alphabet!r}), "
                              f"{len(merges)} merges", (corpus, merges)))
    return cases


def _encode_expected(case: Case) -> Any:
    text, merges = case.args
    key = (text, tuple(merges))
    return _HAND_ENCODINGS[key] if key in _HAND_ENCODINGS else _encode(text, merges)


def _encode_mistake(**switches: Any) -> Callable[[Case], Any]:
    return lambda case: _encode(*case.args, **switches)


_ORDER = ("Your tokens match applying the merges in another order than the learned one (reversed, "
          "sorted or kept in a set, most frequent pair first, or one greedy left-to-right scan). Apply "
          "merges[0] to the whole word, then merges[1] to the result, and so on: each merge once, in "
          "learned order.")
_ENCODE_MISTAKES = [
    Mistake(_ORDER, _encode_mistake(order="reversed")),
    Mistake(_ORDER, _encode_mistake(order="sorted")),
    Mistake(_ORDER, _encode_mistake(order="frequent")),
    Mistake(_ORDER, _encode_mistake(order="scan")),
    Mistake("Did you split with text.split()? That throws the whitespace away; pretokenize() keeps it, "
            "so ''.join(tokens) == text.", _encode_mistake(split="whitespace")),
    Mistake(_FIRST_ONLY, _encode_mistake(merge="first")),
    Mistake(_NOSKIP, _encode_mistake(merge="noskip")),
    Mistake(_NOLAST, _encode_mistake(merge="nolast")),
]


# --------------------------------------------------------- BPETokenizer ---

_DUP = [("a", "b"), ("ab", "c"), ("b", "c"), ("a", "bc")]  # "abc" is built twice


def _bpe_case(merges: list, alphabet: str, op: str, op_args: tuple, specials: tuple[str, ...] = SPECIALS,
              what: str = "") -> Case:
    kwargs = {} if specials == SPECIALS else {"specials": specials}
    listed = str(merges)
    where = f"merges {listed if len(listed) <= 60 else listed[:56] + ' ...]'}, alphabet {_show(alphabet)}"
    if specials != SPECIALS:
        where += f", specials {specials}"
    return Case(f"{where}: {what}", ((list(merges), alphabet), kwargs, op, op_args))


def _random_bpe(rng: np.random.Generator, alphabet: str, n_merges: int) -> tuple[list, str, list[str]]:
    lex = _random_lexicon(rng, alphabet, 8, 5)
    corpus = _random_text(rng, lex, 50, odd_spaces=True)
    return _train(corpus, n_merges), corpus, lex


def _bpe_vocab_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    cases = [_bpe_case(_HUG, "hug hugs pug hug", "vocab", (), what="the vocabulary"),
             _bpe_case(_DUP, "abc", "vocab", (), what="the vocabulary ('abc' is built by two merges)")]
    if hidden:
        cases.append(_bpe_case([], "ba ab", "vocab", (), what="the vocabulary without merges"))
        for alphabet in ("abc", "ab"):
            merges, corpus, _ = _random_bpe(rng, alphabet, 30)
            cases.append(_bpe_case(merges, corpus, "vocab", (), _random_specials(rng),
                                   what=f"the vocabulary of {len(merges)} learned merges"))
    return cases


def _bpe_encode_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    hug = "hug hugs pug hug"
    cases = [_bpe_case(_HUG, hug, "encode", ("hug pug", False), what="encode 'hug pug'"),
             _bpe_case(_HUG, hug, "encode", ("hugs!", True), what="encode 'hugs!' with add_special=True")]
    if hidden:
        cases.append(_bpe_case(_DUP, "abc", "encode", ("abcabc cab", True), what="encode 'abcabc cab'"))
        for alphabet in ("abc", "abcd"):
            merges, corpus, lex = _random_bpe(rng, alphabet, 25)
            specials = _random_specials(rng)
            text = _random_text(rng, lex + ["x" + lex[1]], 10, odd_spaces=True)
            for add in (False, True):
                cases.append(_bpe_case(merges, corpus, "encode", (text, add), specials,
                                       what=f"encode {_show(text)} (add_special={add})"))
    return cases


def _bpe_decode_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    hug = "hug hugs pug hug"
    tok = _Tokenizer(hug, SPECIALS, _HUG)
    ids = [tok.bos, tok.stoi["hug"], tok.stoi[" hug"], tok.stoi["s"], tok.unk, tok.eos, tok.pad]
    cases = [_bpe_case(_HUG, hug, "decode", (ids,), what=f"decode {ids}"),
             _bpe_case(_HUG, hug, "roundtrip", ("pug hugs  hug\n", True),
                       what="decode(encode('pug hugs  hug\\n', add_special=True))"),
             _bpe_case(_HUG, hug, "decode", ([5, -2],), what="decode [5, -2] (a negative id)")]
    if hidden:
        cases.append(_bpe_case(_HUG, hug, "decode", ([tok.vocab_size],),
                               what=f"decode [{tok.vocab_size}] (one past the last id)"))
        for alphabet in ("abc", "ab"):
            merges, corpus, lex = _random_bpe(rng, alphabet, 30)
            specials = _random_specials(rng)
            text = " " + _random_text(rng, lex, 8, odd_spaces=True) + "  "
            cases.append(_bpe_case(merges, corpus, "roundtrip", (text, True), specials,
                                   what=f"decode(encode({_show(text)}, add_special=True))"))
            rt = _Tokenizer(corpus, specials, merges)
            some = [int(i) for i in rng.integers(0, rt.vocab_size, size=10)]
            cases.append(_bpe_case(merges, corpus, "decode", (some,), specials, what=f"decode {some}"))
    return cases


_BPE_MISTAKES = [
    Mistake("Unknown tokens must not raise: did you index stoi[token] directly? A token that is not in "
            "the vocabulary gets the id of <unk>.", _bpe_oracle(unk="crash")),
    *(Mistake("Your ids are those of a bpe_encode that does not replay the merges in learned order: "
              "fix bpe_encode (exercise 1.4) first; this class only looks its tokens up.",
              _bpe_oracle(encoding={"order": order})) for order in ("reversed", "sorted", "frequent", "scan")),
    Mistake("Your ids are those of a bpe_encode that loses whitespace (text.split()): fix bpe_encode "
            "(exercise 1.4) first.", _bpe_oracle(encoding={"split": "whitespace"})),
    Mistake("Did you add a merged token twice? Two merges can build the same string (here 'abc'); "
            "skip a merge whose result is already in the vocabulary.", _bpe_oracle(dedupe=False)),
    Mistake("Did you sort the merged tokens? They follow the characters in the order the merges "
            "were learned.", _bpe_oracle(sort_merges=True)),
    Mistake("Did you put the special tokens after the other tokens? They come first.",
            _bpe_oracle(specials_last=True)),
    Mistake("Did you hard-code the ids of the special tokens as 0..3? Look them up in stoi: "
            "`specials` may come in another order.", _bpe_oracle(fixed_ids=True)),
    Mistake("Did decode join the tokens with spaces? The spaces are inside the tokens already: "
            "join with ''.", _bpe_oracle(joiner=" ")),
    Mistake("Did decode keep the special tokens? <pad>, <bos> and <eos> produce no text, and <unk> "
            "decodes to UNK_CHAR.", _bpe_oracle(keep_specials=True)),
    Mistake("Did <unk> decode to the string '<unk>'? The contract writes UNK_CHAR for it.",
            _bpe_oracle(unk_text="<unk>")),
    Mistake("With add_special=True, did you forget the <eos> id at the end?", _bpe_oracle(no_eos=True)),
    Mistake("Did a negative id index the vocabulary from the end? decode must raise ValueError for "
            "any id outside 0..vocab_size-1.", _bpe_oracle(wrap=True)),
]
_BPE_HINT = ("Check the contract: specials, then sorted(set(alphabet)), then one token per merge in learned "
             "order (skipping strings already present); encode = bpe_encode + lookup, unknown tokens -> "
             "<unk> (no KeyError); decode joins token strings with '' and skips <pad>/<bos>/<eos>.")


def _bpe_expected(case: Case) -> Any:
    return _or_raises(_bpe_oracle(), case)


register(
    Check(name="char_vocab", cases=_char_vocab_cases, expected=_char_expected, call=_tokenizer_call,
          mistakes=_CHAR_MISTAKES, hint=_CHAR_HINT),
    Check(name="char_encode", cases=_char_encode_cases, expected=_char_expected, call=_tokenizer_call,
          mistakes=_CHAR_MISTAKES, hint=_CHAR_HINT),
    Check(name="char_decode", cases=_char_decode_cases, expected=_char_expected, call=_tokenizer_call,
          mistakes=_CHAR_MISTAKES, hint=_CHAR_HINT),
    Check(
        name="merge_pair",
        cases=_merge_pair_cases,
        expected=lambda c: _merge(*c.args),
        mistakes=[
            Mistake("Did you keep scanning from the second token of a merged pair? After a merge, jump "
                    "past both tokens: 'aaa' with ('a', 'a') gives ['aa', 'a'].",
                    lambda c: _merge(*c.args, how="noskip")),
            Mistake("Did you merge only the first occurrence? Merge every non-overlapping occurrence.",
                    lambda c: _merge(*c.args, how="first")),
            Mistake("Did you compare the concatenated text (tokens[i] + tokens[i+1] == a + b)? Compare "
                    "the two tokens themselves: ['a', 'bc'] does not contain the pair ('ab', 'c').",
                    lambda c: _merge(*c.args, how="text")),
            Mistake("Did you miss a pair at the very end of the list? Test every i with i + 1 < "
                    "len(tokens).", lambda c: _merge(*c.args, how="nolast")),
            Mistake("Did you scan from the right? Scan left to right: 'aaa' with ('a', 'a') gives "
                    "['aa', 'a'], not ['a', 'aa'].", lambda c: _merge_rtl(*c.args)),
        ],
        hint="Scan left to right; where tokens[i] == pair[0] and tokens[i + 1] == pair[1], emit "
             "pair[0] + pair[1] and continue at i + 2; otherwise emit tokens[i].",
    ),
    Check(name="train_bpe", cases=_train_bpe_cases, expected=_train_expected,
          mistakes=_TRAIN_MISTAKES,
          hint="Follow the contract step by step: words from pretokenize(), pairs counted inside words "
               "weighted by word frequency, ties to the greatest pair, stop when the best count is "
               "below 2, ValueError for a negative num_merges."),
    Check(name="train_bpe_ties", cases=_train_ties_cases, expected=_train_expected,
          mistakes=_TRAIN_MISTAKES,
          hint="Among the pairs with the top count, take the lexicographically greatest (compare the "
               "pairs as tuples: max over (count, pair))."),
    Check(name="train_bpe_random", cases=_train_random_cases, expected=_train_expected,
          mistakes=_TRAIN_MISTAKES,
          hint="Your merges differ from the contract's on a random corpus: re-read the counting, "
               "tie-breaking and stopping rules."),
    Check(name="bpe_encode", cases=_encode_cases, expected=_encode_expected, mistakes=_ENCODE_MISTAKES,
          hint="For each word from pretokenize(), start from its characters and apply merge_pair with "
               "merges[0], then merges[1], ... (learned order), then concatenate the words' tokens."),
    Check(name="bpe_encode_random", cases=_encode_random_cases, expected=_encode_expected,
          mistakes=_ENCODE_MISTAKES,
          hint="Your tokens differ from replaying the merges in learned order; note that "
               "''.join(tokens) must equal the text."),
    Check(name="bpe_tokenizer_vocab", cases=_bpe_vocab_cases, expected=_bpe_expected, call=_tokenizer_call,
          mistakes=_BPE_MISTAKES, hint=_BPE_HINT),
    Check(name="bpe_tokenizer_encode", cases=_bpe_encode_cases, expected=_bpe_expected,
          call=_tokenizer_call, mistakes=_BPE_MISTAKES, hint=_BPE_HINT),
    Check(name="bpe_tokenizer_decode", cases=_bpe_decode_cases, expected=_bpe_expected,
          call=_tokenizer_call, mistakes=_BPE_MISTAKES, hint=_BPE_HINT),
)
