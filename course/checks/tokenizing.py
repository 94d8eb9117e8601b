"""Checks for chapter 1: a character tokenizer and byte-pair encoding (BPE).

In order: the oracles, written independently of the solution cells (`_merge`, `_train`, `_encode`, and
`_Tokenizer` for both classes, run by `_use` as the student's are), with knobs for known mistakes; answers
worked out on paper that pin them down; the cases; the mistakes; the checks.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable

import numpy as np

from . import kit
from .framework import Case, Check, Mistake, register

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
UNK_CHAR = "\ufffd"
_WORD = re.compile(r"\s*\S+|\s+")  # pretokenize: whitespace sticks to the word after it


def _merge(tokens: list[str], pair: tuple[str, str], merge: str = "ok") -> list[str]:
    """merge_pair; `merge` names a mistake: "first", "noskip", "text", "nolast" or "rtl"."""
    a, b = pair
    if merge == "rtl":  # scanning from the right = scanning the mirrored list from the left
        flip = lambda ts: [t[::-1] for t in reversed(ts)]  # noqa: E731
        return flip(_merge(flip(tokens), (b[::-1], a[::-1])))
    out, i, n, done = [], 0, len(tokens), False
    while i < n:
        at_pair = i < n - 1 - (merge == "nolast") and (
            tokens[i] + tokens[i + 1] == a + b if merge == "text" else (tokens[i], tokens[i + 1]) == pair)
        if at_pair and not done:
            out.append(a + b)
            i, done = i + 1 + (merge != "noskip"), merge == "first"
        else:
            out.append(tokens[i])
            i += 1
    return out


def _train(corpus: str, num_merges: int, *, tie: str = "greatest", cross_words: bool = False,
           skip_last: bool = False, weighted: bool = True, min_count: int = 2, recount: bool = True,
           merge: str = "ok") -> list[tuple[str, str]]:
    """train_bpe, step by step as the contract states it; the knobs' defaults are the contract."""
    if num_merges < 0:
        raise ValueError("a negative num_merges is an error")
    freq = Counter([corpus] if cross_words else _WORD.findall(corpus))
    words = [[list(w), f if weighted else 1] for w, f in freq.items()]

    def count() -> Counter:  # in insertion order: first seen first ("the first pair found")
        return Counter(p for t, f in words for p in zip(t, t[1:len(t) - skip_last]) for _ in range(f))

    merges: list[tuple[str, str]] = []
    frozen = count()
    while len(merges) < num_merges:
        counts = count() if recount else Counter({p: c for p, c in frozen.items() if p not in merges})
        top = max(counts.values(), default=0)
        if top < min_count:
            break
        tied = [p for p in counts if counts[p] == top]
        merges.append({"greatest": max, "smallest": min, "first": lambda ps: ps[0]}[tie](tied))
        for w in words:
            w[0] = _merge(w[0], merges[-1], merge)
    return merges


def _encode(text: str, merges: list[tuple[str, str]], *, order: str = "learned", split: bool = True,
            merge: str = "ok") -> list[str]:
    """bpe_encode: the merges replayed in learned `order` on each word ("frequent": the word's most
    frequent known pair first; "scan": one greedy left-to-right pass); split=False: text.split()."""
    out, known = [], set(merges)
    for word in _WORD.findall(text) if split else text.split():
        toks = list(word)
        if order == "scan":
            toks = [word[0]] if word else []
            for t in word[1:]:
                toks[-1:] = [toks[-1] + t] if (toks[-1], t) in known else [toks[-1], t]
        while order == "frequent" and (c := Counter(p for p in zip(toks, toks[1:]) if p in known)):
            toks = _merge(toks, max(c, key=c.get), merge)
        for p in {"learned": merges, "reversed": merges[::-1], "sorted": sorted(merges)}.get(order, []):
            toks = _merge(toks, p, merge)
        out += toks
    return out


