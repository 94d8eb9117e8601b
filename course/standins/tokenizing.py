"""Stand-in for chapter 1: `CharTokenizer` (what chapter 10's corpus reads text with), its vocabulary
drawn up by `torch.unique`, which exercise 1.1 forbids."""

import torch

SPECIALS: tuple[str, ...] = ("<pad>", "<bos>", "<eos>", "<unk>")
UNK_CHAR = "\ufffd"


def _code_points(text: str) -> torch.Tensor:
    return torch.tensor(list(map(ord, text)), dtype=torch.int64)


class CharTokenizer:
    """The specials in the order given, then the corpus's distinct characters by code point."""

    def __init__(self, corpus: str, specials: tuple[str, ...] = SPECIALS) -> None:
        chars = torch.unique(_code_points(corpus))  # sorted
        self.itos: list[str] = [*specials, *map(chr, chars.tolist())]
        self.stoi: dict[str, int] = dict(zip(self.itos, range(len(self.itos))))
        self.vocab_size: int = len(self.itos)
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = (self.stoi[s] for s in SPECIALS)

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        ids = [self.stoi[c] if c in self.stoi else self.unk_id for c in text]
        return [self.bos_id, *ids, self.eos_id] if add_special else ids

    def decode(self, ids: list[int]) -> str:
        bad = [i for i in ids if i not in range(self.vocab_size)]
        if bad:
            raise ValueError(f"id {bad[0]} is outside the vocabulary (0..{self.vocab_size - 1})")
        shown = {self.unk_id: UNK_CHAR, self.pad_id: "", self.bos_id: "", self.eos_id: ""}
        return "".join(shown.get(i, self.itos[i]) for i in ids)


__all__ = ["CharTokenizer"]
