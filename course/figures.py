"""Figures drawn from code: the architecture maps (chapters 0 to 11), and chapter 10's and 11's
figures of formulas and of recorded runs (`course.runs`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path

# ---------------------------------------------------------------------------
# architecture_map: the encoder-decoder Transformer as the course builds it
# ---------------------------------------------------------------------------
#
# Each column is a table of steps, bottom to top. A step is a plain box, the
# text the column starts from, or a stack of N identical pre-LN layers: each
# sub-layer of a layer is drawn as  LayerNorm -> sub-layer -> (+), with the
# residual arrow from the sub-layer's input around both boxes into (+).
# `shape` is the shape of the tensor on the arrow leaving a step.

_IDS = "token ids  $(B, S)$"
_ACTS = r"$(B, S, d_{\mathrm{model}})$"
_VOCAB = r"$(B, S, |\mathcal{V}|)$"


@dataclass(frozen=True)
class _Step:
    kind: str  # "input" (plain text), "box", or "stack" (N pre-norm layers of `sublayers`)
    label: str = ""
    chapter: int | None = None
    shape: str = ""
    sublayers: tuple[tuple[str, str, int], ...] = ()  # (key, label, chapter) of each sub-layer
    norm: tuple[str, int] = ("LayerNorm (ch. 6)", 6)  # a stack's norm before each sub-layer: (label, chapter)


_ENCODER = (
    _Step("input", "source text"),
    _Step("box", "Tokenize source (ch. 1)", 1, shape=_IDS),
    _Step("box", "Embedding (ch. 2)\n+ positions (ch. 3)", 2, shape=_ACTS),
    _Step("stack", sublayers=(("enc_self", "Multi-head self-attention\n(ch. 4, 5)", 4),
                             ("enc_ffn", "Feed-forward (ch. 7)", 7))),
    _Step("box", "Final LayerNorm (ch. 6)", 6, shape=_ACTS),
)
_DECODER = (
    _Step("input", "target text, shifted right"),
    _Step("box", "Tokenize target (ch. 1)", 1, shape=_IDS),
    _Step("box", "Embedding (ch. 2)\n+ positions (ch. 3)", 2, shape=_ACTS),
    _Step("stack", sublayers=(("dec_self", "Masked self-attention\n(ch. 8)", 8),
                             ("dec_cross", "Cross-attention\n(ch. 8)", 8),
                             ("dec_ffn", "Feed-forward (ch. 7)", 7))),
    _Step("box", "Final LayerNorm (ch. 6)", 6, shape=_ACTS),
    _Step("box", "Linear (ch. 9)", 9, shape="logits  " + _VOCAB),
    _Step("box", "Softmax (ch. 9)", 9, shape="next-token probabilities  " + _VOCAB),
)

# Geometry, in inches: the map is drawn at one data unit per inch.
_BOX_W = 1.85                       # width of every box
_BOX_H = 0.32                       # a one-line box
_BOX_H2 = 0.46                      # a two-line box
_INPUT_H = 0.18                     # the line of text a column starts from
_GAP = 0.25                         # vertical room for an arrow between two boxes
_SHAPE_GAP = 0.36                   # ... for an arrow with a shape written beside it
_ADD_R = 0.1                        # radius of a (+) node
_RESIDUAL_DX = _BOX_W / 2 + 0.12    # residual paths run this far from the column's centre
_FRAME = _RESIDUAL_DX + 0.15        # half the width of a dashed "× N" frame
_COLUMN_GAP = 0.75                  # between the two frames, for the encoder-to-decoder arrow
_MARGIN = 0.4                       # outside the frames, for "× N"
_COLUMNS = {                        # title: (centre x, steps, side of the residual paths; -1 left)
    "Encoder": (0.0, _ENCODER, -1),
    "Decoder": (2 * _FRAME + _COLUMN_GAP, _DECODER, +1),
}

# Colours and font sizes
_LIT, _ALL, _OFF = "#f4c27a", "#cfe0f3", "#eeeeee"  # box fill: highlighted / no highlight / other chapters
_EDGE, _EDGE_OFF = "#555555", "#bbbbbb"
_TEXT, _TEXT_OFF = "black", "#999999"
_FLOW = "#666666"                                   # data-flow arrows
_ACCENT = "#e8590c"                                 # highlighted arrows and (+) nodes
_FONT, _SMALL, _SHAPE_FONT = 9, 8, 9                # box labels, side notes, tensor shapes


def _lit(chapter: int | None, highlight: int | None) -> bool:
    """Is a part built in `chapter` drawn in colour when the map highlights `highlight`?"""
    if highlight is None or highlight == 10:  # chapter 10 trains every part
        return True
    return (chapter == highlight
            or (highlight == 5 and chapter == 4)   # multi-head attention is made of chapter 4's heads
            or (highlight == 3 and chapter == 2))  # positions are added where embeddings are made


def _box(ax, cx, y, label, on, highlight):
    """A rounded box centred on cx with its bottom at y; returns its height."""
    h = _BOX_H2 if "\n" in label else _BOX_H
    fill = (_LIT if highlight is not None else _ALL) if on else _OFF
    ax.add_patch(FancyBboxPatch((cx - _BOX_W / 2, y), _BOX_W, h, fc=fill, ec=_EDGE if on else _EDGE_OFF,
                                lw=1.1, boxstyle="round,pad=0,rounding_size=0.06"))
    ax.text(cx, y + h / 2, label, ha="center", va="center", fontsize=_FONT,
            color=_TEXT if on else _TEXT_OFF, linespacing=1.15)
    return h


def _arrow(ax, points, colour=_FLOW, lw=1.1):
    """An arrow along a polyline of (x, y) points, head at the last one."""
    path = Path(points, [Path.MOVETO] + [Path.LINETO] * (len(points) - 1))
    ax.add_patch(FancyArrowPatch(path=path, arrowstyle="-|>", mutation_scale=9, color=colour, lw=lw,
                                 shrinkA=0, shrinkB=0, joinstyle="miter"))


def _add_node(ax, x, y, colour, fill):
    """The (+) where a residual path rejoins the data flow."""
    ax.add_patch(Circle((x, y), _ADD_R, fc=fill, ec=colour, lw=1.2, zorder=3))
    arm = 0.6 * _ADD_R
    ax.plot([x - arm, x + arm], [y, y], color=colour, lw=1.2, zorder=4, solid_capstyle="butt")
    ax.plot([x, x], [y - arm, y + arm], color=colour, lw=1.2, zorder=4, solid_capstyle="butt")


def _shape(ax, cx, y, text, side):
    """The shape of the tensor on the flow arrow at height y, written on its `side` (+1 right)."""
    ax.text(cx + side * 0.08, y, text, ha="left" if side > 0 else "right", va="center",
            fontsize=_SHAPE_FONT, color="#333333", math_fontfamily="cm")  # the book's MathJax font


def _stack(ax, cx, y, step, side, highlight, where):
    """N pre-norm layers of `step`'s sub-layers from height y up; records each sub-layer box in `where`;
    returns the top."""
    bottom = y
    norm_label, norm_chapter = step.norm
    norm_on = _lit(norm_chapter, highlight)
    res_colour = (_ACCENT if highlight == 6 else _EDGE) if norm_on else _EDGE_OFF
    for key, label, chapter in step.sublayers:
        branch = y + _GAP / 2                    # the sub-layer's input splits here
        ax.add_patch(Circle((cx, branch), 0.03, color=res_colour, zorder=3))
        _arrow(ax, [(cx, y), (cx, y + _GAP)])
        y += _GAP
        y += _box(ax, cx, y, norm_label, norm_on, highlight)
        _arrow(ax, [(cx, y), (cx, y + _GAP)])
        y += _GAP
        h = _box(ax, cx, y, label, _lit(chapter, highlight), highlight)
        where[key] = (cx, y, h)
        y += h
        add_y = y + _GAP + _ADD_R
        _arrow(ax, [(cx, y), (cx, add_y - _ADD_R)])
        _add_node(ax, cx, add_y, res_colour, _LIT if highlight == 6 else "white")
        ax.text(cx - side * (_ADD_R + 0.08), add_y, "add (ch. 6)", ha="right" if side > 0 else "left",
                va="center", fontsize=_SMALL, color=_TEXT if norm_on else _TEXT_OFF)
        rx = cx + side * _RESIDUAL_DX            # the residual path, around LN and sub-layer
        _arrow(ax, [(cx, branch), (rx, branch), (rx, add_y), (cx + side * _ADD_R, add_y)],
               colour=res_colour, lw=1.3)
        y = add_y + _ADD_R
    top = y + 0.08
    ax.add_patch(FancyBboxPatch((cx - _FRAME, bottom + 0.04), 2 * _FRAME, top - bottom - 0.04,
                                boxstyle="round,pad=0,rounding_size=0.12", fc="none", ec="#888888", ls="--"))
    ax.text(cx + side * (_FRAME + 0.1), (bottom + top) / 2, "× N", fontsize=10, va="center",
            ha="left" if side > 0 else "right")
    return top


def _column(ax, cx, steps, side, highlight, where):
    """Draws one column of the map from y = 0 up; returns the height of its last arrow's head."""
    y, gap = 0.0, _GAP
    for i, step in enumerate(steps):
        if i:  # the arrow from the step below into this one
            _arrow(ax, [(cx, y), (cx, y + gap)])
            y += gap
        if step.kind == "input":
            ax.text(cx, y, step.label, ha="center", va="bottom", fontsize=_SMALL, style="italic",
                    color="#444444")
            y += _INPUT_H
        elif step.kind == "box":
            y += _box(ax, cx, y, step.label, _lit(step.chapter, highlight), highlight)
        else:
            y = _stack(ax, cx, y, step, side, highlight, where)
        gap = _SHAPE_GAP if step.shape else _GAP
        if step.shape:
            _shape(ax, cx, y + gap / 2, step.shape, -side)  # opposite the residual paths
    return y