class _Tokenizer:
    """Both tokenizer classes (BPE when given merges); its knobs are those of `_TOKENIZER_MISTAKES`."""

    def __init__(self, alphabet: str, specials: tuple[str, ...], merges: list | None, *, specials_last=False,
                 appearance=False, fixed_ids=False, dedupe=True, sort_merges=False, stale_size=False,
                 **knobs: Any) -> None:
        chars = list(dict.fromkeys(alphabet)) if appearance else sorted(set(alphabet))
        self.itos = chars + list(specials) if specials_last else list(specials) + chars
        self.merges, self.bpe, base = list(merges or []), merges is not None, len(self.itos)
        for a, b in sorted(self.merges) if sort_merges else self.merges:
            self.itos += [a + b] if not dedupe or a + b not in self.itos else []
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.vocab_size = base if stale_size else len(self.itos)  # stale: CharTokenizer's size kept
        self.pad, self.bos, self.eos, self.unk = range(4) if fixed_ids else (self.stoi[s] for s in SPECIALS)
        self.o = {"crash": False, "keep": False, "unk_text": UNK_CHAR, "no_eos": False, "wrap": False,
                  "joiner": "", "encoding": {}, **knobs}  # `encoding`: the knobs of the `_encode` it uses

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        pieces = _encode(text, self.merges, **self.o["encoding"]) if self.bpe else list(text)
        ids = [self.stoi[p] if self.o["crash"] else self.stoi.get(p, self.unk) for p in pieces]
        return [self.bos] + ids + [self.eos] * (not self.o["no_eos"]) if add_special else ids

    def decode(self, ids: list[int]) -> str:
        out = []
        for i in ids:
            if not -self.vocab_size * self.o["wrap"] <= i < self.vocab_size:
                raise ValueError(f"decode must reject id {i}: ids lie in 0..vocab_size-1 = "
                                 f"0..{self.vocab_size - 1}")
            if self.o["keep"] or i not in (self.pad, self.bos, self.eos):
                out.append(self.o["unk_text"] if i == self.unk else self.itos[i])
        return self.o["joiner"].join(out)

    @staticmethod
    def on(case: Case, **knobs: Any) -> Any:
        """The oracle on a tokenizer case: args (corpus,) or (merges, alphabet), kwargs the specials."""
        merges = case.args[0] if len(case.args) == 2 else None
        return _use(_Tokenizer(case.args[-1], case.kwargs.get("specials", SPECIALS), merges, **knobs), case)


def _use(tok: Any, case: Case) -> Any:
    """Run meta "op" on a tokenizer, the student's or the oracle's: "vocab" (its attributes), "encode",
    "decode" or "roundtrip" (decode of encode); ids must be Python ints, decode leaves its input alone."""
    op, arg, add = case.meta["op"]
    if op == "vocab":
        return {name: getattr(tok, name) for name in arg}
    if op == "decode":
        text = tok.decode(ids := list(arg))
        if ids != arg:
            raise RuntimeError("decode changed its input (ids) in place; the contract leaves it unchanged")
        return text
    ids = _new(tok.encode(arg, add_special=True) if add else tok.encode(arg), (), int,
               "encode must return a list of Python ints")
    return tok.decode(ids) if op == "roundtrip" else ids


def _new(out: Any, args: tuple, item: type, what: str) -> Any:
    """`out` if it is a new list (not one of `args`) of `item`s, as the contract says; else an error."""
    if any(out is a for a in args if isinstance(a, list)):
        raise RuntimeError("it returned the list it was given: the contract asks for a new list")
    bad = out if not isinstance(out, list) else next((v for v in out if type(v) is not item), None)
    if bad is not None:
        raise TypeError(f"{what}, got a {type(bad).__name__} ({bad!r:.40})")
    return out


def _or_error(oracle: Callable[..., Any], *args: Any) -> Any:
    """oracle(*args) as the expected answer: a ValueError it raises is the error the contract asks for."""
    try:
        return oracle(*args)
    except ValueError as err:
        return kit.raises(str(err))


