"""Checks for chapter 6: layer normalisation (a function and a module) and the two residual wirings.

Oracles are PyTorch's own: ``F.layer_norm`` in float64, cast back to the input's dtype, for the
function; ``nn.LayerNorm`` in float64 with the case's gain and bias copied in for the module (which
has no dropout, so it must give that answer in training and in eval mode) and ``F.layer_norm``
without gain and bias for a new module; for the residual wirings, the case's own ``nn.LayerNorm``
and sub-layer (a tanh MLP, `course.probing.calls.add_norm.TanhMLP`) composed in the right order.
Mistakes are `_manual` (layer norm written out, with knobs for the usual slips) and `_wired` (the
wrong compositions).

One module per exercise: `layer_norm` (6.1: the function, on ordinary rows and on hard ones),
`layer_norm_module` (6.2), `residual` (6.3: both wirings); `_shared` holds the tolerances, the
inputs, `_manual` and the mistakes built on it.
"""

from . import layer_norm, layer_norm_module, residual

__all__ = ["layer_norm", "layer_norm_module", "residual"]