def _encoder_output(ax, cx, top, cross, highlight):
    """The arrow from the encoder's final LayerNorm into the decoder's cross-attention box."""
    out_y = top + _SHAPE_GAP
    cross_x, cross_y, cross_h = cross
    mid_x, cross_mid = (cx + cross_x) / 2, cross_y + cross_h / 2
    on = _lit(8, highlight)
    _arrow(ax, [(cx, top), (cx, out_y), (mid_x, out_y), (mid_x, cross_mid),
                (cross_x - _BOX_W / 2, cross_mid)],
           colour=(_ACCENT if highlight == 8 else _EDGE) if on else _EDGE_OFF, lw=1.3)
    colour = _TEXT if on else _TEXT_OFF
    ax.text(mid_x - 0.06, out_y + 0.04, "keys, values", fontsize=_SMALL, ha="right", va="bottom",
            color=colour)
    ax.text(cross_x - 0.08, cross_y - _GAP / 2, "queries", fontsize=_SMALL, ha="right", va="center",
            color=colour)
    return out_y


def _map_axes(ax: plt.Axes | None) -> tuple[plt.Axes, bool]:
    """`ax`, or the axes of a new figure (True: the figure is the map's own, sized to it by `_fit`)."""
    if ax is not None:
        return ax, False
    return plt.figure().add_axes((0, 0, 1, 1)), True