# Worked on paper ("␣" is a space; the notebook's prose derives the first one step by step):
# "hug hugs pug hug": words hug, ␣hugs, ␣pug, ␣hug. (u,g) 4 > (h,u) 3 > (␣,h) 2; then (h,ug) 3; then
#   (␣,hug) 2; then every count is 1: stop. "aaa aaa aaa": (a,a) 1*2 + 2*2 = 6 (overlaps count) -> aaa
#   = aa a; (aa,a) 3; (␣,aaa) 2. "ab ab ab": (a,b) 3; (␣,ab) 2 (across words, (ab,␣) would win).
#   "abab abab": (a,b) 4 -> ab ab; (ab,ab) 2 (merging only a word's first (a,b) would give ab a b).
#   "cd ab ab ab cd": (a,b) 3 ties (␣,a) 3; (␣,ab) 3; (c,d) 2 (counting each distinct word once would
#   stop here); (␣,cd) 1.
# Ties, to the greatest pair: "cdcd abab efef": (e,f), (c,d), (a,b). "abab acac": (a,c), (a,b). "AbAb
#   abab": (a,b) before (A,b). "xyxy xyxy abab abab": (x,y) 4 ties (a,b) 4 -> (x,y); (a,b) 4; then (xy,xy),
#   (ab,ab), (␣,ab) tie at 2: (xy,xy), (ab,ab), (␣,abab).
# bpe_encode: "hugs bug": h ug s -> hug s, ␣ b ug. "  hug\n": words "  hug", "\n" -> ␣ ␣hug, \n.
#   "abababc" with (b,c), (a,b): a b a b a bc -> ab ab a bc (in another order: ab ab ab c).
#   "aaaaa" with (a,a), (aa,a): aa aa a -> aa aaa.
_HUG, _BC_AB = [("u", "g"), ("h", "ug"), (" ", "hug")], [("b", "c"), ("a", "b")]
_HAND = {  # check: (oracle, {arguments: answer} of its visible cases, the same of more hidden ones)
    "train_bpe": (
        _train, {("hug hugs pug hug", 10): _HUG, ("aaa aaa aaa", 10): [("a", "a"), ("aa", "a"), (" ", "aaa")],
                 ("ab ab ab", 5): [("a", "b"), (" ", "ab")], ("hug hugs pug hug", 0): []},
        {("hug hugs pug hug", 2): _HUG[:2], ("cd ab ab ab cd", 10): [("a", "b"), (" ", "ab"), ("c", "d")],
         ("   ", 4): [(" ", " ")], ("", 3): [], ("abab abab", 10): [("a", "b"), ("ab", "ab")],
         ("ab ab", -1): kit.raises("a negative num_merges is an error")}),
    "train_bpe_ties": (
        _train, {("cdcd abab efef", 10): [("e", "f"), ("c", "d"), ("a", "b")],
                 ("abab acac", 10): [("a", "c"), ("a", "b")]},
        {("AbAb abab", 10): [("a", "b"), ("A", "b")],
         ("xyxy xyxy abab abab", 10): [("x", "y"), ("a", "b"), ("xy", "xy"), ("ab", "ab"), (" ", "abab")]}),
    "bpe_encode": (  # merges as tuples (dictionary keys); the cases pass lists
        _encode, {("hugs bug", tuple(_HUG)): ["hug", "s", " ", "b", "ug"],
                  ("abababc", tuple(_BC_AB)): ["ab", "ab", "a", "bc"],
                  ("  hug\n", tuple(_HUG)): [" ", " hug", "\n"]},
        {("aaaaa", (("a", "a"), ("aa", "a"))): ["aa", "aaa"], ("hi there", ()): list("hi there"),
         ("", tuple(_HUG)): []}),
}
assert all(_or_error(oracle, *args) == answer for oracle, *parts in _HAND.values()
           for part in parts for args, answer in part.items()), "an oracle disagrees with the hand"


def _cases(make: Callable[..., Case], visible: Any, more: Any = (),
           draw: Callable[[np.random.Generator], list] = lambda rng: []) -> Any:
    """A Check.cases: make(*a) for each `a` in `visible`; hidden: for those in `more` and draw(rng) too."""
    return lambda rng, hidden: [make(*a) for a in [*visible, *([*more, *draw(rng)] if hidden else [])]]


def _lexicon(rng: np.random.Generator, alphabet: str, size: int, longest: int) -> list[str]:
    return ["".join(rng.choice(list(alphabet), size=int(rng.integers(1, longest + 1)))) for _ in range(size)]


