"""Probes for chapter 1: a character tokenizer and byte-pair encoding (BPE).

The functions (merge_pair, train_bpe, bpe_encode) are called on the case's arguments; a tokenizer class is
built from them (ByteBPETokenizer by its ``train`` where meta "train" says so) and run by `run_tokenizer`.
Besides what the student's code returned, a call records what plain data loses on its way to the judge
(`returned`): the Python types of a result and of its items (a numpy integer arrives as an int), and
whether the result is one of the arguments themselves. A decode call records the ids it was given as they
are afterwards. The judge reads the contract's clauses (a new list, Python ints, inputs left alone) from
these, outside the sandbox, with each probe's `observe` (`result_of`, `tokenizer_facts`).
"""

from __future__ import annotations

import gc
import re
import resource
import time
import zlib
from collections import Counter
from typing import Any, Callable

from ..cases import Case
from ..runner import Probe, register


#: pretokenize's words: whitespace sticks to the word after it (the notebook's given cell, and the oracles')
WORDS = re.compile(r"\s*\S+|\s+")


def type_name(x: Any) -> str:
    """The full name of x's type: ``"builtins.int"``, ``"numpy.int64"``."""
    return f"{type(x).__module__}.{type(x).__qualname__}"


def returned(out: Any, args: tuple = ()) -> dict[str, Any]:
    """What a call returned, as the judge needs it: {"value": out, "type": its `type_name`,
    "item_types": the `type_name` of each item when out is a list (else None), "is_argument": the
    positions i where out is the very object args[i]}."""
    return {"value": out, "type": type_name(out),
            "item_types": [type_name(v) for v in out] if isinstance(out, list) else None,
            "is_argument": [i for i, a in enumerate(args) if out is a]}


def run_tokenizer(tok: Any, case: Case) -> Any:
    """Run meta "op" = (op, arg, add_special) on a tokenizer (the student's, or the judge's oracle).

    "vocab": {name: tok.<name>} for each attribute name in arg; "decode": (tok.decode(ids), ids after the
    call) for a new list ids equal to arg; "encode": `returned` of tok.encode(arg) (add_special=True when
    add); "roundtrip": (`returned` of that encode, tok.decode of its ids); "extend", arg (token, text): the
    token appended to itos and stoi and counted in vocab_size after construction, then (`returned` of
    tok.encode(text), tok.decode of those ids and the new token's id): encode and decode read the three
    attributes when called, as 1.1's contract says (1.5's subclass extends them after its parent's __init__).
    """
    op, arg, add = case.meta["op"]
    if op == "vocab":
        return {name: getattr(tok, name) for name in arg}
    if op == "extend":
        token, text = arg
        tok.itos.append(token)
        tok.stoi[token] = len(tok.itos) - 1
        tok.vocab_size += 1
        ids = tok.encode(text)
        return returned(ids), tok.decode([*ids, tok.stoi[token]])
    if op == "decode":
        ids = list(arg)
        return tok.decode(ids), ids
    ids = tok.encode(arg, add_special=True) if add else tok.encode(arg)
    return (returned(ids), tok.decode(ids)) if op == "roundtrip" else returned(ids)


def _call_function(fn: Any, case: Case) -> dict[str, Any]:
    return returned(fn(*case.args), case.args)


def _call_tokenizer(cls: Any, case: Case) -> Any:
    """CharTokenizer(corpus, **kwargs) or BPETokenizer(merges, alphabet, **kwargs), run on meta "op"."""
    return run_tokenizer(cls(*case.args, **case.kwargs), case)


#: train_bpe_fast's time budget, in counts of every pair of the corpus's distinct words per merge: recounting
#: after every merge (train_bpe) takes more than one count per merge; updating only the words a merge
#: changes takes a few counts in all (counting once, indexing the words), whatever the number of merges
SPEED_BUDGET = 0.5


def count_every_pair(words: list[tuple[list[str], int]]) -> Counter:
    """One round of train_bpe's counting, as a stopwatch's unit: every adjacent pair of every word (its
    tokens and its frequency), weighted by the word's frequency."""
    counts: Counter = Counter()
    for tokens, freq in words:
        for pair in zip(tokens, tokens[1:]):
            counts[pair] += freq
    return counts


#: how long one timing of the unit runs at least: a sandboxed kernel's processor clock can advance in 10 ms ticks
UNIT_SECONDS = 0.05


