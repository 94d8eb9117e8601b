"""Figures more than one chapter draws."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

# (key, label, chapter, x, y, width): one box of the encoder-decoder map
_BOXES = [
    ("tokenize_src", "Tokenize source\n(ch. 1)", 1, 0.0, 0.0, 2.6),
    ("embed_src", "Embedding (ch. 2)\n+ positions (ch. 3)", 2, 0.0, 1.2, 2.6),
    ("enc_attn", "Multi-head self-attention\n(ch. 4, 5)", 4, 0.0, 2.6, 2.6),
    ("enc_norm1", "Add & norm (ch. 6)", 6, 0.0, 3.6, 2.6),
    ("enc_ffn", "Feed-forward (ch. 7)", 7, 0.0, 4.4, 2.6),
    ("enc_norm2", "Add & norm (ch. 6)", 6, 0.0, 5.2, 2.6),
    ("tokenize_tgt", "Tokenize target\n(ch. 1)", 1, 3.6, 0.0, 2.6),
    ("embed_tgt", "Embedding (ch. 2)\n+ positions (ch. 3)", 2, 3.6, 1.2, 2.6),
    ("dec_self", "Masked self-attention\n(ch. 8)", 8, 3.6, 2.6, 2.6),
    ("dec_norm1", "Add & norm", 6, 3.6, 3.6, 2.6),
    ("dec_cross", "Cross-attention (ch. 8)", 8, 3.6, 4.4, 2.6),
    ("dec_norm2", "Add & norm", 6, 3.6, 5.2, 2.6),
    ("dec_ffn", "Feed-forward", 7, 3.6, 6.0, 2.6),
    ("dec_norm3", "Add & norm", 6, 3.6, 6.8, 2.6),
    ("output", "Linear + softmax (ch. 9)", 9, 3.6, 7.9, 2.6),
]


def architecture_map(highlight: int | None = None, ax: plt.Axes | None = None) -> plt.Figure:
    """The encoder-decoder Transformer as the course builds it, bottom to top.

    `highlight` is a chapter number: its boxes are coloured, the rest grey,
    so each chapter can show where it sits. Chapter 10 (training) wraps the
    whole picture. The course uses pre-LN blocks (chapter 6); the map shows
    the sub-layers in the order of the original paper's figure.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 7.2))
    for key, label, chapter, x, y, w in _BOXES:
        on = (highlight is None or chapter == highlight or (highlight == 5 and chapter == 4)
              or (highlight == 3 and chapter == 2))  # positions are added where embeddings are made
        colour = "#f4c27a" if on and highlight is not None else ("#cfe0f3" if on else "#eeeeee")
        ax.add_patch(FancyBboxPatch((x, y), w, 0.65 if "\n" not in label else 0.85,
                                    boxstyle="round,pad=0.04", fc=colour,
                                    ec="#555555" if on else "#bbbbbb", lw=1.2))
        h = 0.65 if "\n" not in label else 0.85
        ax.text(x + w / 2, y + h / 2, label, ha="center", va="center", fontsize=8.5,
                color="black" if on else "#999999")
    for x0 in (0.0, 3.6):  # the stacks: N identical layers each
        top = 5.95 if x0 == 0.0 else 7.55
        ax.add_patch(FancyBboxPatch((x0 - 0.15, 2.45), 2.9, top - 2.45, boxstyle="round,pad=0.05",
                                    fc="none", ec="#888888", ls="--"))
        side = x0 - 0.3 if x0 == 0.0 else x0 + 2.9  # outside each stack, clear of the arrow
        ax.text(side, (2.45 + top) / 2, "× N", ha="right" if x0 == 0.0 else "left", va="center", fontsize=10)
    ax.add_patch(FancyArrowPatch((2.75, 5.5), (3.45, 4.75), arrowstyle="-|>", mutation_scale=12,
                                 color="#555555", connectionstyle="arc3,rad=-0.2"))
    ax.text(3.1, 5.4, "keys,\nvalues", fontsize=7.5, ha="center")
    ax.text(1.3, 6.35, "Encoder", ha="center", fontsize=11, weight="bold")
    ax.text(4.9, 8.95, "Decoder → next-token probabilities", ha="center", fontsize=11, weight="bold")
    ax.text(3.1, -0.55, "Chapter 10 trains the whole model", ha="center", fontsize=9, style="italic",
            color="#f08c00" if highlight == 10 else "#555555")
    ax.set_xlim(-0.8, 6.5)
    ax.set_ylim(-0.8, 9.3)
    ax.axis("off")
    return ax.figure
