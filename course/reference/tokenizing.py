"""Reference solutions of chapter 01_tokenizing.

Generated from solutions/01_tokenizing/01_tokenizing.ipynb (cells tagged 'export') by
`python -m autograder release`. Do not edit: edit the solution notebook.
"""
import re

SPECIALS: tuple[str, ...] = ("<pad>", "<bos>", "<eos>", "<unk>")
UNK_CHAR = "\ufffd"  # what decode writes for <unk>: the Unicode replacement character


def pretokenize(text: str) -> list[str]:
    """Split text into words; each word keeps the whitespace in front of it.

    A word is a run of non-whitespace characters together with all the
    whitespace just before it; whitespace at the very end of the text is a
    word of its own. Nothing is dropped: "".join(pretokenize(t)) == t.
    """
    return re.findall(r"\s*\S+|\s+", text)


class CharTokenizer:
    """A character-level tokenizer: one token per character, plus special tokens.

    Vocabulary: the special tokens (in the order given), then the distinct
    characters of `corpus` in sorted order.
    """

    def __init__(self, corpus: str, specials: tuple[str, ...] = ("<pad>", "<bos>", "<eos>", "<unk>")) -> None:
        self.itos: list[str] = list(specials) + sorted(set(corpus))
        self.stoi: dict[str, int] = {token: i for i, token in enumerate(self.itos)}
        self.vocab_size: int = len(self.itos)
        self.pad_id, self.bos_id = self.stoi["<pad>"], self.stoi["<bos>"]
        self.eos_id, self.unk_id = self.stoi["<eos>"], self.stoi["<unk>"]

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        """Ids of the characters of `text` (unknown ones -> <unk>), optionally wrapped in <bos> ... <eos>."""
        ids = [self.stoi.get(ch, self.unk_id) for ch in text]
        if add_special:
            ids = [self.bos_id] + ids + [self.eos_id]
        return ids

    def decode(self, ids: list[int]) -> str:
        """The text of `ids`: <pad>/<bos>/<eos> dropped, <unk> -> UNK_CHAR. Raises ValueError on a bad id."""
        silent = {self.pad_id, self.bos_id, self.eos_id}
        pieces = []
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"id {i} is outside the vocabulary (0..{self.vocab_size - 1})")
            if i in silent:
                continue
            pieces.append(UNK_CHAR if i == self.unk_id else self.itos[i])
        return "".join(pieces)


def merge_pair(tokens: list[str], pair: tuple[str, str]) -> list[str]:
    """Replace every non-overlapping occurrence of `pair`, left to right, by one token.

    tokens: a list of n strings; returns a new list of at most n strings.
    """
    first, second = pair
    merged: list[str] = []
    i = 0
    while i < len(tokens):
        if i + 1 < len(tokens) and tokens[i] == first and tokens[i + 1] == second:
            merged.append(first + second)
            i += 2
        else:
            merged.append(tokens[i])
            i += 1
    return merged


from collections import Counter


def train_bpe(corpus: str, num_merges: int) -> list[tuple[str, str]]:
    """Learn up to `num_merges` BPE merges on `corpus`, most useful first.

    Returns a list of (left, right) string pairs; its length is <= num_merges.
    """
    if num_merges < 0:
        raise ValueError(f"num_merges must be >= 0, got {num_merges}")
    word_counts = Counter(pretokenize(corpus))
    # every distinct word once, as its current list of tokens, with its frequency
    words = [(list(word), count) for word, count in word_counts.items()]
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges:
        pair_counts: Counter = Counter()
        for tokens, count in words:
            for pair in zip(tokens, tokens[1:]):
                pair_counts[pair] += count
        if not pair_counts:
            break
        best = max(pair_counts, key=lambda p: (pair_counts[p], p))  # ties: greatest pair
        if pair_counts[best] < 2:
            break
        merges.append(best)
        words = [(merge_pair(tokens, best), count) for tokens, count in words]
    return merges


