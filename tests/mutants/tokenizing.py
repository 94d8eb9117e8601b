from submissions import Mutant

CHAR, MERGE, TRAIN, ENCODE, BPE = "char-tokenizer", "merge-pair", "train-bpe", "bpe-encode", "bpe-tokenizer"
T_CHAR, T_MERGE, T_TRAIN, T_ENCODE, T_BPE = (f"test-{c}" for c in (CHAR, MERGE, TRAIN, ENCODE, BPE))

MUTANTS = [
    # ---- CharTokenizer
    Mutant("char: specials after the characters", CHAR,
           (("list(specials) + sorted(set(corpus))", "sorted(set(corpus)) + list(specials)"),), (T_CHAR,)),
    Mutant("char: vocabulary in order of first appearance", CHAR,
           (("list(specials) + sorted(set(corpus))", "list(specials) + list(dict.fromkeys(corpus))"),),
           (T_CHAR,)),
    Mutant("char: unknown characters crash", CHAR,
           (("[self.stoi.get(ch, self.unk_id) for ch in text]", "[self.stoi[ch] for ch in text]"),), (T_CHAR,)),
    Mutant("char: decode keeps special tokens", CHAR,
           (("silent = {self.pad_id, self.bos_id, self.eos_id}", "silent = set()"),
            ("UNK_CHAR if i == self.unk_id else self.itos[i]", "self.itos[i]")), (T_CHAR,)),
    Mutant("char: <unk> decodes to '<unk>'", CHAR,
           (("UNK_CHAR if i == self.unk_id else self.itos[i]", "self.itos[i]"),), (T_CHAR,)),
    Mutant("char: special ids hard-coded 0..3", CHAR,
           (('self.pad_id, self.bos_id = self.stoi["<pad>"], self.stoi["<bos>"]', "self.pad_id, self.bos_id = 0, 1"),
            ('self.eos_id, self.unk_id = self.stoi["<eos>"], self.stoi["<unk>"]', "self.eos_id, self.unk_id = 2, 3")),
           (T_CHAR,)),
    Mutant("char: add_special forgets <eos>", CHAR,
           (("[self.bos_id] + ids + [self.eos_id]", "[self.bos_id] + ids"),), (T_CHAR,)),
    Mutant("char: negative ids wrap around", CHAR,
           (("if not 0 <= i < self.vocab_size:", "if i >= self.vocab_size:"),), (T_CHAR,)),
    # ---- merge_pair
    Mutant("merge: no jump past a merged pair", MERGE, (("            i += 2\n", "            i += 1\n"),),
           (T_MERGE, T_TRAIN)),
    Mutant("merge: first occurrence only", MERGE,
           (("            i += 2\n", "            return merged + tokens[i + 2:]\n"),), (T_MERGE, T_TRAIN)),
    Mutant("merge: compares concatenated text", MERGE,
           (("tokens[i] == first and tokens[i + 1] == second", "tokens[i] + tokens[i + 1] == first + second"),),
           (T_MERGE,)),
    Mutant("merge: last pair never tested", MERGE,
           (("if i + 1 < len(tokens) and", "if i + 2 < len(tokens) and"),), (T_MERGE, T_TRAIN)),
    # ---- train_bpe
    Mutant("train: pairs counted across word boundaries", TRAIN,
           (("word_counts = Counter(pretokenize(corpus))", "word_counts = Counter([corpus])"),), (T_TRAIN,)),
    Mutant("train: last pair of each word missed", TRAIN,
           (("zip(tokens, tokens[1:])", "zip(tokens, tokens[1:-1])"),), (T_TRAIN,)),
    Mutant("train: ties to the first pair found", TRAIN,
           (("max(pair_counts, key=lambda p: (pair_counts[p], p))", "max(pair_counts, key=pair_counts.get)"),),
           (T_TRAIN,)),
    Mutant("train: ties to the smallest pair", TRAIN,
           (("max(pair_counts, key=lambda p: (pair_counts[p], p))",
             "min(pair_counts, key=lambda p: (-pair_counts[p], p))"),), (T_TRAIN,)),
    Mutant("train: word frequencies ignored", TRAIN,
           (("pair_counts[pair] += count", "pair_counts[pair] += 1"),), (T_TRAIN,)),
    Mutant("train: merges pairs seen once", TRAIN,
           (("if pair_counts[best] < 2:", "if pair_counts[best] < 1:"),), (T_TRAIN,)),
    Mutant("train: pairs counted once, before merging", TRAIN,
           (("    while len(merges) < num_merges:\n        pair_counts: Counter = Counter()\n"
             "        for tokens, count in words:\n            for pair in zip(tokens, tokens[1:]):\n"
             "                pair_counts[pair] += count\n",
             "    pair_counts: Counter = Counter()\n    for tokens, count in words:\n"
             "        for pair in zip(tokens, tokens[1:]):\n            pair_counts[pair] += count\n"
             "    while len(merges) < num_merges:\n        pair_counts = Counter({p: c for p, c in "
             "pair_counts.items() if p not in merges})\n"),), (T_TRAIN,)),
    Mutant("train: negative num_merges accepted", TRAIN,
           (('        raise ValueError(f"num_merges must be >= 0, got {num_merges}")\n', "        return []\n"),),
           (T_TRAIN,)),
    # ---- bpe_encode
    Mutant("encode: merges in reverse order", ENCODE,
           (("for pair in merges:  # rank order", "for pair in reversed(merges):  # rank order"),), (T_ENCODE,)),
    Mutant("encode: merges sorted", ENCODE,
           (("for pair in merges:  # rank order", "for pair in sorted(merges):  # rank order"),), (T_ENCODE,)),
    Mutant("encode: most frequent known pair first", ENCODE,
           (("            for pair in merges:  # rank order: the order of learning\n"
             "                if len(tokens) < 2:\n                    break\n"
             "                tokens = merge_pair(tokens, pair)\n",
             "            known = set(merges)\n            while True:\n"
             "                found = Counter(p for p in zip(tokens, tokens[1:]) if p in known)\n"
             "                if not found:\n                    break\n"
             "                tokens = merge_pair(tokens, max(found, key=found.get))\n"),), (T_ENCODE,)),
    Mutant("encode: one greedy left-to-right scan", ENCODE,
           (("            for pair in merges:  # rank order: the order of learning\n"
             "                if len(tokens) < 2:\n                    break\n"
             "                tokens = merge_pair(tokens, pair)\n",
             "            known, scanned = set(merges), []\n            for t in tokens:\n"
             "                if scanned and (scanned[-1], t) in known:\n                    scanned[-1] += t\n"
             "                else:\n                    scanned.append(t)\n            tokens = scanned\n"),),
           (T_ENCODE,)),
    Mutant("encode: whitespace lost (text.split())", ENCODE,
           (("for word in pretokenize(text):", "for word in text.split():"),), (T_ENCODE,)),
    # ---- BPETokenizer
    Mutant("bpe: duplicate merged strings added twice", BPE,
           (("            if token not in self.stoi:  # two merges may build the same string\n"
             "                self.stoi[token] = len(self.itos)\n",
             "            if True:\n                self.stoi[token] = len(self.itos)\n"),), (T_BPE,)),
    Mutant("bpe: merged tokens sorted", BPE,
           (("for first, second in self.merges:", "for first, second in sorted(self.merges):"),), (T_BPE,)),
    Mutant("bpe: decode joins tokens with spaces", BPE, (('return "".join(pieces)', 'return " ".join(pieces)'),),
           (T_BPE,)),
    Mutant("bpe: unknown tokens crash", BPE,
           (("[self.stoi.get(token, self.unk_id) for token", "[self.stoi[token] for token"),), (T_BPE,)),
    Mutant("bpe: decode keeps special tokens", BPE,
           (("silent = {self.pad_id, self.bos_id, self.eos_id}", "silent = set()"),), (T_BPE,)),
    Mutant("bpe: special ids hard-coded 0..3", BPE,
           (('self.eos_id, self.unk_id = self.stoi["<eos>"], self.stoi["<unk>"]', "self.eos_id, self.unk_id = 2, 3"),
            ('self.pad_id, self.bos_id = self.stoi["<pad>"], self.stoi["<bos>"]', "self.pad_id, self.bos_id = 0, 1")),
           (T_BPE,)),
]
