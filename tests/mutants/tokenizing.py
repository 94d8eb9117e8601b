from submissions import Mutant

CHAR, MERGE, TRAIN, ENCODE, BPE, BYTE, FAST, SPLIT, STREAM = (
    "char-tokenizer", "merge-pair", "train-bpe", "bpe-encode", "bpe-tokenizer", "byte-bpe", "train-bpe-fast",
    "split-specials", "encode-iterable")
T_CHAR, T_MERGE, T_TRAIN, T_ENCODE, T_BPE, T_BYTE, T_FAST, T_SPLIT, T_STREAM = (
    f"test-{c}" for c in (CHAR, MERGE, TRAIN, ENCODE, BPE, BYTE, FAST, SPLIT, STREAM))
RANKED, T_RANKED = "bpe-encode-fast", "test-bpe-encode-fast"

_SPECIALS_FIRST = "Did you put the special tokens after the other tokens?"
_HARD_CODED = "Did you hard-code the ids of the special tokens as 0..3?"
_UNKNOWN = "Unknown tokens must not raise"
_KEEPS = "Did decode keep the special tokens?"
_INPLACE = "changed its input"
_ORDER = "in another order than the learned one"
_TIES = "How do you break ties?"
_TRAIN_LOOP = ("    while len(merges) < num_merges:\n        pair_counts: Counter = Counter()\n"
               "        for tokens, count in words:\n            for pair in zip(tokens, tokens[1:]):\n"
               "                pair_counts[pair] += count\n")
_FAST_UPDATE = ("        for i in holders.pop(best):\n            tokens, freq = words[i], freqs[i]\n"
                "            for pair in zip(tokens, tokens[1:]):  # the word's old pairs go\n"
                "                pair_counts[pair] -= freq\n                if pair_counts[pair] == 0:\n"
                "                    del pair_counts[pair]\n"
                "            tokens = words[i] = merge_pair(tokens, best)\n"
                "            for pair in zip(tokens, tokens[1:]):  # its new pairs come\n"
                "                pair_counts[pair] += freq\n                holders[pair].add(i)\n")
_BOTH_SIDES = "so that the pairs on both sides of each occurrence change"
_ENCODE_LOOP = ("            for pair in merges:  # rank order: the order of learning\n"
                "                if len(tokens) < 2:\n                    break\n"
                "                tokens = merge_pair(tokens, pair)\n")