def bpe_encode(text: str, merges: list[tuple[str, str]]) -> list[str]:
    """Split `text` into BPE tokens by applying `merges` in learned order to each word.

    Returns a list of strings whose concatenation is `text`.
    """
    tokens_of: dict[str, list[str]] = {}  # each distinct word is encoded once
    result: list[str] = []
    for word in pretokenize(text):
        if word not in tokens_of:
            tokens = list(word)
            for pair in merges:  # rank order: the order of learning
                if len(tokens) < 2:
                    break
                tokens = merge_pair(tokens, pair)
            tokens_of[word] = tokens
        result.extend(tokens_of[word])
    return result


class BPETokenizer(CharTokenizer):
    """A byte-pair-encoding tokenizer with ids, built on CharTokenizer.

    Vocabulary: CharTokenizer's (the special tokens, then the sorted characters
    of `alphabet`), then one token per merge in learned order (skipping strings
    already present). `encode` uses bpe_encode; `decode` is CharTokenizer's.
    """

    def __init__(self, merges: list[tuple[str, str]], alphabet: str,
                 specials: tuple[str, ...] = ("<pad>", "<bos>", "<eos>", "<unk>")) -> None:
        super().__init__(alphabet, specials)  # the specials, then sorted(set(alphabet))
        self.merges: list[tuple[str, str]] = list(merges)
        for first, second in self.merges:
            token = first + second
            if token not in self.stoi:  # two merges may build the same string
                self.stoi[token] = len(self.itos)
                self.itos.append(token)
        self.vocab_size = len(self.itos)

    @classmethod
    def train(cls, corpus: str, num_merges: int,
              specials: tuple[str, ...] = ("<pad>", "<bos>", "<eos>", "<unk>")) -> "BPETokenizer":
        """Learn `num_merges` merges on `corpus` (with your train_bpe) and build the tokenizer."""
        return cls(train_bpe(corpus, num_merges), corpus, specials)

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        """Ids of the BPE tokens of `text` (unknown ones -> <unk>), optionally wrapped in <bos> ... <eos>."""
        unk, bos, eos = self.stoi["<unk>"], self.stoi["<bos>"], self.stoi["<eos>"]  # looked up, not assumed
        ids = [self.stoi.get(token, unk) for token in bpe_encode(text, self.merges)]
        if add_special:
            ids = [bos] + ids + [eos]
        return ids

    # decode(ids) is inherited from CharTokenizer.


# BYTE_CHARS[b] stands for the byte b: ASCII bytes are themselves, the others chr(256 + b)
BYTE_CHARS = "".join(chr(b if b < 128 else 256 + b) for b in range(256))


def to_bytechars(text: str) -> str:
    """The UTF-8 bytes of `text`, one character of BYTE_CHARS per byte."""
    return "".join(BYTE_CHARS[b] for b in text.encode("utf-8"))


def from_bytechars(chars: str) -> bytes:
    """The bytes that a string of BYTE_CHARS characters stands for (the inverse of to_bytechars)."""
    return bytes(ord(c) if ord(c) < 128 else ord(c) - 256 for c in chars)


class ByteBPETokenizer:
    """Byte-level BPE: the 256 byte values are the base tokens, so no text is unknown.

    Vocabulary: the 256 characters of BYTE_CHARS (id b = byte b), then one token
    per merge in learned order (skipping strings already present).
    """

    def __init__(self, merges: list[tuple[str, str]]) -> None:
        self.merges: list[tuple[str, str]] = list(merges)
        self.itos: list[str] = list(BYTE_CHARS)
        self.stoi: dict[str, int] = {token: i for i, token in enumerate(self.itos)}
        for first, second in self.merges:
            if first + second not in self.stoi:  # two merges may build the same string
                self.stoi[first + second] = len(self.itos)
                self.itos.append(first + second)
        self.vocab_size: int = len(self.itos)

    @classmethod
    def train(cls, corpus: str, num_merges: int) -> "ByteBPETokenizer":
        """Learn up to `num_merges` merges on the bytes of `corpus` and build the tokenizer."""
        return cls(train_bpe(to_bytechars(corpus), num_merges))

    def encode(self, text: str) -> list[int]:
        """The ids of the byte-level BPE tokens of `text` (any string)."""
        return [self.stoi[token] for token in bpe_encode(to_bytechars(text), self.merges)]

    def decode(self, ids: list[int]) -> str:
        """The text of `ids`: all their bytes, decoded as UTF-8 at once (invalid bytes -> UNK_CHAR)."""
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"id {i} is outside the vocabulary (0..{self.vocab_size - 1})")
        data = from_bytechars("".join(self.itos[i] for i in ids))
        return data.decode("utf-8", errors="replace")


