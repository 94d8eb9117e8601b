"""Checks for chapter 7: the position-wise feed-forward network, its SwiGLU variant, the pre-LN
encoder layer and the encoder stack.

Oracles:

* `FeedForward`: the formula in float64 (``F.relu``, or ``F.gelu``, the exact GELU) with the case's
  weights; in training mode with dropout, the same in float32 with ``F.dropout`` on the hidden
  activations after ``torch.manual_seed(0)``, which is how the tests run the student's module too.
* `SwiGLUFeedForward`: ``w_down(F.silu(w_gate(x)) * w_up(x))`` in float64.
* `EncoderLayer`: ``nn.TransformerEncoderLayer(norm_first=True, batch_first=True)`` in float64 with
  the weights copied in (`course.twins`); padding masks go in as its boolean
  ``src_key_padding_mask``, other masks as a float ``src_mask``. With dropout, the layer recomposed
  from the twin's sub-modules in float32 with seeded ``F.dropout``.
* `Encoder`: ``nn.TransformerEncoder`` of such layers with a final ``nn.LayerNorm``, weights copied in;
  on permuted positions, its own output permuted (no positions are encoded: attention and the FFN
  are permutation-equivariant).
* Parameter tables: written out by name, shape and dtype, with the counts
  2 d d_ff + d_ff + d (FFN) and 4 d^2 + 4 d + 4 d + FFN (a layer).

Mistakes are the oracles with knobs: `_shared.ffn64`, `swiglu._swiglu`, `encoder_layer._wired`
(the layer recomposed from the twin's sub-modules), `encoder._stacked` (the stack recomposed from
the twin's layers), and the seeded dropout runs.
"""

from . import (  # noqa: F401, I001  (each module registers its checks, in the notebook's order)
    feed_forward,
    swiglu,
    encoder_layer,
    encoder,
)
