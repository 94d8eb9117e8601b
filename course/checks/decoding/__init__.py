"""Checks for chapter 9: the output projection, log-softmax, the top-k and top-p filters, sampling,
generation (greedy and sampled), beam search and the key-value cache.

Oracles are PyTorch's own where one exists (``torch.log_softmax`` in float64, ``torch.multinomial`` with
the same seeded generator, chapter 5's ``MultiHeadAttention`` and a full causal forward pass for the
cache) and otherwise short independent implementations written here: the filters from their
definitions (a token's rank mass, computed without sorting), generation and beam search as plain loops
over Python lists. The decoding checks drive the student's code with small hand-made language models
(`course.probing.calls.decoding.TableLM`, which the kernel rebuilds from the cases): next-token logits
from a random table indexed by the sequence's length and last token, with the end token planted at a
chosen length per row.

One module per exercise group: `projection` (9.1 output projection, 9.2 log-softmax), `sampling`
(9.3 filters, 9.4 sample), `generation` (9.5 generate, 9.6 beam search), `kv_cache` (9.7).
"""

from . import generation, kv_cache, projection, sampling

__all__ = ["generation", "kv_cache", "projection", "sampling"]
