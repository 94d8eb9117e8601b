"""What several exercises' checks share: hand-checked answers (their inputs relabelled from each seed by
`_substitution`), the inputs (random words and texts, tokenizer cases), the mistakes of the three functions
and of the two tokenizer classes, and the check factories."""

from __future__ import annotations

import string
from typing import Any, Callable

import numpy as np

from .. import kit
from ..framework import Case, Check, Mistake
from ._oracles import SPECIALS, _encode, _merge, _or_error, _Tokenizer, _train

_HUG, _BC_AB = [("u", "g"), ("h", "ug"), (" ", "hug")], [("b", "c"), ("a", "b")]
_DUP = ([("a", "b"), ("ab", "c"), ("b", "c"), ("a", "bc")], "abc")  # "abc" is built twice


def _by_hand(oracle: Callable[..., Any], *parts: dict) -> tuple[dict, ...]:
    """`parts` ({arguments: answer} of a check's visible cases, the same of more hidden ones), once the
    oracle is seen to agree with every answer worked out on paper, and with that answer relabelled by a
    few `_substitution`s (as the cases are drawn: the relabelling keeps what each case shows)."""
    assert all(_or_error(oracle, *args) == answer for part in parts for args, answer in part.items()), \
        "an oracle disagrees with the hand"
    rng = np.random.default_rng(0)
    for _ in range(3):
        for args, answer in ((a, w) for part in parts for a, w in part.items() if isinstance(w, list)):
            sub = _substitution(rng, args)
            assert _or_error(oracle, *sub(args)) == sub(answer), "a relabelled case gives another answer"
    return parts


#: the characters a non-ASCII character may become, by the length of its UTF-8 encoding
_WIDE = {n: sorted(pool) for n, pool in ((2, "ßàáâãäåæçèéêëìíîïñòóôõöøùúûüýþÿαβγδλμπσωжзлмнфш"),
                                         (3, "€←→∞♪アカサタナ中京人大天山川文日明月木本東水火犬猫語한글"),
                                         (4, "𝔸𝕏🌍🌙🍀🍕🎉🐍🐢🙂🚀🦄🧩"))}


def _strings(x: Any) -> list[str]:
    if isinstance(x, str):
        return [x]
    return [s for v in x for s in _strings(v)] if isinstance(x, (list, tuple)) else []


def _substitution(rng: np.random.Generator, items: Any) -> Callable[[Any], Any]:
    """An rng-drawn relabelling of the characters in the strings of `items` (nested lists and tuples),
    applied to any such structure: ASCII letters become other letters, in the same order, a letter's upper
    and lower case becoming the same letter's (so ties to the greatest pair, sorted vocabularies, ids,
    pretokenizing, equal and concatenated strings, ties ignoring case all come out as before, relabelled);
    a non-ASCII character becomes another one of as many UTF-8 bytes, in order; other characters (spaces,
    punctuation) stay. One-to-one, and never the identity when there are letters or non-ASCII characters."""
    chars = set("".join(_strings(items)))
    letters = sorted({c.lower() for c in chars if c in string.ascii_letters})
    groups = [(letters, sorted(string.ascii_lowercase))] + [
        (sorted(c for c in chars if ord(c) >= 128 and len(c.encode()) == n), pool) for n, pool in _WIDE.items()]
    table: dict[str, str] = {}
    can_move = any(0 < len(g) < len(pool) for g, pool in groups)
    while can_move and all(table.get(c, c) == c for c in chars | set(letters)):
        table = {c: t for g, pool in groups
                 for c, t in zip(g, sorted(str(t) for t in rng.choice(pool, len(g), replace=False)))}
    table |= {c.upper(): t.upper() for c, t in table.items() if c in letters}
    trans = str.maketrans(table)

    def sub(x: Any) -> Any:
        if isinstance(x, str):
            return x.translate(trans)
        return type(x)(sub(v) for v in x) if isinstance(x, (list, tuple)) else x
    return sub


def _cases(make: Callable[..., Case], visible: Any, more: Any = (),
           draw: Callable[[np.random.Generator], list] = lambda rng: [],
           fields: tuple[int, ...] | None = None) -> Any:
    """A Check.cases: make(*a) for each `a` in `visible`; hidden: for those in `more` and draw(rng) too. Each
    fixed `a` (of `visible`, `more`) is relabelled by its own `_substitution` drawn from rng, applied to its
    `fields` (the positions of `a`; all by default), so that it differs from seed to seed; or `a` is a
    function of the relabelling that gives the arguments (their text relabelled, ids built from it)."""
    def relabelled(rng: np.random.Generator, a: Any) -> Any:
        if callable(a):
            texts: list[str] = []
            a(lambda x: texts.append(x) or x)  # the text it relabels
            return a(_substitution(rng, texts))
        sub = _substitution(rng, [v for i, v in enumerate(a) if fields is None or i in fields])
        return [sub(v) if fields is None or i in fields else v for i, v in enumerate(a)]

    def cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
        fixed = [relabelled(rng, a) for a in [*visible, *(more if hidden else [])]]
        return [make(*a) for a in [*fixed, *(draw(rng) if hidden else [])]]
    return cases


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
    """A tokenizer case: build with `args` (and `specials`), then run `op` (see `run_tokenizer`)."""
    where = (f"corpus {args[0]!r:.40}" if len(args) == 1
             else f"merges {args[0]!s:.60}, alphabet {args[1]!r:.40}")
    kwargs = {} if specials == SPECIALS else {"specials": specials}
    what = {"vocab": "the vocabulary", "encode": f"encode {arg!r:.40}", "decode": f"decode {arg}",
            "roundtrip": f"decode(encode({arg!r:.40}))",
            "extend": f"{arg[0]!r} added to itos, stoi and vocab_size after construction, then encode "
                      f"{arg[1]!r:.30} and decode its ids and {arg[0]!r}'s" if op == "extend" else ""}[op]
    what += " with add_special=True" if add else ""
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