def _fit(ax: plt.Axes, centres: list[float], y0: float, top: float, own: bool) -> plt.Figure:
    """Frame columns centred at `centres` from y0 to `top` (plus room for the titles), one unit per inch."""
    x0, x1 = min(centres) - _FRAME - _MARGIN, max(centres) + _FRAME + _MARGIN
    y1 = top + 0.45
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    ax.axis("off")
    if own:
        ax.figure.set_size_inches(x1 - x0, y1 - y0)
    return ax.figure


def architecture_map(highlight: int | None = None, ax: plt.Axes | None = None) -> plt.Figure:
    """The encoder-decoder Transformer as the course builds it, bottom to top.

    `highlight` is a chapter number: its parts are coloured, the rest grey,
    so each chapter can show where it sits (chapter 10, training, colours
    everything). The blocks are pre-LN, as the course builds them
    (chapter 6): each sub-layer reads LayerNorm(x) and its output is added
    to x, and a final LayerNorm closes each stack. Shapes are written beside
    the data flow: B batch, S sequence length, |V| vocabulary size.
    """
    ax, own = _map_axes(ax)
    where: dict[str, tuple[float, float, float]] = {}
    tops = {title: _column(ax, cx, steps, side, highlight, where)
            for title, (cx, steps, side) in _COLUMNS.items()}
    for title, (cx, _, _) in _COLUMNS.items():
        top = tops[title]
        if title == "Encoder":   # its output becomes the keys and values of every cross-attention
            tops[title] = _encoder_output(ax, cx, top, where["dec_cross"], highlight)
        else:                    # the decoder's output: an arrow out of the softmax
            _arrow(ax, [(cx, top), (cx, top + _SHAPE_GAP)])
            tops[title] = top + _SHAPE_GAP
        ax.text(cx, tops[title] + 0.12, title, ha="center", va="bottom", fontsize=11, weight="bold")
    centre = sum(cx for cx, _, _ in _COLUMNS.values()) / len(_COLUMNS)
    ax.text(centre, -0.3, "Chapter 10 trains the whole model", ha="center", va="top", fontsize=9,
            style="italic", weight="bold" if highlight == 10 else "normal",
            color=_ACCENT if highlight == 10 else "#555555")
    return _fit(ax, [cx for cx, _, _ in _COLUMNS.values()], -0.7, max(tops.values()), own)