def _text(rng: np.random.Generator, lexicon: list[str], n_words: int, odd_spaces: bool = True) -> str:
    """Words drawn with Zipf-like weights, so some repeat often (as in real text)."""
    weights = 1.0 / np.arange(1, len(lexicon) + 1)
    picks = rng.choice(len(lexicon), size=n_words, p=weights / weights.sum())
    seps = [" ", " ", " ", " ", "  ", "\n", " \n"] if odd_spaces else [" "]
    return "".join((seps[int(rng.integers(len(seps)))] if k else "") + lexicon[int(i)]
                   for k, i in enumerate(picks))


def _tok(args: tuple, op: str, arg: Any = None, add: bool = False, note: str = "",
         specials: tuple[str, ...] = SPECIALS) -> Case:
    """A tokenizer case: build with `args` (and `specials`), then run `op` (see `_use`)."""
    where = (f"corpus {args[0]!r:.40}" if len(args) == 1
             else f"merges {args[0]!s:.60}, alphabet {args[1]!r:.40}")
    kwargs = {} if specials == SPECIALS else {"specials": specials}
    what = {"vocab": "the vocabulary", "encode": f"encode {arg!r:.40}", "decode": f"decode {arg}",
            "roundtrip": f"decode(encode({arg!r:.40}))"}[op] + (" with add_special=True" if add else "")
    arg = ("vocab_size", "itos", "stoi") + ("merges",) * (len(args) == 2) if op == "vocab" else arg
    return Case(f"{where}{', specials ' + str(specials) if kwargs else ''}: {what}{note}", args, kwargs,
                {"op": (op, arg, add)})


def _random_tokenizers(rng: np.random.Generator, op: str, bpe: bool) -> list[tuple]:
    """`_tok` arguments: `op` on tokenizers of random corpora (BPE: with 30 merges learned on them) whose
    specials come in an order where none keeps its usual id (so hard-coded ids show)."""
    out = []
    for alphabet in ("abc", "ab") if bpe else ("zyxwcba", "dcba", "edcba"):
        lex = _lexicon(rng, alphabet, 8, 5)
        corpus = _text(rng, lex, 50 if bpe else 12)
        args = (_train(corpus, 30), corpus) if bpe else (corpus,)
        while any((perm := rng.permutation(4)) == np.arange(4)):
            pass
        s = tuple(SPECIALS[i] for i in perm)
        tok = _Tokenizer(corpus, s, args[0] if bpe else None)
        text = " " + _text(rng, lex, 8) + "  "
        if op == "vocab":
            out.append((args, "vocab", None, False, "", s))
        elif op == "encode":  # with unknown characters ('q', '?')
            text = _text(rng, lex + ["q" + lex[1], "a?"], 8)
            out += [(args, "encode", text, add, "", s) for add in (False, True)]
        else:
            ids = [int(i) for i in rng.integers(0, tok.vocab_size, size=9)] + [tok.unk, tok.eos]
            padded = tok.encode(text, add_special=True) + [tok.pad] * 3
            out += [(args, "roundtrip", text, True, "", s), (args, "decode", ids, False, "", s),
                    (args, "decode", padded, False, " (a padded sequence)", s)]
    return out