def _random_corpora(specs: tuple[list, list], encode: bool = False) -> Any:
    """A Check.cases on random corpora from `specs`: train_bpe's, or (encode) bpe_encode's: a text of
    words seen in training, new ones and an unseen 'q', with the merges learned on the corpus; hidden
    cases also encode the corpus itself. The most frequent word repeats itself (two copies of two words), so
    that a pair occurs twice in a word: merging only its first occurrence shows."""
    def cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
        out = []
        for alphabet, size, longest, n_words, n, odd in specs[hidden]:
            lex = _lexicon(rng, alphabet, size, longest)
            lex[0] = (lex[0] + lex[1]) * 2
            corpus = _text(rng, lex, n_words, odd)
            about = f"random corpus of {n_words} words over {alphabet!r}"
            if not encode:
                spaces = "mixed" if odd else "single"
                out.append(Case(f"{about} ({spaces} spaces), num_merges={n}", (corpus, n)))
                continue
            merges = _train(corpus, n)
            new = _lexicon(rng, alphabet, 3, longest) + ["q" + lex[0]]
            text = f" {_text(rng, lex + new, 12)} {lex[0]}\n"
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
    ("c", "d", "Do encode and decode use copies made in __init__? Read self.itos, self.stoi and self.vocab_size "
                "when called: a subclass (1.5) adds tokens to them after your __init__ has run.", {"frozen": True}),
    *(("b", "e", f"Your bpe_encode does not replay the merges in learned order: {_FIX_ENCODE}",
       {"encoding": {"order": o}}) for o in ("reversed", "sorted", "frequent", "scan")),
    ("b", "ed", f"Your bpe_encode loses whitespace (text.split()): {_FIX_ENCODE}",
     {"encoding": {"split": False}}),
    ("b", "ve", "Did you add a merged token twice? Two merges can build the same string, and merges can build a "
                  "special token's string: a string already in the vocabulary keeps its first id.",
     {"dedupe": False}),
    ("b", "ved", "Did you sort the merged tokens? They come in learned order.", {"sort_merges": True}),
    ("b", "vd", "Did you update vocab_size after adding the merged tokens? super().__init__ counted the "
                "characters only, so the inherited decode rejects merged ids.", {"stale_size": True}),
    ("b", "e", "Your ids are one per character: did you replace encode? The inherited CharTokenizer.encode "
               "does not know the merges; look up the tokens of bpe_encode(text, self.merges).",
     {"encoding": {"order": "none"}}),
    ("b", "d", "Did decode join the tokens with spaces? Join with '': tokens hold spaces.", {"joiner": " "})]
_FUNCTIONS = {_merge: "m", _train: "t", _encode: "e"}  # oracle: its letter in _FUNCTION_MISTAKES


def _function_check(name: str, oracle: Callable[..., Any], cases: Any, hint: str) -> Check:
    """The check `name` of the function `oracle` implements, with the mistakes that show in it."""
    letter = _FUNCTIONS[oracle]
    return Check(name=name, cases=cases, expected=lambda c: _or_error(oracle, *c.args), hint=hint,
                 mistakes=[Mistake(h, kit.variant(lambda c, **k: oracle(*c.args, **k), **knobs))
                           for letters, h, knobs in _FUNCTION_MISTAKES if letter in letters])


def _tokenizer_check(name: str, hint: str, visible: list, more: list) -> Check:
    """The check `name` of one operation of a tokenizer class, with the mistakes that show in it; its cases
    are `_tok` of each of `visible` (hidden: of `more` too, and of random tokenizers)."""
    op, kind = name.rpartition("_")[2], name[0]
    draw = lambda rng: _random_tokenizers(rng, op, kind == "b")  # noqa: E731
    return Check(name=name, hint=hint, expected=lambda c: _or_error(_Tokenizer.on, c),
                 cases=_cases(_tok, visible, more, draw, fields=(0, 2)),
                 mistakes=[Mistake(h, kit.variant(_Tokenizer.on, **k))
                           for kinds, ops, h, k in _TOKENIZER_MISTAKES if kind in kinds and op[0] in ops])