# ---------------------------------------------------------------------------
# decoder_only_map: chapter 10's GPT-style decoder beside chapter 11's modern one
# ---------------------------------------------------------------------------

_MODERN = 11
_GPT_DECODER = (
    _Step("input", "text"),
    _Step("box", "Tokenize (ch. 1)", 1, shape=_IDS),
    _Step("box", "Embedding × $\\sqrt{d}$ (ch. 2)\n+ positions (ch. 3)", 2, shape=_ACTS),
    _Step("stack", sublayers=(("gpt_self", "Masked multi-head\nself-attention (ch. 8)", 8),
                             ("gpt_ffn", "Feed-forward, ReLU (ch. 7)", 7))),
    _Step("box", "Final LayerNorm (ch. 6)", 6, shape=_ACTS),
    _Step("box", "Linear (ch. 9)", 9, shape="logits  " + _VOCAB),
)
_MODERN_DECODER = (
    _Step("input", "text"),
    _Step("box", "Tokenize (ch. 1)", 1, shape=_IDS),
    _Step("box", "Embedding (ch. 2)\nno position table", _MODERN, shape=_ACTS),
    _Step("stack", norm=("RMSNorm (11.1)", _MODERN),
          sublayers=(("modern_self", "Grouped-query attention\n+ RoPE (11.2, 11.3)", _MODERN),
                     ("modern_ffn", "SwiGLU (ch. 7)", 7))),
    _Step("box", "Final RMSNorm (11.1)", _MODERN, shape=_ACTS),
    _Step("box", "Linear, no bias (11.7)", _MODERN, shape="logits  " + _VOCAB),
)


def decoder_only_map(ax: plt.Axes | None = None) -> plt.Figure:
    """Chapter 10's GPT-style decoder-only model (left) beside chapter 11's modern one (right), bottom
    to top, the parts chapter 11 changes coloured. Both are pre-norm stacks of N layers; shapes as in
    `architecture_map` (B batch, S sequence length, |V| vocabulary size)."""
    ax, own = _map_axes(ax)
    columns = {"GPT-style (ch. 10)": (0.0, _GPT_DECODER, -1),
               "Modern, Llama-style (ch. 11)": (2 * _FRAME + _COLUMN_GAP, _MODERN_DECODER, +1)}
    tops = {}
    for title, (cx, steps, side) in columns.items():
        top = _column(ax, cx, steps, side, _MODERN, {})
        _arrow(ax, [(cx, top), (cx, top + _SHAPE_GAP)])
        tops[title] = top + _SHAPE_GAP
        ax.text(cx, tops[title] + 0.12, title, ha="center", va="bottom", fontsize=11, weight="bold")
    return _fit(ax, [cx for cx, _, _ in columns.values()], -0.3, max(tops.values()), own)


# ---------------------------------------------------------------------------
# Chapter 10: the gradient norm of recorded runs
# ---------------------------------------------------------------------------