_HW, _HUGS = ("hello world",), (_HUG, "hug hugs pug hug")  # ids: specials 0..3, then ' ' d e h l o r w: 4..11
_DUP = ([("a", "b"), ("ab", "c"), ("b", "c"), ("a", "bc")], "abc")  # "abc" is built twice
_TOKENIZER_CASES = {  # check: (visible cases, more hidden ones), as arguments of _tok
    "char_vocab": ([(_HW, "vocab"), (("banana",), "vocab")],
                   [(("",), "vocab", None, False, " (an empty corpus: specials only)"),
                    (("To be, or not to be:\nthat is the question.",), "vocab")]),
    "char_encode": ([(_HW, "encode", "hello"), (_HW, "encode", "low", True),
                     (_HW, "encode", "hi!", False, " ('i' and '!' are not in the vocabulary)")],
                    [(_HW, "encode", "", True)]),
    "char_decode": ([(_HW, "decode", [1, 7, 6, 8, 8, 9, 2]),
                     (_HW, "decode", [0, 7, 9, 11, 3, 0], False, " (<pad>, <unk>)"),
                     (_HW, "roundtrip", "world hello"), (_HW, "decode", [7, -1], False, " (a negative id)")],
                    [(_HW, "decode", [5, 12], False, " (one past the last id)")]),
    "bpe_tokenizer_vocab": ([(_HUGS, "vocab"),
                             (_DUP, "vocab", None, False, " ('abc' is built by two merges)")],
                            [(([], "ba ab"), "vocab")]),
    "bpe_tokenizer_encode": ([(_HUGS, "encode", "hug pug"), (_HUGS, "encode", "hugs!", True)],
                             [(_DUP, "encode", "abcabc cab", True), ((_BC_AB, "abc"), "encode", "abababc")]),
    "bpe_tokenizer_decode": ([(_HUGS, "decode", [1, 11, 12, 8, 3, 2, 0]),
                              (_HUGS, "roundtrip", "pug hugs  hug\n", True),
                              (_HUGS, "decode", [5, -2], False, " (a negative id)")],
                             [(_HUGS, "decode", [13], False, " (one past the last id)"),
                              (_HUGS, "decode", [3, 7, 11, 0, 12, 1, 2], False, "", SPECIALS[::-1])]),
}
_MERGE_PAIRS = ([(list("hug"), ("u", "g")), (list("banana"), ("a", "n")), (list("aaa"), ("a", "a")),
                 (["a", "bc", "a", "b", "c"], ("ab", "c"))],  # visible, then more hidden
                [(list("aaaa"), ("a", "a")), (list("abcab"), ("a", "b")), ([], ("a", "b")),
                 (["x"], ("x", "x")), ([" ", "t", "he", " ", "th", "e"], ("t", "he")),
                 (list("abab"), ("b", "a")), (list("xyz"), ("y", "z"))])
# random corpora (alphabet, lexicon size, longest word, words, merges, mixed spaces): visible, hidden
_RANDOM_TRAIN = ([("abc", 6, 4, 30, 8, False)],
                 [("abc", 8, 5, 60, 20, False), ("abcd", 10, 6, 80, 30, True), ("ab", 6, 6, 50, 40, True),
                  ("lowerst", 12, 7, 90, 25, True), ("xyz", 4, 3, 15, 50, False)])
_RANDOM_ENCODE = ([("abc", 6, 4, 40, 10, False)],
                  [("abc", 8, 5, 60, 20, True), ("abcd", 10, 6, 80, 30, True), ("ab", 6, 6, 50, 25, True),
                   ("lowerst", 12, 7, 90, 40, True)])


def _pair_case(tokens: list[str], pair: tuple[str, str]) -> Case:
    return Case(f"tokens {tokens}, pair {pair}", (tokens, pair))


def _train_case(corpus: str, num_merges: int, note: str = "") -> Case:
    note += " (negative)" if num_merges < 0 else ""
    return Case(f"corpus {corpus!r}{note}, num_merges={num_merges}", (corpus, num_merges))


def _encode_case(text: str, merges: tuple) -> Case:
    about = f"merges {list(merges)}" if merges else "no merges"
    return Case(f"text {text!r}, {about}", (text, list(merges)))


def _random_pairs(rng: np.random.Generator) -> list[tuple]:
    """(tokens, pair) with the pair taken from the tokens."""
    out = []
    for _ in range(4):
        toks = [str(t) for t in rng.choice(["a", "b", "ab", "ba", " "], size=int(rng.integers(5, 14)))]
        k = int(rng.integers(len(toks) - 1))
        out.append((toks, (toks[k], toks[k + 1])))
    return out


def _many_ties(rng: np.random.Generator) -> list[tuple]:
    """(corpus, num_merges, note): every word occurs exactly twice, so pairs tie everywhere."""
    out = []
    for _ in range(3):
        words = [w for w in _lexicon(rng, "bcad", 5, 4) for _ in range(2)]
        out.append((" ".join(str(w) for w in rng.permutation(words)), 12, " (many ties)"))
    return out