def processor_seconds() -> float:
    """The processor time of this process, all its threads, and its children that have ended: what an
    answer spends, however it spreads its work."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _call_timed(fn: Any, case: Case) -> dict[str, Any]:
    """`returned` of fn(*case.args) (a corpus and num_merges, or a text and merges) after one untimed warm-up
    call on tiny arguments (meta "warm_up", default ("ab ab", 1)), the
    `processor_seconds` it took, and the median of six timings
    of `count_every_pair` on the corpus's distinct words, three before the call and three after (the same
    process, the same moment: the ratio depends neither on the machine nor on its load), with Python's
    cyclic garbage collector paused."""
    words = [(list(w), f) for w, f in Counter(WORDS.findall(case.args[0])).items()]
    try:  # untimed: what only a first call pays (an import, a compiled pattern) is not the algorithm's work
        fn(*case.meta.get("warm_up", ("ab ab", 1)))
    except Exception:  # the timed call below raises it again, and that is what is reported
        pass

    def unit() -> float:  # repeated until it spans UNIT_SECONDS: a processor clock may tick every 10 ms
        start, repeats = processor_seconds(), 0
        while True:
            count_every_pair(words)
            repeats += 1
            spent = processor_seconds() - start
            if spent >= UNIT_SECONDS or repeats >= 1000:
                return spent / repeats
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()  # a collection's pause depends on all the process holds (a test run, a notebook), not the answer
    try:
        units = [unit() for _ in range(3)]
        start = processor_seconds()
        out = fn(*case.args)
        seconds = processor_seconds() - start
        units = sorted(units + [unit() for _ in range(3)])
    finally:
        if collecting:
            gc.enable()
    return {"call": returned(out, case.args), "seconds": seconds, "count_seconds": (units[2] + units[3]) / 2}


def word_ids(text: str) -> list[int]:
    """The encoder encode_iterable is given: two ids per word of `text` (its words as pretokenize cuts
    them), its length and a checksum of its characters; a word cut in two, or whitespace moved to
    another word, changes them."""
    return [i for word in WORDS.findall(text) for i in (len(word), zlib.crc32(word.encode()) % 1000)]


#: the most ids a stream's record keeps (an answer that never ends is cut off there)
MOST_IDS = 5000


def _call_stream(fn: Any, case: Case) -> dict[str, Any]:
    """fn(word_ids, a generator of the case's chunks): each id it yields, with how many chunks had been read
    when it came; and the type of what fn returned."""
    read = 0

    def chunks() -> Any:
        nonlocal read
        for chunk in case.args[0]:
            read += 1
            yield chunk
    out = fn(word_ids, chunks())
    ids: list[list] = []
    for i in out:
        ids.append([i, read])
        if len(ids) >= MOST_IDS:
            break
    return {"ids": ids, "type": type_name(out)}


def _call_byte(cls: Any, case: Case) -> Any:
    """ByteBPETokenizer.train(corpus, num_merges) (meta "train") or ByteBPETokenizer(merges), run on meta "op"."""
    return run_tokenizer(cls.train(*case.args) if case.meta["train"] else cls(*case.args), case)


# ------------------------------------------------ what the judge reads ---
# Each probe's `observe`: the value a call recorded, once the contract's clauses hold (else the error that
# says which one broke). The tokenizer classes' oracles are read with `tokenizer_facts` too.

#: each function's contract on its result: (the type of its items, what to say when they are not)
RESULTS: dict[str, tuple[type, str]] = {
    "merge_pair": (str, "merge_pair must return a new list of str"),
    "train_bpe": (tuple, "train_bpe must return a list of (str, str) tuples"),
    "train_bpe_fast": (tuple, "train_bpe_fast must return a list of (str, str) tuples"),
    "split_specials": (str, "split_specials must return a new list of str"),
    "bpe_encode": (str, "bpe_encode must return a list of str"),
    "bpe_encode_fast": (str, "bpe_encode_fast must return a list of str")}


def result_of(function: str) -> Callable[[Case, Any], Any]:
    """The `observe` of a check of `function` (a key of RESULTS): `new_list` of what the call returned."""
    item, what = RESULTS[function]
    return lambda case, raw: new_list(raw, case.args, item, what)


def tokenizer_facts(case: Case, raw: Any) -> Any:
    """The `observe` of the tokenizer checks: what meta "op" gave ("vocab": the attributes; "encode": the ids;
    "decode", "roundtrip": the text) once the contract's clauses hold: ids are a list of Python ints, decode
    leaves its input as it was; else the error that says which one broke."""
    op, arg, _ = case.meta["op"]
    if op == "vocab":
        return raw
    if op == "decode":
        text, after = raw
        if after != list(arg):
            raise RuntimeError("decode changed its input (ids) in place; the contract leaves it unchanged")
        return text
    encoded = raw[0] if op in ("roundtrip", "extend") else raw
    ids = new_list(encoded, (), int, "encode must return a list of Python ints")
    return {"encode": ids, "decode": raw[1]} if op == "extend" else raw[1] if op == "roundtrip" else ids


def new_list(raw: dict, args: tuple, item: type, what: str) -> Any:
    """The value `raw` (`returned`'s record of a call) holds if it is a new list (not one of the lists in
    `args`) of `item`s, as the contract says; else an error."""
    if any(isinstance(args[i], list) for i in raw["is_argument"]):
        raise RuntimeError("it returned the list it was given: the contract asks for a new list")
    out, types = raw["value"], raw["item_types"]
    want = f"builtins.{item.__name__}"
    bad = (raw["type"], out) if types is None else next(((t, v) for t, v in zip(types, out) if t != want), None)
    if bad is not None:
        raise TypeError(f"{what}, got a {bad[0].rpartition('.')[2]} ({bad[1]!r:.40})")
    return out


def fast_enough(function: str) -> Callable[[Case, dict], bool]:
    """The `observe` of a timed case of `function` (train_bpe_fast, bpe_encode_fast: a key of RESULTS): True
    once the call returned its list and took at most meta "budget" counts of every pair of the words of its
    first argument (`count_every_pair`); else the error that says how many it took. What it returned is not
    read further: its other checks read it (a wrong merge_pair, which it may call, costs points in its own
    exercise only)."""
    item, what = RESULTS[function]

    def observe(case: Case, raw: dict) -> bool:
        new_list(raw["call"], case.args, item, what)
        took = raw["seconds"] / max(raw["count_seconds"], 1e-6)
        merges = case.args[1] if isinstance(case.args[1], int) else len(case.args[1])
        if took > case.meta["budget"]:
            raise RuntimeError(f"{function} took as long as {took:.0f} counts of every pair of the words of its "
                               f"input, for {merges} merges; the budget is {case.meta['budget']:g}")
        return True
    return observe


def read_ahead(case: Case, raw: dict) -> list:
    """The `observe` of encode_iterable: the ids it yielded, once each word's ids came before reading more
    than the chunk after the one its word ended in (the chunk that shows the word is over); else the error
    that says which came late."""
    chunks, ids = case.args[0], raw["ids"]
    ends, at = [], 0  # the chunk (counted from 1) that holds each word's last character
    bounds = [sum(len(c) for c in chunks[:k + 1]) for k in range(len(chunks))]
    for word in WORDS.findall("".join(chunks)):
        at += len(word)
        ends.append(next(k for k, b in enumerate(bounds, 1) if b >= at))
    for n, (_, read) in enumerate(ids):
        word = n // 2
        if word < len(ends) and read > min(ends[word] + 1 + _empty_after(chunks, ends[word]), len(chunks)):
            raise RuntimeError(f"the ids of word {word + 1} came after reading {read} of the {len(chunks)} chunks, "
                               f"though chunk {min(ends[word] + 1, len(chunks))} shows that the word is over: "
                               f"yield a word's ids as soon as a chunk completes it, keep only the last word")
    return [i for i, _ in ids]


def _empty_after(chunks: list[str], k: int) -> int:
    """How many empty chunks follow chunk k (counted from 1): they show nothing new."""
    n = 0
    while k + n < len(chunks) and not chunks[k + n]:
        n += 1
    return n


#: the earlier answers each exercise calls (`runner.Probe.builds_on`), and the exercise's own answer
_BUILDS_ON = {"merge_pair": (), "train_bpe": ("merge_pair",), "train_bpe_fast": ("merge_pair",), "split_specials": (),
              "encode_iterable": (),
              "bpe_encode": ("merge_pair",), "bpe_encode_fast": ("merge_pair",),
              "char": (), "bpe_tokenizer": ("train_bpe", "bpe_encode")}
_ANSWER = {"char": "CharTokenizer", "bpe_tokenizer": "BPETokenizer"}
#: what the character tokenizer's stand-in (`course.standins.tokenizing`) is built on: 1.1 is written without
_FORBID = {"char": ("torch.unique",), "bpe_tokenizer": ()}

register(
    *(Probe(f"tokenizing.{name}", call=_call_function, observe=result_of(function),
            builds_on=_BUILDS_ON[function], answer=function)
      for function, names in (("merge_pair", ("merge_pair",)),
                              ("train_bpe", ("train_bpe", "train_bpe_ties", "train_bpe_random")),
                              ("train_bpe_fast", ("train_bpe_fast",)), ("split_specials", ("split_specials",)),
                              ("bpe_encode", ("bpe_encode", "bpe_encode_random")),
                              ("bpe_encode_fast", ("bpe_encode_fast", "bpe_encode_fast_random")))
      for name in names),
    *(Probe(f"tokenizing.{kind}_{op}", call=_call_tokenizer, observe=tokenizer_facts, builds_on=_BUILDS_ON[kind],
            answer=_ANSWER[kind], forbid=_FORBID[kind])
      for kind in ("char", "bpe_tokenizer") for op in ("vocab", "encode", "decode")),
    # timed: no tracing of merge_pair's calls, which would add to the time
    *(Probe(f"tokenizing.{function}_speed", call=_call_timed, observe=fast_enough(function), answer=function)
      for function in ("train_bpe_fast", "bpe_encode_fast")),
    Probe("tokenizing.encode_iterable", call=_call_stream, observe=read_ahead, answer="encode_iterable"),
    *(Probe(f"tokenizing.byte_bpe_{op}", call=_call_byte, observe=tokenizer_facts,
            builds_on=("train_bpe", "bpe_encode"), answer="ByteBPETokenizer")
      for op in ("vocab", "encode", "decode")),
)