def grad_norms(records: dict[str, dict], threshold: float = 1.0) -> plt.Figure:
    """The gradient norm before clipping against the optimizer step, for recorded runs of
    `course.char_lm` (history.grad_norm: optimizer step i * history.curve_every at index i), with the
    clipping threshold; `records` maps a label to a record."""
    fig, ax = plt.subplots(figsize=(7, 3))
    for label, record in records.items():
        history = record["history"]
        steps = np.arange(len(history["grad_norm"])) * history.get("curve_every", 1)
        ax.plot(steps, history["grad_norm"], lw=1, marker=".", ms=3, label=label)
    ax.axhline(threshold, color="black", ls=":", lw=1, label=f"clipping threshold ({threshold:g}): above it, clipped")
    ax.set(xlabel="optimizer step", ylabel="gradient norm before clipping", yscale="log")
    ticks = [t for t in (0.25, 0.5, 1, 2, 4, 8, 16) if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------
# Chapter 11: rotary scores, shared key/value heads, cache sizes, parameters
# ---------------------------------------------------------------------------

def rope_scores(rope: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], n: int = 40, d: int = 64,
                far: int = 1000, base: float = 10000.0, seed: int = 0) -> plt.Figure:
    """Left: the score (q R_m)(k R_n)^T of one random query and key, rotated by `rope` (apply_rope's
    signature, default base), at every pair of positions m, n < `n`: constant along each diagonal.
    Right: RoFormer's long-range decay for width `d` and `base` (its section 3.4.3): the bound
    (2/d) sum_j |S_j|, S_j = sum_{i<j} exp(1j * r * theta_i), against the offset r, and the score of
    q = k = (1, ..., 1) rotated by `rope`, divided by its value at offset 0."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, d, generator=g), torch.randn(1, d, generator=g)
    positions = torch.arange(n)
    scores = rope(q.expand(n, d), positions) @ rope(k.expand(n, d), positions).T      # (m, n)
    offsets = np.arange(far + 1)
    theta = base ** (-2 * np.arange(d // 2) / d)
    partial = np.cumsum(np.exp(1j * offsets[:, None] * theta[None, :]), axis=1)       # S_1 .. S_{d/2}
    bound = np.abs(partial).sum(axis=1) * 2 / d                                      # d / 4 + 1/2 at r = 0
    ones = torch.ones(far + 1, d)
    aligned = (rope(ones, torch.arange(far + 1)) @ torch.ones(d)) / d                  # key at position 0

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.9), gridspec_kw={"width_ratios": [1, 1.25]})
    limit = scores.abs().max().item()
    image = left.imshow(scores.numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit, origin="upper")
    fig.colorbar(image, ax=left, fraction=0.046, pad=0.04)
    left.set(xlabel="key position n", ylabel="query position m",
             title="score of one query and one key:\none value along each diagonal m - n")
    right.plot(offsets, bound / bound[0], label=r"RoFormer's bound $\frac{2}{d}\sum_j |S_j|$")
    right.plot(offsets, aligned.numpy(), lw=0.8, label="score of q = k = (1, ..., 1)")
    right.axhline(0, color="grey", lw=0.6)
    right.set(xlabel="offset m - n", ylabel="divided by its value at offset 0",
              title=f"long-range decay (d = {d}, base {base:g})")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


def kv_head_sharing(num_heads: int = 8, num_kv_heads: int = 2) -> plt.Figure:
    """Which key/value head each query head reads: repeat_interleave (head j reads j // (h/g), the
    grouping of grouped-query attention) beside repeat (head j reads j % g, the wrong order)."""
    group = num_heads // num_kv_heads
    colours = plt.get_cmap("tab10").colors
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.6))
    readings = {"k.repeat_interleave(h // g, dim=1): query head j reads key/value head j // (h/g)":
                lambda j: j // group,
                "k.repeat(1, h // g, 1, 1): query head j reads j % g (wrong)": lambda j: j % num_kv_heads}
    for ax, (title, reads) in zip(axes, readings.items()):
        for j in range(num_heads):
            kv = reads(j)
            x_q, x_kv = j, (kv + 0.5) * num_heads / num_kv_heads - 0.5
            ax.add_patch(FancyBboxPatch((x_q - 0.35, 1.6), 0.7, 0.5, boxstyle="round,pad=0.02",
                                        fc=colours[kv % 10], alpha=0.35 if reads(j) == j // group else 0.8,
                                        ec="black", lw=0.8))
            ax.text(x_q, 1.85, f"q{j}", ha="center", va="center", fontsize=8)
            ax.plot([x_q, x_kv], [1.6, 0.5], color=colours[kv % 10], lw=1.2)
        for kv in range(num_kv_heads):
            x_kv = (kv + 0.5) * num_heads / num_kv_heads - 0.5
            ax.add_patch(FancyBboxPatch((x_kv - 0.9, 0.0), 1.8, 0.5, boxstyle="round,pad=0.02",
                                        fc=colours[kv % 10], alpha=0.35, ec="black", lw=0.8))
            ax.text(x_kv, 0.25, f"key/value head {kv}", ha="center", va="center", fontsize=8)
        ax.set_xlim(-0.8, num_heads - 0.2)
        ax.set_ylim(-0.15, 2.25)
        ax.axis("off")
        ax.set_title(title, fontsize=8.5)
    fig.suptitle(f"{num_heads} query heads, {num_kv_heads} key/value heads (groups of {group}); dark: a query head "
                 "that reads another group's key/value head", fontsize=9.5)
    fig.tight_layout()
    return fig


def kv_cache_sizes(layers: int = 32, heads: int = 32, kv_heads: tuple[int, ...] = (32, 8, 1), d_head: int = 128,
                   bytes_per_number: int = 2, built: int = 8, context: int = 131_072,
                   weights_bytes: float | None = None, name: str = "Llama 3 8B") -> plt.Figure:
    """The KV cache of one sequence, 2 * layers * g * d_head * bytes_per_number bytes per token, against
    its length, for each g in `kv_heads` (g = heads: multi-head; 1: multi-query); `built` is the g the
    model `name` has; `weights_bytes` draws the weights' size for scale."""
    tokens = np.linspace(0, context, 257)
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for g in kv_heads:
        per_token = 2 * layers * g * d_head * bytes_per_number
        kind = "multi-head" if g == heads else "multi-query" if g == 1 else "grouped"
        label = f"{kind}, {g} key/value head{'s' * (g > 1)}: {per_token / 1024:g} KiB per token"
        if g == built:
            label += f" ({name} as built)"
        ax.plot(tokens / 1024, tokens * per_token / 2**30, lw=2.2 if g == built else 1.2, label=label)
    if weights_bytes:
        ax.axhline(weights_bytes / 2**30, color="black", ls=":", lw=1,
                   label=f"{name}'s weights in bfloat16 ({weights_bytes / 2**30:.1f} GiB)")
    ax.set(xlabel="tokens in the sequence (thousands)", ylabel="KV cache (GiB)",
           title=f"KV cache of one sequence: {name}'s shape ({layers} layers, {heads} query heads of {d_head}, "
                 f"{8 * bytes_per_number}-bit numbers)")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def parameter_shares(models: dict[str, dict[str, int]]) -> plt.Figure:
    """One horizontal bar per model, split into its parts' shares of its parameters (`models`: a
    model's name -> {part: parameters}); each part's count is written inside its share."""
    parts = list(dict.fromkeys(part for counts in models.values() for part in counts))
    colours = dict(zip(parts, plt.get_cmap("tab10").colors))
    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.75 * len(models)))
    for row, (name, counts) in enumerate(models.items()):
        total, left = sum(counts.values()), 0.0
        for part in parts:
            n = counts.get(part, 0)
            share = n / total
            if not share:
                continue
            ax.barh(row, share, left=left, color=colours[part], edgecolor="white",
                    label=part if row == 0 else None)
            amount = f"{n / 1e9:.2f}B" if n >= 1e8 else f"{n / 1e6:.2f}M" if n >= 1e5 else f"{n / 1e3:.1f}K"
            if share > 0.04:      # the part's name where it fits, else only its numbers (the legend names it)
                text = f"{part}\n{amount} ({share:.0%})" if share > 0.12 else f"{amount}\n{share:.0%}"
                ax.text(left + share / 2, row, text, ha="center", va="center", fontsize=7.5)
            left += share
    ax.set_yticks(range(len(models)), [f"{name}\n{sum(c.values()):,}" for name, c in models.items()], fontsize=8)
    ax.invert_yaxis()
    ax.set(xlim=(0, 1), xlabel="share of the parameters")
    ax.legend(fontsize=7.5, ncols=len(parts), loc="upper center", bbox_to_anchor=(0.5, -0.35 - 0.1 / len(models)),
              frameon=False)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------
