"""8.2, dropout: `DecoderLayer(..., dropout=p)` in training mode, each dropout the contract names observed on
its own. The oracle is the layer written out in float32 with the case's weights, seeded as `kit.run_modes`
seeds the student's module (torch.manual_seed(0) before each pass), drawing its masks in the order the
computation reaches them: self-attention's output, cross-attention's output, the FFN's hidden activations, the
FFN's output. Mistakes leave out one of them, or drop in eval mode too."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .. import kit
from ..framework import Case, Check, Mistake, register
from ..kit import randn
from ._shared import SkeletonLayer, drawn, lengths_for, weights_for

_SITES = ("self", "cross", "hidden", "ffn")


def _cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(2, 4, 5, 8, 2, 16, 0.5, True)] if not hidden else [
        (2, 5, 3, 8, 2, 16, 0.3, True), (3, 3, 6, 12, 3, 20, 0.5, True), (2, 4, None, 8, 2, 16, 0.4, False)]
    cases = []
    for *spec, cross in specs:  # the sizes and p drawn around the spec's
        b, nt, ns, d, h, ff, p = drawn(rng, dict(zip(("b", "nt", "ns", "d", "h", "ff", "p"), spec))).values()
        kw: dict[str, Any] = {"x": randn(rng, b, nt, d), "tgt_mask": kit.causal_mask(nt)}
        if cross:
            kw["memory"] = randn(rng, b, ns, d)
            kw["memory_mask"] = kit.padding_mask(lengths_for(rng, b, ns), ns)
        weights = weights_for(SkeletonLayer(d, h, ff, cross), rng)
        label = (f"DecoderLayer({d}, {h}, {ff}, dropout={p}{'' if cross else ', cross_attention=False'}), "
                 "in training and eval mode: " + kit.describe(**kw))
        cases.append(Case(label, (), kw, meta={"config": (d, h, ff), "p": p, "cross": cross, "weights": weights}))
    return cases


def _dropped(case: Case, *, missing: tuple[str, ...] = (), in_eval: bool = False) -> Any:
    """Both modes, float32, seeded as the tests seed; `missing`: sites without dropout; `in_eval`: drop there too."""
    L = SkeletonLayer(*case.meta["config"], cross_attention=case.meta["cross"]).eval()
    kit.load_weights(L, case.meta["weights"])
    kw, p = case.kwargs, case.meta["p"]

    def forward(training: bool) -> torch.Tensor:
        torch.manual_seed(0)

        def drop(site: str, t: torch.Tensor) -> torch.Tensor:
            return F.dropout(t, p, True) if training and site not in missing else t
        x = kw["x"]
        h = L.norm1(x)
        x = x + drop("self", L.self_attn(h, mask=kw["tgt_mask"])[0])
        if case.meta["cross"]:
            x = x + drop("cross", L.cross_attn(L.norm2(x), kw["memory"], kw["memory"], mask=kw["memory_mask"])[0])
        hidden = drop("hidden", F.relu(L.ffn.linear1(L.norm3(x))))
        return x + drop("ffn", L.ffn.linear2(hidden))

    with torch.no_grad():
        return {"eval": forward(in_eval), "train": forward(True)}


def _without(*sites: str) -> Any:
    return kit.variant(_dropped, missing=sites)


_MISTAKES = [
    Mistake("Did you leave out dropout on the self-attention's output? x = x + self.dropout(self_attn(...)[0]).",
            _without("self")),
    Mistake("Did you leave out dropout on the cross-attention's output? x = x + self.dropout(out), out the "
            "cross-attention's output.", kit.unless(lambda case: case.meta["cross"], _without("cross"))),
    Mistake("Did you leave out dropout on the feed-forward network's output? return x + "
            "self.dropout(self.ffn(self.norm3(x))).", _without("ffn")),
    Mistake("Did you pass dropout on to the FeedForward? self.ffn = FeedForward(d_model, d_ff, dropout) drops its "
            "hidden activations in training mode.", _without("hidden")),
    Mistake("Did you forget dropout? In training mode self.dropout acts on each sub-layer's output before it is "
            "added, and the FFN drops its hidden activations.", _without(*_SITES)),
    Mistake("Did you apply dropout in eval mode too? Use the modules (self.dropout, the FFN's own), which do "
            "nothing after .eval().", kit.variant(_dropped, in_eval=True)),
]

register(
    __name__,
    Check(name="decoder_layer_dropout", cases=_cases, expected=_dropped, mistakes=_MISTAKES,
          rtol=1e-5, atol=1e-5,
          hint="In training mode: self.dropout on the self-attention's output, on the cross-attention's output "
               "and on the FFN's output, each before it is added, and the FFN's own dropout on its hidden "
               "activations; in eval mode no dropout. The tests seed PyTorch (torch.manual_seed(0)) before each "
               "pass, so your dropout draws the same masks as theirs if it runs in that order."),
)