MUTANTS = [
    # ---- CharTokenizer
    Mutant("char: specials after the characters", CHAR,
           (("list(specials) + sorted(set(corpus))", "sorted(set(corpus)) + list(specials)"),), (T_CHAR,),
           hint=_SPECIALS_FIRST),
    Mutant("char: decode bounds ids by the size at construction", CHAR,
           (("self.vocab_size: int = len(self.itos)", "self.vocab_size: int = len(self.itos)\n        self._n = len(self.itos)"),
            ("if not 0 <= i < self.vocab_size:", "if not 0 <= i < self._n:")), (T_CHAR,),
           hint="Do encode and decode use copies made in __init__?"),
    Mutant("char: vocabulary in order of first appearance", CHAR,
           (("list(specials) + sorted(set(corpus))", "list(specials) + list(dict.fromkeys(corpus))"),),
           (T_CHAR,), hint="Is your vocabulary in order of first appearance?"),
    Mutant("char: unknown characters crash", CHAR,
           (("[self.stoi.get(ch, self.unk_id) for ch in text]", "[self.stoi[ch] for ch in text]"),), (T_CHAR,),
           hint=_UNKNOWN),
    Mutant("char: decode keeps special tokens", CHAR,
           (("silent = {self.pad_id, self.bos_id, self.eos_id}", "silent = set()"),
            ("UNK_CHAR if i == self.unk_id else self.itos[i]", "self.itos[i]")), (T_CHAR,), hint=_KEEPS),
    Mutant("char: <unk> decodes to '<unk>'", CHAR,
           (("UNK_CHAR if i == self.unk_id else self.itos[i]", "self.itos[i]"),), (T_CHAR,),
           hint="Did <unk> decode to the string '<unk>'?"),
    Mutant("char: special ids hard-coded 0..3", CHAR,
           (('self.pad_id, self.bos_id = self.stoi["<pad>"], self.stoi["<bos>"]', "self.pad_id, self.bos_id = 0, 1"),
            ('self.eos_id, self.unk_id = self.stoi["<eos>"], self.stoi["<unk>"]', "self.eos_id, self.unk_id = 2, 3")),
           (T_CHAR,), hint=_HARD_CODED),
    Mutant("char: add_special forgets <eos>", CHAR,
           (("[self.bos_id] + ids + [self.eos_id]", "[self.bos_id] + ids"),), (T_CHAR,), hint="forget the <eos> id"),
    Mutant("char: negative ids wrap around", CHAR,
           (("if not 0 <= i < self.vocab_size:", "if i >= self.vocab_size:"),), (T_CHAR,),
           hint="Did a negative id index the vocabulary from the end?"),
    # in place: decode strips the padding off the caller's list
    Mutant("char: decode pops trailing <pad> ids off its input", CHAR,
           (("        pieces = []\n", "        pieces = []\n        while ids and ids[-1] == self.pad_id:\n"
                                   "            ids.pop()  # padding gives no text anyway\n"),),
           (T_CHAR,), hint=_INPLACE),
    # ids must be Python ints (list[int]): numpy integers are not
    Mutant("char: ids are numpy integers", CHAR,
           (("        return ids\n", '        return list(__import__("numpy").array(ids, dtype="int64"))\n'),),
           (T_CHAR,), hint="encode must return a list of Python ints"),
    # ---- merge_pair
    Mutant("merge: no jump past a merged pair", MERGE, (("            i += 2\n", "            i += 1\n"),),
           (T_MERGE,), hint="re-use the second token of a merged pair"),
    Mutant("merge: first occurrence only", MERGE,
           (("            i += 2\n", "            return merged + tokens[i + 2:]\n"),), (T_MERGE,),
           hint="merge only the first occurrence"),
    Mutant("merge: compares concatenated text", MERGE,
           (("tokens[i] == first and tokens[i + 1] == second", "tokens[i] + tokens[i + 1] == first + second"),),
           (T_MERGE,), hint="Did you compare the concatenated text"),
    Mutant("merge: last pair never tested", MERGE,
           (("if i + 1 < len(tokens) and", "if i + 2 < len(tokens) and"),), (T_MERGE,),
           hint="Is a pair at the very end"),
    Mutant("merge: merges in place (tokens modified)", MERGE,
           (("            merged.append(first + second)\n            i += 2\n",
             "            tokens[i:i + 2] = [first + second]\n            merged.append(tokens[i])\n"
             "            i += 1\n"),), (T_MERGE,), hint=_INPLACE),
    Mutant("merge: returns the input list when the pair is absent", MERGE,
           (("    first, second = pair\n", "    first, second = pair\n    if pair not in zip(tokens, tokens[1:]):\n"
                                         "        return tokens  # nothing to merge\n"),), (T_MERGE,),
           hint="it returned the list it was given"),
    # ---- train_bpe
    Mutant("train: pairs counted across word boundaries", TRAIN,
           (("word_counts = Counter(pretokenize(corpus))", "word_counts = Counter([corpus])"),), (T_TRAIN,),
           hint="Did you count pairs across word boundaries?"),
    Mutant("train: last pair of each word missed", TRAIN,
           (("zip(tokens, tokens[1:])", "zip(tokens, tokens[1:-1])"),), (T_TRAIN,),
           hint="Did you miss the last pair of each word?"),
    Mutant("train: ties to the first pair found", TRAIN,
           (("max(pair_counts, key=lambda p: (pair_counts[p], p))", "max(pair_counts, key=pair_counts.get)"),),
           (T_TRAIN,), hint=_TIES),
    Mutant("train: ties to the smallest pair", TRAIN,
           (("max(pair_counts, key=lambda p: (pair_counts[p], p))",
             "min(pair_counts, key=lambda p: (-pair_counts[p], p))"),), (T_TRAIN,), hint=_TIES),
    Mutant("train: ties compared ignoring case", TRAIN,
           (("max(pair_counts, key=lambda p: (pair_counts[p], p))",
             "max(pair_counts, key=lambda p: (pair_counts[p], p[0].lower(), p[1].lower()))"),), (T_TRAIN,),
           hint=_TIES),
    Mutant("train: word frequencies ignored", TRAIN,
           (("pair_counts[pair] += count", "pair_counts[pair] += 1"),), (T_TRAIN,),
           hint="Did you count each distinct word once?"),
    Mutant("train: merges pairs seen once", TRAIN,
           (("if pair_counts[best] < 2:", "if pair_counts[best] < 1:"),), (T_TRAIN,),
           hint="Did you keep merging pairs that occur only once?"),
    Mutant("train: pairs counted once, before merging", TRAIN,
           ((_TRAIN_LOOP,
             "    pair_counts: Counter = Counter()\n    for tokens, count in words:\n"
             "        for pair in zip(tokens, tokens[1:]):\n            pair_counts[pair] += count\n"
             "    while len(merges) < num_merges:\n        pair_counts = Counter({p: c for p, c in "
             "pair_counts.items() if p not in merges})\n"),), (T_TRAIN,),
           hint="Did you count the pairs only once, before the first merge?"),
    Mutant("train: negative num_merges accepted", TRAIN,
           (('        raise ValueError(f"num_merges must be >= 0, got {num_merges}")\n', "        return []\n"),),
           (T_TRAIN,), hint="expected ValueError"),
    # the contract's type: a list of (str, str) tuples
    Mutant("train: merges as lists, not tuples", TRAIN,
           (("        merges.append(best)\n", "        merges.append(list(best))\n"),), (T_TRAIN,),
           hint="train_bpe must return a list of (str, str) tuples"),
    # ---- bpe_encode
    Mutant("encode: merges in reverse order", ENCODE,
           (("for pair in merges:  # rank order", "for pair in reversed(merges):  # rank order"),), (T_ENCODE,),
           hint=_ORDER),
    Mutant("encode: merges sorted", ENCODE,
           (("for pair in merges:  # rank order", "for pair in sorted(merges):  # rank order"),), (T_ENCODE,),
           hint=_ORDER),
    Mutant("encode: most frequent known pair first", ENCODE,
           ((_ENCODE_LOOP,
             "            known = set(merges)\n            while True:\n"
             "                found = Counter(p for p in zip(tokens, tokens[1:]) if p in known)\n"
             "                if not found:\n                    break\n"
             "                tokens = merge_pair(tokens, max(found, key=found.get))\n"),), (T_ENCODE,), hint=_ORDER),
    Mutant("encode: one greedy left-to-right scan", ENCODE,
           ((_ENCODE_LOOP,
             "            known, scanned = set(merges), []\n            for t in tokens:\n"
             "                if scanned and (scanned[-1], t) in known:\n                    scanned[-1] += t\n"
             "                else:\n                    scanned.append(t)\n            tokens = scanned\n"),),
           (T_ENCODE,), hint=_ORDER),
    Mutant("encode: whitespace lost (text.split())", ENCODE,
           (("for word in pretokenize(text):", "for word in text.split():"),), (T_ENCODE,),
           hint="Did you split with text.split()?"),
    # in place: prunes the caller's merges (the tokens come out right)
    Mutant("encode: prunes the merges list in place", ENCODE,
           (("    result: list[str] = []\n",
             "    result: list[str] = []\n    merges[:] = [p for p in merges if p[0] + p[1] in text]  # speed-up\n"),),
           (T_ENCODE,), hint=_INPLACE),
    # ---- BPETokenizer (a CharTokenizer subclass: its decode is inherited)
    Mutant("bpe: duplicate merged strings added twice", BPE,
           (("            if token not in self.stoi:  # two merges may build the same string\n"
             "                self.stoi[token] = len(self.itos)\n",
             "            if True:\n                self.stoi[token] = len(self.itos)\n"),), (T_BPE,),
           hint="Did you add a merged token twice?"),
    Mutant("bpe: duplicates looked up among the merged tokens only", BPE,
           (("            if token not in self.stoi:  # two merges may build the same string\n",
             "            if token not in merged:  # two merges may build the same string\n"
             "                merged.add(token)\n"),
            ("        for first, second in self.merges:\n            token = first + second\n",
             "        merged = set()\n        for first, second in self.merges:\n            token = first + second\n")),
           (T_BPE,), hint="Did you add a merged token twice?"),
    Mutant("bpe: merged tokens sorted", BPE,
           (("for first, second in self.merges:", "for first, second in sorted(self.merges):"),), (T_BPE,),
           hint="Did you sort the merged tokens?"),
    Mutant("bpe: vocab_size not updated after the merges", BPE,
           (("        self.vocab_size = len(self.itos)\n", ""),), (T_BPE,),
           hint="Did you update vocab_size after adding the merged tokens?"),
    Mutant("bpe: encode not replaced (inherited: one id per character)", BPE,
           (("        unk, bos, eos = self.stoi[\"<unk>\"], self.stoi[\"<bos>\"], self.stoi[\"<eos>\"]  # looked up, not assumed\n"
             "        ids = [self.stoi.get(token, unk) for token in bpe_encode(text, self.merges)]\n"
             "        if add_special:\n            ids = [bos] + ids + [eos]\n        return ids\n",
             "        return super().encode(text, add_special)\n"),), (T_BPE,),
           hint="did you replace encode?"),
    Mutant("bpe: decode overridden, joining tokens with spaces", BPE,
           (("    # decode(ids) is inherited from CharTokenizer.",
             "    def decode(self, ids: list[int]) -> str:\n"
             "        pieces = [CharTokenizer.decode(self, [i]) for i in ids]\n"
             "        return \" \".join(p for p in pieces if p)"),), (T_BPE,),
           hint="Did decode join the tokens with spaces?"),
    Mutant("bpe: unknown tokens crash", BPE,
           (("[self.stoi.get(token, unk) for token", "[self.stoi[token] for token"),), (T_BPE,),
           hint=_UNKNOWN),
    Mutant("bpe: special ids hard-coded 0..3 in encode", BPE,
           (("self.stoi.get(token, unk)", "self.stoi.get(token, 3)"),
            ("[bos] + ids + [eos]", "[1] + ids + [2]")), (T_BPE,), hint=_HARD_CODED),
    # an attribute the contract asks for
    Mutant("bpe: merges kept under another name", BPE,
           (("self.merges: list[tuple[str, str]] = list(merges)", "self._merges: list[tuple[str, str]] = list(merges)"),
            ("for first, second in self.merges:", "for first, second in self._merges:"),
            ("bpe_encode(text, self.merges)", "bpe_encode(text, self._merges)")), (T_BPE,),
           hint="has no attribute 'merges'"),
    # ---- ByteBPETokenizer (optional exercise 1.6)
    Mutant("byte: each token's bytes decoded on their own", BYTE,
           (('        data = from_bytechars("".join(self.itos[i] for i in ids))\n'
             '        return data.decode("utf-8", errors="replace")',
             '        return "".join(from_bytechars(self.itos[i]).decode("utf-8", errors="replace") for i in ids)'),),
           (T_BYTE,), hint="Did you decode each token's bytes on its own?"),
    Mutant("byte: BPE on characters, not bytes", BYTE,
           (("bpe_encode(to_bytechars(text), self.merges)", "bpe_encode(text, self.merges)"),
            ("train_bpe(to_bytechars(corpus), num_merges)", "train_bpe(corpus, num_merges)")), (T_BYTE,),
           hint="Did you run BPE on the characters instead of the UTF-8 bytes?"),
    Mutant("byte: merges applied in reverse order", BYTE,
           (("bpe_encode(to_bytechars(text), self.merges)", "bpe_encode(to_bytechars(text), self.merges[::-1])"),),
           (T_BYTE,), hint=_ORDER),
    Mutant("byte: strict UTF-8 decoding", BYTE, (('errors="replace"', 'errors="strict"'),), (T_BYTE,),
           hint="Did you decode with errors='strict'?"),
    Mutant("byte: negative ids wrap around", BYTE,
           (("if not 0 <= i < self.vocab_size:", "if i >= self.vocab_size:"),), (T_BYTE,),
           hint="Did a negative id index the vocabulary from the end?"),
    Mutant("byte: duplicate merged strings added twice", BYTE,
           (("            if first + second not in self.stoi:  # two merges may build the same string\n",
             "            if True:\n"),), (T_BYTE,), hint="Did you add a merged token twice?"),
    # ---- train_bpe_fast (exercise 1.7)
    Mutant("fast: recounts every pair after every merge", FAST,
           (("        top = max(pair_counts.values())\n",
             "        pair_counts = Counter()\n        for tokens, freq in zip(words, freqs):\n"
             "            for pair in zip(tokens, tokens[1:]):\n                pair_counts[pair] += freq\n"
             "        if not pair_counts:\n            break\n        top = max(pair_counts.values())\n"),
            (_FAST_UPDATE, "        words = [merge_pair(tokens, best) for tokens in words]\n")), (T_FAST,),
           hint="Did you recount every pair after every merge?"),
    # the stopwatch counts every thread of the kernel, and its children: moving the work elsewhere hides nothing
    Mutant("fast: exercise 1.3's recount run on another thread", FAST,
           (("    if num_merges < 0:\n        raise ValueError(f\"num_merges must be >= 0, got {num_merges}\")\n",
             "    import concurrent.futures\n    with concurrent.futures.ThreadPoolExecutor(1) as pool:\n"
             "        return pool.submit(train_bpe, corpus, num_merges).result()\n"),), (T_FAST,),
           hint="Did you recount every pair after every merge?"),
    Mutant("fast: a merged word's old pairs not taken out", FAST,
           (("            for pair in zip(tokens, tokens[1:]):  # the word's old pairs go\n"
             "                pair_counts[pair] -= freq\n                if pair_counts[pair] == 0:\n"
             "                    del pair_counts[pair]\n", ""),), (T_FAST,), hint=_BOTH_SIDES),
    Mutant("fast: only the merged pair's own count taken out", FAST,
           ((_FAST_UPDATE,
             "        for i in holders.pop(best):\n            tokens, freq = words[i], freqs[i]\n"
             "            merged = merge_pair(tokens, best)\n"
             "            pair_counts[best] -= freq * (len(tokens) - len(merged))  # one per occurrence\n"
             "            for pair in zip(merged, merged[1:]):\n"
             "                if best[0] + best[1] in pair:  # the pairs the new token is in\n"
             "                    pair_counts[pair] += freq\n                    holders[pair].add(i)\n"
             "            words[i] = merged\n"),), (T_FAST,), hint=_BOTH_SIDES),
    Mutant("fast: the words that hold a new pair not recorded", FAST,
           (("                pair_counts[pair] += freq\n                holders[pair].add(i)\n",
             "                pair_counts[pair] += freq\n"),), (T_FAST,),
           hint="record that the word holds each new pair"),  # holders.pop(best) raises KeyError
    Mutant("fast: ties to the smallest pair", FAST,
           (("best = max(pair for pair, count", "best = min(pair for pair, count"),), (T_FAST,), hint=_TIES),
    # ---- split_specials (exercise 1.8)
    Mutant("split: specials tried in the order given", SPLIT,
           (("sorted(specials, key=len, reverse=True)", "specials"),), (T_SPLIT,), hint="Take the longest"),
    Mutant("split: shortest special first", SPLIT,
           (("sorted(specials, key=len, reverse=True)", "sorted(specials, key=len)"),), (T_SPLIT,),
           hint="Take the longest"),
    Mutant("split: specials not escaped", SPLIT, (("re.escape(special)", "special"),), (T_SPLIT,),
           hint="unescaped"),
    Mutant("split: empty pieces kept", SPLIT, (('re.split(f"({pattern})", text) if piece]',
                                                're.split(f"({pattern})", text)]'),), (T_SPLIT,),
           hint="Are there empty strings among your pieces?"),
    Mutant("split: no capturing group (specials dropped)", SPLIT,
           (('re.split(f"({pattern})", text)', "re.split(pattern, text)"),), (T_SPLIT,),
           hint="Are your specials missing from the pieces?"),
    Mutant("split: str.split by each special in turn", SPLIT,
           (("    # a regular expression tries its alternatives in order",
             "    pieces = [text]\n    for special in specials:  # one after another, in the order given\n"
             "        cut = []\n        for piece in pieces:\n            if piece in specials:\n"
             "                cut.append(piece)\n                continue\n"
             "            for k, part in enumerate(piece.split(special)):\n"
             "                cut += [special] * (k > 0) + [part]\n        pieces = cut\n"
             "    return [piece for piece in pieces if piece]\n"
             "    # a regular expression tries its alternatives in order"),), (T_SPLIT,), hint="the longest"),
    # ---- encode_iterable (exercise 1.9)
    Mutant("stream: every chunk read before the first id", STREAM,
           (('    pending = ""  # the last word read so far: the next chunk may continue it\n',
             '    chunks = list(chunks)  # all of it first\n'
             '    pending = ""  # the last word read so far: the next chunk may continue it\n'),), (T_STREAM,),
           hint="yield a word's ids as soon as a chunk completes it"),
    Mutant("stream: each chunk encoded on its own", STREAM,
           (("        words = pretokenize(pending + chunk)\n", "        yield from encode(chunk)\n"
                                                            "        words = []\n"),), (T_STREAM,),
           hint="Did you encode each chunk on its own?"),
    Mutant("stream: the last word never encoded", STREAM,
           (("    if pending:\n        yield from encode(pending)", "    return"),), (T_STREAM,),
           hint="Did you forget the text left after the last chunk?"),
    Mutant("stream: cut after the last whitespace", STREAM,
           (("        words = pretokenize(pending + chunk)\n        if len(words) > 1:\n"
             "            yield from encode(\"\".join(words[:-1]))\n        pending = words[-1] if words else \"\"\n",
             "        text = pending + chunk\n        cut = max((k + 1 for k, c in enumerate(text) if c.isspace()), "
             "default=0)\n        yield from encode(text[:cut])\n        pending = text[cut:]\n"),), (T_STREAM,),
           hint="Did you cut after the last whitespace character?"),
    Mutant("split: the longest special split out everywhere first, then the others", SPLIT,
           (("    # a regular expression tries its alternatives in order",
             "    pieces = [text]\n    for special in sorted(specials, key=len, reverse=True):\n"
             "        cut = []\n        for piece in pieces:\n            if piece in specials:\n"
             "                cut.append(piece)\n                continue\n"
             "            for k, part in enumerate(piece.split(special)):\n"
             "                cut += [special] * (k > 0) + [part]\n        pieces = cut\n"
             "    return [piece for piece in pieces if piece]\n"
             "    # a regular expression tries its alternatives in order"),), (T_SPLIT,),
           hint="Did you split out one special everywhere, then the next?"),
    Mutant("split: specials sorted in place", SPLIT,
           (("    pattern = \"|\".join(re.escape(special) for special in sorted(specials, key=len, reverse=True))",
             "    specials.sort(key=len, reverse=True)  # longest first\n"
             "    pattern = \"|\".join(re.escape(special) for special in specials)"),), (T_SPLIT,),
           hint="changed its input"),
    # --- 1.10 bpe_encode_fast: the work it exists to avoid (the first, graded through the real grader), and the
    # rank loop's slips
    Mutant("ranked: the merges replayed (bpe_encode itself)", RANKED,
           (("    rank = {pair: i for i, pair in enumerate(merges)}\n", "    return bpe_encode(text, merges)\n"),),
           (T_RANKED,), hint="Did you replay every merge on every word"),
    Mutant("ranked: the highest rank first", RANKED,
           (("best = min(zip(tokens, tokens[1:]), key=lambda pair: rank.get(pair, len(merges)))",
             "best = max(zip(tokens, tokens[1:]), key=lambda pair: rank.get(pair, -1))"),
            ("if best not in rank:", "if rank.get(best, -1) < 0:")), (T_RANKED,),
           hint="Did you merge the pair of the highest rank?"),
    Mutant("ranked: every occurrence of a word encoded again", RANKED,
           (("        if word not in tokens_of:", "        if True:"),), (T_RANKED,),
           hint="encode each distinct word once"),
]
