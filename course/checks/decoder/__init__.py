"""Checks for chapter 8: the causal mask, the decoder layer, the decoder stack and the full encoder-decoder.

Oracles are PyTorch's own modules with the course's weights copied in (`course.twins`):
``nn.Transformer.generate_square_subsequent_mask`` for the mask, ``nn.TransformerDecoderLayer`` and
``nn.TransformerDecoder`` (pre-LN, batch-first, float64) for the layer and the stack, their encoder
counterparts for the decoder-only variant (a decoder layer without cross-attention is an encoder layer
given a causal mask), and ``nn.Transformer`` for the whole model; masks are expanded to PyTorch's
(batch * heads, n_q, n_k) layout. Mistakes are the decoder written out in float64 with knobs
(`_shared.layer64`, `decoder64`), on the course's module layout built from chapters 5-7's pieces.

One module per exercise: `causal_mask` (8.1), `decoder_layer` (8.2), `decoder_stack` (8.3),
`transformer` (8.4), and `decoder_dropout` (8.2's dropouts, in training mode); `_shared` holds the layout,
the twins, the masks and the written-out decoder.
"""

from . import causal_mask, decoder_dropout, decoder_layer, decoder_stack, transformer

__all__ = ["causal_mask", "decoder_dropout", "decoder_layer", "decoder_stack", "transformer"]