def _random_corpora(specs: tuple[list, list], encode: bool = False) -> Any:
    """A Check.cases on random corpora from `specs`: train_bpe's, or (encode) bpe_encode's: a text of
    words seen in training, new ones and an unseen 'q', with the merges learned on the corpus; hidden
    cases also encode the corpus itself."""
    def cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
        out = []
        for alphabet, size, longest, n_words, n, odd in specs[hidden]:
            lex = _lexicon(rng, alphabet, size, longest)
            corpus = _text(rng, lex, n_words, odd)
            about = f"random corpus of {n_words} words over {alphabet!r}"
            if not encode:
                spaces = "mixed" if odd else "single"
                out.append(Case(f"{about} ({spaces} spaces), num_merges={n}", (corpus, n)))
                continue
            merges = _train(corpus, n)
            text = " " + _text(rng, lex + _lexicon(rng, alphabet, 3, longest) + ["q" + lex[0]], 12) + "\n"
            out.append(Case(f"text {text!r:.40}, {len(merges)} merges learned on a {about}", (text, merges)))
            if hidden:
                out.append(Case(f"the training corpus itself, {len(merges)} merges learned on a {about}",
                                (corpus, list(merges))))
        return out
    return cases


_TIES = ("How do you break ties? Among the pairs with the top count, take the lexicographically greatest "
         "(max over (count, pair); ' ' < 'A' < 'a'), not the first one found nor the smallest.")
_ORDER = ("Your tokens match applying the merges in another order than the learned one (reversed, sorted, "
          "most frequent first or one greedy scan). Apply merges[0] to the whole word, then merges[1], ...")
_FUNCTION_MISTAKES = [  # (functions it shows in: m(erge_pair), t(rain_bpe), (bpe_)e(ncode); hint; knobs)
    ("t", "Did you count pairs across word boundaries? Count inside each word only.", {"cross_words": True}),
    ("t", "Did you miss the last pair of each word? n tokens have n - 1 pairs.", {"skip_last": True}),
    ("t", _TIES, {"tie": "first"}), ("t", _TIES, {"tie": "smallest"}),
    ("t", "Did you count each distinct word once? Count it as often as it occurs.", {"weighted": False}),
    ("t", "Did you keep merging pairs that occur only once? Stop below a count of 2.", {"min_count": 1}),
    ("t", "Did you count the pairs only once, before the first merge? Recount after every merge.",
     {"recount": False}),
    *(("e", _ORDER, {"order": o}) for o in ("reversed", "sorted", "frequent", "scan")),
    ("e", "Did you split with text.split()? It loses whitespace: use pretokenize().", {"split": False}),
    ("mte", "Did merge_pair re-use the second token of a merged pair? After a merge, go on at i + 2: "
            "'aaa' with ('a', 'a') gives ['aa', 'a'].", {"merge": "noskip"}),
    ("mte", "Did merge_pair merge only the first occurrence? Merge all of them.", {"merge": "first"}),
    ("m", "Did you compare the concatenated text (tokens[i] + tokens[i+1] == a + b)? Compare the tokens: "
          "['a', 'bc'] does not contain the pair ('ab', 'c').", {"merge": "text"}),
    ("mte", "Is a pair at the very end of the list never merged by merge_pair? Test every i with "
            "i + 1 < len(tokens).", {"merge": "nolast"}),
    ("m", "Did you scan from the right? Left to right, 'aaa' with ('a', 'a') gives ['aa', 'a'].",
     {"merge": "rtl"})]