# Chapter 11: the measured comparison (course/runs/modern_vs_gpt_cpu.json)
# ---------------------------------------------------------------------------

def _by_variant(record: dict) -> dict[str, dict[int, dict]]:
    """The record's runs as {variant: {seed: run}} ("modern seed 1" is variant "modern", seed 1)."""
    runs: dict[str, dict[int, dict]] = {}
    for key, run in record["runs"].items():
        runs.setdefault(key.split(" seed ")[0], {})[run["seed"]] = run
    return runs


def paired_differences(record: dict, baseline: str = "modern") -> dict[str, dict[int, float]]:
    """{variant: {seed: its final validation loss minus `baseline`'s at the same seed}}."""
    runs = _by_variant(record)
    return {name: {seed: run["final_val"] - runs[baseline][seed]["final_val"]
                   for seed, run in sorted(by_seed.items()) if seed in runs[baseline]}
            for name, by_seed in runs.items() if name != baseline}


def ablations(record: dict, large: list[str], small: list[str], curves: list[str] | None = None,
              baseline: str = "modern", first_seed: int = 1337) -> plt.Figure:
    """Left: the validation curves of the first run (seed `first_seed`) of each variant in `curves` (all
    by default). Middle and right: each variant's final validation loss minus `baseline`'s at the same
    seed, one marker per seed, the `large` differences and the `small` ones on their own, finer scale."""
    runs = _by_variant(record)
    differences = paired_differences(record, baseline)
    seeds = sorted({seed for by_seed in runs.values() for seed in by_seed}, key=lambda s: (s != first_seed, s))
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(12, 4), gridspec_kw={"width_ratios": [1.25, 0.8, 0.9]})
    for name in curves or list(runs):
        run = runs[name][first_seed]
        steps, val = zip(*run["val"])
        style = dict(lw=2.2) if name in ("gpt", baseline) else dict(lw=1, ls="--")
        left.plot(steps, val, label=f"{name} ({run['parameters'] / 1e6:.2f}M)", **style)
    left.set(xlabel="step", ylabel="validation loss (nats per character)", ylim=(1.6, 2.7),
             title=f"validation loss, seed {first_seed}")
    left.legend(fontsize=7.5, ncols=2)
    markers = "o^sDv"
    for ax, variants, title in ((middle, large, f"minus {baseline}'s, seed by seed (above 0: worse)"),
                                (right, small, "the small differences, on a finer scale")):
        for s, seed in enumerate(seeds):
            xs = [i + (s - (len(seeds) - 1) / 2) * 0.15 for i, name in enumerate(variants) if seed in differences[name]]
            ys = [differences[name][seed] for name in variants if seed in differences[name]]
            ax.scatter(xs, ys, marker=markers[s % len(markers)], s=28, zorder=3, label=f"seed {seed}")
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(range(len(variants)), variants, rotation=30, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(variants) - 0.4)
        ax.set_title(title, fontsize=9.5)
        ax.grid(axis="y", lw=0.3)
    middle.set_ylabel(f"final validation loss minus {baseline}'s")
    middle.set_ylim(0, None)
    middle.legend(fontsize=8)
    fig.tight_layout()
    return fig


def optimiser_runs(record: dict, names: dict[str, str]) -> plt.Figure:
    """Left: the validation curves of the variants in `names` (variant -> label), every seed; right: the
    root mean square of their linear layers' weights (the runs' `weight_rms`), where recorded."""
    runs = _by_variant(record)
    colours = dict(zip(names, plt.get_cmap("tab10").colors))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    for name, label in names.items():
        for i, (seed, run) in enumerate(sorted(runs[name].items())):
            steps, val = zip(*run["val"])
            left.plot(steps, val, color=colours[name], lw=1.2, label=label if i == 0 else None)
            if "weight_rms" in run:
                at, rms = zip(*((step, values["linear"]) for step, values in run["weight_rms"]))
                right.plot(at, rms, color=colours[name], lw=1.2, label=label if i == 0 else None)
    left.set(xlabel="step", ylabel="validation loss (nats per character)", title="validation loss, every seed")
    right.set(xlabel="step", ylabel="root mean square (log scale)", yscale="log",
              title="the linear layers' weights, every seed")
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig
