"""Tiny Shakespeare for chapter 10's character language model.

* `load_text(path)`: the text at `path`; if the file is missing, it downloads Karpathy's
  Tiny Shakespeare (1,115,394 characters, 1.1 MB) there first, checks its sha256 and says clearly
  what to do when there is no network. The text is never part of the repository: keep it in a
  git-ignored folder (``data/``).
* `CharCorpus(text)`: chapter 1's `CharTokenizer` over the text, the ids as one int64 tensor, and
  nanoGPT's split: the first 90% for training, the last 10% held out.
* `random_blocks(ids, block_size, batch_size, generator)`: a batch of random windows (x, y),
  y = x shifted by one position: the next-token targets.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request

import torch

from course.reference.tokenizing import CharTokenizer

URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
DEFAULT_PATH = "data/tinyshakespeare.txt"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_sha256(data: bytes, expected: str = SHA256) -> None:
    """Raise ValueError if `data` is not the file whose sha256 is `expected`."""
    if sha256(data) != expected:
        raise ValueError(f"sha256 mismatch: expected {expected}, got {sha256(data)} "
                         f"(a truncated download, or a different file)")


def download(path: str, url: str = URL, expected: str = SHA256, timeout: float = 30.0) -> None:
    """Fetch `url` to `path` after checking its sha256. Raises RuntimeError when offline."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data = response.read()
    except (urllib.error.URLError, OSError) as error:
        raise RuntimeError(
            f"could not download {url} ({error}). This machine seems to be offline: download the file "
            f"on a machine with a network and copy it to {path} (sha256 {expected})") from None
    check_sha256(data, expected)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def load_text(path: str = DEFAULT_PATH, url: str = URL, expected: str | None = SHA256) -> str:
    """The text at `path`, downloaded from `url` first if the file is missing; its sha256 is
    checked against `expected` (None: not checked, for other texts)."""
    if not os.path.exists(path):
        download(path, url, expected)
    with open(path, "rb") as f:
        data = f.read()
    if expected is not None:
        check_sha256(data, expected)
    return data.decode("utf-8")


class CharCorpus:
    """A text as character ids: `tokenizer` (chapter 1's CharTokenizer, special tokens unused here),
    `train` (the first `train_fraction` of the ids) and `val` (the rest), int64 tensors."""

    def __init__(self, text: str, train_fraction: float = 0.9) -> None:
        self.tokenizer = CharTokenizer(text)
        ids = torch.tensor(self.tokenizer.encode(text), dtype=torch.long)   # (len(text),)
        n = int(train_fraction * len(ids))
        self.train, self.val = ids[:n], ids[n:]

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def batch(self, split: str, block_size: int, batch_size: int,
              generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """`random_blocks` of split "train" or "val"."""
        return random_blocks(self.train if split == "train" else self.val, block_size, batch_size, generator)

    def decode(self, ids: torch.Tensor) -> str:
        return self.tokenizer.decode(ids.tolist())


def random_blocks(ids: torch.Tensor, block_size: int, batch_size: int,
                  generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """ids (n,) -> (x, y), both (batch_size, block_size): windows starting at uniformly random
    offsets, and y[b, i] = ids[start_b + i + 1], the token after x[b, i]."""
    if len(ids) <= block_size:
        raise ValueError(f"need more than block_size = {block_size} ids, got {len(ids)}")
    starts = torch.randint(len(ids) - block_size, (batch_size,), generator=generator)   # (batch,)
    index = starts[:, None] + torch.arange(block_size + 1)                               # (batch, block + 1)
    window = ids[index]
    return window[:, :-1], window[:, 1:]