_FIX_ENCODE = "fix bpe_encode (exercise 1.4) first: this class only looks its tokens up."
_UNK = "The contract writes UNK_CHAR ('\\ufffd') for it."
_TOKENIZER_MISTAKES = [  # (tokenizers: c(har), b(pe); operations: v(ocab), e(ncode), d(ecode); hint; knobs)
    ("cb", "ved", "Did you put the special tokens after the other tokens? They come first, in the given "
                  "order.", {"specials_last": True}),
    ("cb", "ed", "Did you hard-code the ids of the special tokens as 0..3? Look them up in stoi: `specials` "
                 "may come in another order.", {"fixed_ids": True}),
    *(("cb", "d", "Did decode keep the special tokens? <pad>, <bos> and <eos> give no text.",
       {"keep": True, **unk}) for unk in ({}, {"unk_text": "<unk>"})),
    ("cb", "d", f"Did <unk> decode to the string '<unk>'? {_UNK}", {"unk_text": "<unk>"}),
    ("c", "d", f"Did <unk> decode to nothing? {_UNK}", {"unk_text": ""}),
    ("cb", "e", "With add_special=True, did you forget the <eos> id at the end?", {"no_eos": True}),
    ("cb", "d", "Did a negative id index the vocabulary from the end? decode must raise ValueError for any "
                "id outside 0..vocab_size-1.", {"wrap": True}),
    ("cb", "e", "Unknown tokens must not raise: give them the id of <unk> (stoi.get(token, unk_id)).",
     {"crash": True}),
    ("c", "ved", "Is your vocabulary in order of first appearance? Sort the characters.",
     {"appearance": True}),
    *(("b", "e", f"Your bpe_encode does not replay the merges in learned order: {_FIX_ENCODE}",
       {"encoding": {"order": o}}) for o in ("reversed", "sorted", "frequent", "scan")),
    ("b", "ed", f"Your bpe_encode loses whitespace (text.split()): {_FIX_ENCODE}",
     {"encoding": {"split": False}}),
    ("b", "ve", "Did you add a merged token twice? Two merges can build the same string: add it once.",
     {"dedupe": False}),
    ("b", "ved", "Did you sort the merged tokens? They come in learned order.", {"sort_merges": True}),
    ("b", "vd", "Did you update vocab_size after adding the merged tokens? super().__init__ counted the "
                "characters only, so the inherited decode rejects merged ids.", {"stale_size": True}),
    ("b", "e", "Your ids are one per character: did you replace encode? The inherited CharTokenizer.encode "
               "does not know the merges; look up the tokens of bpe_encode(text, self.merges).",
     {"encoding": {"order": "none"}}),
    ("b", "d", "Did decode join the tokens with spaces? Join with '': tokens hold spaces.", {"joiner": " "})]
_FUNCTIONS = {  # oracle: (its letter in _FUNCTION_MISTAKES, the type of the items it returns, the contract)
    _merge: ("m", str, "merge_pair must return a new list of str"),
    _train: ("t", tuple, "train_bpe must return a list of (str, str) tuples"),
    _encode: ("e", str, "bpe_encode must return a list of str")}


def _function_check(name: str, oracle: Callable[..., Any], cases: Any, hint: str) -> Check:
    """The check `name` of the function `oracle` implements, with the mistakes that show in it."""
    letter, item, what = _FUNCTIONS[oracle]
    return Check(name=name, cases=cases, expected=lambda c: _or_error(oracle, *c.args), hint=hint,
                 call=lambda fn, case: _new(fn(*case.args), case.args, item, what),
                 mistakes=[Mistake(h, kit.variant(lambda c, **k: oracle(*c.args, **k), **knobs))
                           for letters, h, knobs in _FUNCTION_MISTAKES if letter in letters])


def _tokenizer_check(name: str, hint: str) -> Check:
    """The check `name` of one operation of a tokenizer class, with the mistakes that show in it."""
    op, kind = name.rpartition("_")[2], name[0]
    draw = lambda rng: _random_tokenizers(rng, op, kind == "b")  # noqa: E731
    return Check(name=name, hint=hint, expected=lambda c: _or_error(_Tokenizer.on, c),
                 cases=_cases(_tok, *_TOKENIZER_CASES[name], draw),
                 call=lambda cls, case: _use(cls(*case.args, **case.kwargs), case),
                 mistakes=[Mistake(h, kit.variant(_Tokenizer.on, **k))
                           for kinds, ops, h, k in _TOKENIZER_MISTAKES if kind in kinds and op[0] in ops])


# ---- byte-level BPE (exercise 1.6): BPE on the UTF-8 bytes of the text, one BYTE_CHARS character per byte
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


