"""The pieces of the transformer the course builds, by name, and whose they are.

Chapter 10 trains a model assembled from chapters 2 to 9, chapter 11 one with its own pieces.
`reference_parts()` gives the course's own answers (`course.reference.<topic>`);
`course.learner.learner_parts(...)` gives a learner's answers where they exist and pass their
checks, and the reference otherwise. Either way the result is a `Parts`: ``parts.Transformer``
is a class, ``parts.owner("Transformer")`` says ``"yours"`` or ``"reference"``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

# piece -> the topic (chapter module) that defines it
PIECES: dict[str, str] = {
    "Embedding": "embedding",
    "PositionalEncoding": "positional_encoding",
    "scaled_dot_product_attention": "attention",
    "MultiHeadAttention": "multi_head_attention",
    "LayerNorm": "add_norm",
    "FeedForward": "feed_forward",
    "EncoderLayer": "feed_forward",
    "Encoder": "feed_forward",
    "causal_mask": "decoder",
    "DecoderLayer": "decoder",
    "Decoder": "decoder",
    "Transformer": "decoder",
    "OutputProjection": "decoding",
    "generate": "decoding",
    "greedy_decode": "decoding",
    "beam_search": "decoding",
    "shift_for_teacher_forcing": "training",
    "cross_entropy": "training",
    "lr_at": "training",
    "train_step": "training",
    "evaluate": "training",
    "mask_tokens": "training",
    "RMSNorm": "modern",
    "apply_rope": "modern",
    "GroupedQueryAttention": "modern",
    "AdamW": "modern",
    "decay_groups": "modern",
    "ModernDecoderLayer": "modern",
    "ModernLM": "modern",
}


@dataclass
class Parts:
    """Named pieces (classes and functions) and who wrote each: ``parts.Embedding``."""

    objects: dict[str, Any]
    owners: dict[str, str] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["objects"][name]
        except KeyError:
            yours = self.__dict__.get("reasons", {}).get(name)  # a learner's piece that was not used, and why
            raise AttributeError(name if name not in PIECES else unpublished(name) + (f" (Yours: {yours}.)" if yours
                                                                                      else "")) from None

    def owner(self, name: str) -> str:
        return self.owners.get(name, "reference")

    def table(self) -> str:
        """One line per piece: its chapter module and whose it is."""
        width = max(map(len, self.objects))
        return "\n".join(f"{name:<{width}}  {PIECES.get(name, '?'):<20} {self.owner(name)}"
                         for name in self.objects)


def unpublished(name: str) -> str:
    """Why a piece is missing: its chapter's answers are not in this copy of the course (yet)."""
    topic = PIECES[name]
    return (f"{name} is an answer of the chapter on {topic.replace('_', ' ')} (course/reference/{topic}.py), which "
            f"this copy of the course does not hold yet: a student edition publishes a chapter's answers once it is "
            f"due. Until then, run this with your own {name} (course.learner: collect your notebooks, then "
            f"learner_parts), or again after that due date.")


def reference_parts() -> Parts:
    """Every piece from the course's reference answers that this copy of the course holds: in a student
    edition, a chapter not yet due has no answers, or a stand-in of a few (`course.standins`); asking the
    result for a missing piece says so (`unpublished`)."""
    objects = {}
    for name, topic in PIECES.items():
        try:
            module = importlib.import_module(f"course.reference.{topic}")
        except ModuleNotFoundError as err:
            if err.name != f"course.reference.{topic}":
                raise
            continue
        if hasattr(module, name):
            objects[name] = getattr(module, name)
    return Parts(objects)
