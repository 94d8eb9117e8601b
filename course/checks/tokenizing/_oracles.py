"""The chapter's oracles, written independently of the solution cells: `_merge`, `_train`, `_train_fast`,
`_encode`, and
`_Tokenizer` for both tokenizer classes (run by `_use` as the student's are, and read as the judge reads
them, with `course.probing.calls.tokenizing.tokenizer_facts`), with knobs for known mistakes; `_or_error`
turns an oracle's result (or its ValueError) into what the judge compares."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any, Callable

from course.probing.calls.tokenizing import WORDS, run_tokenizer, tokenizer_facts, word_ids
from course.probing.plain import to_plain

from .. import kit
from ..framework import Case

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
UNK_CHAR = "\ufffd"


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
    freq = Counter([corpus] if cross_words else WORDS.findall(corpus))
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


def _train_fast(corpus: str, num_merges: int, *, tie: str = "greatest",
                index_new: bool = True) -> list[tuple[str, str]]:
    """train_bpe_fast: `_train`'s merges, with each merge updating only the words that hold its pair (their
    pair counters' difference); the knobs' defaults are the contract. index_new=False: the words a merge
    changes are not recorded under their new pairs, so a later merge of such a pair skips them."""
    if num_merges < 0:
        raise ValueError("a negative num_merges is an error")
    freq = Counter(WORDS.findall(corpus))
    words = {w: list(w) for w in freq}
    pairs = lambda toks: Counter(zip(toks, toks[1:]))  # noqa: E731
    counts: Counter = Counter()
    holders: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
    for w, toks in words.items():
        for p, k in pairs(toks).items():
            counts[p] += k * freq[w]
            holders[p].add(w)
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges:
        top = max(counts.values(), default=0)
        if top < 2:
            break
        tied = [p for p, c in counts.items() if c == top]
        best = max(tied) if tie == "greatest" else min(tied)
        merges.append(best)
        for w in holders.pop(best, set()):
            before, words[w] = pairs(words[w]), _merge(words[w], best)
            after = pairs(words[w])
            counts.subtract({p: k * freq[w] for p, k in before.items()})
            counts.update({p: k * freq[w] for p, k in after.items()})
            for p in after if index_new else ():
                holders[p].add(w)
        counts = +counts  # pairs no word holds any more go
    return merges


def _split_specials(text: str, specials: list[str], *, order: str = "longest", escape: bool = True,
                    keep_empty: bool = False, capture: bool = True, one_by_one: bool = False) -> list[str]:
    """split_specials, scanning the text position by position: where specials start, the longest is a piece
    of its own. The knobs model a regular expression gone wrong: alternatives in the given `order` ("given",
    "shortest"), not escaped, empty pieces kept, specials dropped (no capture group); or (one_by_one) the
    text split at every occurrence of the longest special, then of the next, and so on."""
    if "" in specials:
        raise ValueError("an empty special token is an error")
    if one_by_one:
        pieces = [text]
        for special in sorted(specials, key=len, reverse=True):
            pieces = [q for p in pieces for q in ([p] if p in specials else _around(p, special))]
        return [p for p in pieces if p]
    if not escape or order != "longest" or keep_empty or not capture:  # the mistakes are regex ones
        ranked = {"given": list(specials), "shortest": sorted(specials, key=len),
                  "longest": sorted(specials, key=len, reverse=True)}[order]
        if not ranked:
            return [text] if text or keep_empty else []
        try:
            pattern = "|".join(ranked if not escape else map(re.escape, ranked))
            pieces = re.split(f"({pattern})" if capture else pattern, text)
        except re.error:
            return kit.raises("the unescaped specials are no regular expression")
        return [p for p in pieces if (p or keep_empty) and p is not None]
    out, start, i = [], 0, 0
    while i < len(text):
        found = max((s for s in specials if text.startswith(s, i)), key=len, default=None)
        if found is None:
            i += 1
            continue
        out += [text[start:i]] * (i > start) + [found]
        i = start = i + len(found)
    return out + [text[start:]] * (start < len(text))


def _stream(chunks: list[str], *, mistake: str = "") -> list[int]:
    """encode_iterable with `word_ids` as its encoder: the ids of the whole text. `mistake`: "per_chunk" (each
    chunk encoded on its own), "no_tail" (the text left after the last chunk never encoded), "cut_ws" (the
    text cut after its last whitespace character, which so stays with the word before it)."""
    if mistake == "per_chunk":
        return [i for chunk in chunks for i in word_ids(chunk)]
    if not mistake:
        return word_ids("".join(chunks))
    out, pending = [], ""
    for chunk in chunks:
        text = pending + chunk
        if mistake == "no_tail":
            words = WORDS.findall(text)
            done, pending = ("".join(words[:-1]), words[-1]) if words else ("", "")
        else:
            cut = max((k + 1 for k, ch in enumerate(text) if ch.isspace()), default=0)
            done, pending = text[:cut], text[cut:]
        out += word_ids(done)
    return out + (word_ids(pending) if mistake == "cut_ws" else [])


def _around(text: str, special: str) -> list[str]:
    """text split at every occurrence of special, the special kept between the parts."""
    parts = text.split(special)
    return [q for k, part in enumerate(parts) for q in ([special] if k else []) + [part]]


def _encode(text: str, merges: list[tuple[str, str]], *, order: str = "learned", split: bool = True,
            merge: str = "ok") -> list[str]:
    """bpe_encode: the merges replayed in learned `order` on each word ("frequent": the word's most
    frequent known pair first; "scan": one greedy left-to-right pass); split=False: text.split()."""
    out, known = [], set(merges)
    for word in WORDS.findall(text) if split else text.split():
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


def _ranked(text: str, merges: list[tuple[str, str]], *, pick: str = "lowest") -> list[str]:
    """bpe_encode_fast GPT-2's way: on each word, merge the adjacent pair of the lowest rank (its index in
    `merges`) while one has a rank; pick="highest" is the mistake of taking the highest."""
    rank = {pair: i for i, pair in reversed(list(enumerate(merges)))}  # a pair learned twice keeps its first rank
    out = []
    for word in WORDS.findall(text):
        toks = list(word)
        while ranked := [rank[p] for p in zip(toks, toks[1:]) if p in rank]:
            toks = _merge(toks, merges[min(ranked) if pick == "lowest" else max(ranked)])
        out += toks
    return out


class _Tokenizer:
    """Both tokenizer classes (BPE when given merges); its knobs are those of `_TOKENIZER_MISTAKES`."""

    def __init__(self, alphabet: str, specials: tuple[str, ...], merges: list | None, *, specials_last=False,
                 appearance=False, fixed_ids=False, dedupe=True, sort_merges=False, stale_size=False,
                 frozen=False, **knobs: Any) -> None:
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
        # frozen: encode and decode read copies made here, not the attributes as they are when called
        self._at_init = (dict(self.stoi), list(self.itos), self.vocab_size) if frozen else None

    def _lookups(self) -> tuple[dict[str, int], list[str], int]:
        return self._at_init or (self.stoi, self.itos, self.vocab_size)

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        pieces = _encode(text, self.merges, **self.o["encoding"]) if self.bpe else list(text)
        stoi = self._lookups()[0]
        ids = [stoi[p] if self.o["crash"] else stoi.get(p, self.unk) for p in pieces]
        return [self.bos] + ids + [self.eos] * (not self.o["no_eos"]) if add_special else ids

    def decode(self, ids: list[int]) -> str:
        out = []
        _, itos, size = self._lookups()
        for i in ids:
            if not -size * self.o["wrap"] <= i < size:
                raise ValueError(f"decode must reject id {i}: ids lie in 0..vocab_size-1 = 0..{size - 1}")
            if self.o["keep"] or i not in (self.pad, self.bos, self.eos):
                out.append(self.o["unk_text"] if i == self.unk else itos[i])
        return self.o["joiner"].join(out)

    @staticmethod
    def on(case: Case, **knobs: Any) -> Any:
        """The oracle on a tokenizer case: args (corpus,) or (merges, alphabet), kwargs the specials."""
        merges = case.args[0] if len(case.args) == 2 else None
        return _use(_Tokenizer(case.args[-1], case.kwargs.get("specials", SPECIALS), merges, **knobs), case)


def _use(tok: Any, case: Case) -> Any:
    """Run meta "op" on a tokenizer of the oracle's as the kernel runs the student's (`run_tokenizer`), and
    read the facts from it as the judge does (`tokenizer_facts`)."""
    return tokenizer_facts(case, to_plain(run_tokenizer(tok, case)))


def _or_error(oracle: Callable[..., Any], *args: Any) -> Any:
    """oracle(*args) as the expected answer: a ValueError it raises is the error the contract asks for."""
    try:
        return oracle(*args)
    except ValueError as err:
        return kit.raises(str(err))