_E = (BYTE_CHARS[195], BYTE_CHARS[169])  # the two bytes of 'é' as BYTE_CHARS characters
_BYTE_CASES = {  # check: (visible cases, more hidden ones), as arguments of _byte
    "byte_bpe_vocab": ([(([],), "vocab"), (("東京 東京 東京", 4), "vocab", None, " (built by train)")],
                       [((_DUP[0],), "vocab", None, " ('abc' is built by two merges)"),
                        (("café cafés éé", 6), "vocab", None, " (built by train)")]),
    "byte_bpe_encode": ([(([],), "encode", "é東🙂"), ((_HUG,), "encode", "hug pug"),
                         (([_E, ("f", "".join(_E))],), "roundtrip", "naïve café, 東京, 🙂")],
                        [((_BC_AB,), "encode", "abababc"), (([_E],), "encode", " café\n")]),
    "byte_bpe_decode": ([(([],), "decode", [195, 169, 32, 230, 157, 177]),
                         (([],), "decode", [104, 195, 105], " (half a character)"),
                         (([_E],), "decode", [256, 195, 256], " (half a character)"),
                         (([],), "decode", [65, -1], " (a negative id)")],
                        [(([_E],), "decode", [257], " (one past the last id)"),
                         (([],), "roundtrip", "Zoë 東京 🙂\n")])}
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
                 call=lambda cls, case: _use(cls.train(*case.args) if case.meta["train"] else cls(*case.args), case),
                 hint="Check the contract: vocabulary = BYTE_CHARS then one token per merge; train and encode on "
                      "to_bytechars(text); decode joins all the bytes, then decodes with errors='replace'.",
                 mistakes=[Mistake(h, kit.variant(_ByteTokenizer.on, **k)) for ops, h, k in _BYTE_MISTAKES
                           if op[0] in ops])


_CHAR_HINT = ("Check the contract: specials first, then sorted(set(corpus)); unknown characters -> <unk>; "
              "decode skips <pad>/<bos>/<eos>, writes UNK_CHAR for <unk>, raises ValueError for a bad id.")
_BPE_HINT = ("Check the contract: super().__init__(alphabet, specials), then one token per merge in learned "
             "order (none twice) and vocab_size updated; encode = bpe_encode + lookup, unknown -> <unk>; "
             "decode is CharTokenizer's (fix exercise 1.1 if it fails).")

register(
    __name__,
    *(_tokenizer_check(name, _CHAR_HINT) for name in ("char_vocab", "char_encode", "char_decode")),
    _function_check("merge_pair", _merge, _cases(_pair_case, *_MERGE_PAIRS, _random_pairs),
                    "Scan left to right: where (tokens[i], tokens[i + 1]) == pair, emit pair[0] + pair[1] "
                    "and go on at i + 2, else emit tokens[i]; into a new list."),
    _function_check("train_bpe", _train, _cases(_train_case, *_HAND["train_bpe"][1:]),
                    "Follow the contract step by step: count pairs inside words from pretokenize(), weighted "
                    "by word frequency; ties to the greatest pair; stop below a count of 2; ValueError if "
                    "num_merges < 0."),
    _function_check("train_bpe_ties", _train, _cases(_train_case, *_HAND["train_bpe_ties"][1:], _many_ties),
                    _TIES),
    _function_check("train_bpe_random", _train, _random_corpora(_RANDOM_TRAIN),
                    "Your merges differ from the contract's on a random corpus: re-read its counting, tie "
                    "and stop rules."),
    _function_check("bpe_encode", _encode, _cases(_encode_case, *_HAND["bpe_encode"][1:]),
                    "Apply merge_pair to each word from pretokenize() with merges[0], then merges[1], ... "
                    "(learned order); concatenate the words' tokens."),
    _function_check("bpe_encode_random", _encode, _random_corpora(_RANDOM_ENCODE, encode=True),
                    "Your tokens differ from replaying the merges in learned order; ''.join(tokens) must be "
                    "the text."),
    *(_tokenizer_check(name, _BPE_HINT)
      for name in ("bpe_tokenizer_vocab", "bpe_tokenizer_encode", "bpe_tokenizer_decode")),
    *(_byte_check(name) for name in ("byte_bpe_vocab", "byte_bpe_encode", "byte_bpe_decode")),
)