from collections import defaultdict


def train_bpe_fast(corpus: str, num_merges: int) -> list[tuple[str, str]]:
    """train_bpe's merges, with each merge updating only the words that hold its pair.

    Returns the same list as train_bpe(corpus, num_merges).
    """
    if num_merges < 0:
        raise ValueError(f"num_merges must be >= 0, got {num_merges}")
    word_counts = Counter(pretokenize(corpus))
    words = [list(word) for word in word_counts]  # each distinct word once, as its current tokens
    freqs = list(word_counts.values())
    pair_counts: Counter = Counter()
    holders: defaultdict = defaultdict(set)  # pair -> the positions in `words` of the words that hold it
    for i, tokens in enumerate(words):
        for pair in zip(tokens, tokens[1:]):
            pair_counts[pair] += freqs[i]
            holders[pair].add(i)
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges and pair_counts:
        top = max(pair_counts.values())
        if top < 2:
            break
        best = max(pair for pair, count in pair_counts.items() if count == top)  # ties: greatest pair
        merges.append(best)
        for i in holders.pop(best):
            tokens, freq = words[i], freqs[i]
            for pair in zip(tokens, tokens[1:]):  # the word's old pairs go
                pair_counts[pair] -= freq
                if pair_counts[pair] == 0:
                    del pair_counts[pair]
            tokens = words[i] = merge_pair(tokens, best)
            for pair in zip(tokens, tokens[1:]):  # its new pairs come
                pair_counts[pair] += freq
                holders[pair].add(i)
    return merges


def split_specials(text: str, specials: list[str]) -> list[str]:
    """Cut `text` into pieces: each special token (the longest, where several start) and the text between.

    Returns a new list of non-empty strings whose concatenation is `text`.
    """
    if any(special == "" for special in specials):
        raise ValueError("a special token cannot be the empty string")
    if not specials:
        return [text] if text else []
    # a regular expression tries its alternatives in order: the longest first wins where several match
    pattern = "|".join(re.escape(special) for special in sorted(specials, key=len, reverse=True))
    return [piece for piece in re.split(f"({pattern})", text) if piece]  # the group keeps the specials


from typing import Callable, Iterable, Iterator


def encode_iterable(encode: Callable[[str], list[int]], chunks: Iterable[str]) -> Iterator[int]:
    """Yield the ids of encode("".join(chunks)), reading `chunks` one at a time.

    encode works word by word (the words of pretokenize); a word may be cut across chunks.
    """
    pending = ""  # the last word read so far: the next chunk may continue it
    for chunk in chunks:
        words = pretokenize(pending + chunk)
        if len(words) > 1:
            yield from encode("".join(words[:-1]))
        pending = words[-1] if words else ""
    if pending:
        yield from encode(pending)


def bpe_encode_fast(text: str, merges: list[tuple[str, str]]) -> list[str]:
    """bpe_encode's tokens, GPT-2's way: on each distinct word, merge the adjacent pair of the lowest rank
    (its index in `merges`) until no adjacent pair has a rank."""
    rank = {pair: i for i, pair in enumerate(merges)}
    tokens_of: dict[str, list[str]] = {}  # each distinct word is encoded once
    result: list[str] = []
    for word in pretokenize(text):
        if word not in tokens_of:
            tokens = list(word)
            while len(tokens) > 1:
                best = min(zip(tokens, tokens[1:]), key=lambda pair: rank.get(pair, len(merges)))
                if best not in rank:  # no adjacent pair has a rank: the word is done
                    break
                length = len(tokens)
                tokens = merge_pair(tokens, best)
                if len(tokens) == length:  # nothing merged (a wrong merge_pair): stop rather than loop
                    break
            tokens_of[word] = tokens
        result.extend(tokens_of[word])
    return result
