"""Chapter 11's measured comparison: chapter 10's GPT-style character model against the modern one.

Both are trained by chapter 10's `course.train.fit` on Tiny Shakespeare with the same schedule,
batches and seed, at nearly the same parameter count (0.80M), built from the course's own pieces
(chapter 4's attention in both; no fused kernels), one after the other on one machine. `VARIANTS`
names the runs: ``gpt`` (chapter 10's `DecoderLM`), ``modern`` (chapter 11's `ModernLM`), and
single-change ablations of the modern model, each keeping the parameter count within 2%:

* ``sinusoidal``: no rotation in attention; chapter 3's sinusoidal table added to the embedding,
  initialised and scaled as chapter 10's model does it;
* ``scaled``: the control for ``sinusoidal``: rotation kept, the embedding initialised and scaled as
  there, no table (so the two differ only in the positions);
* ``layernorm``: chapter 6's LayerNorm (with its bias) in place of every RMSNorm;
* ``gelu``: chapter 7's GELU FeedForward (two matrices of d_ff = 576, with its biases) in place of
  SwiGLU (three of 384);
* ``mha`` and ``mqa``: 4 and 1 key/value heads in place of 2 (d_ff 341 and 405 keep the count);
* ``groups``: the modern model trained by AdamW on exercise 11.5's groups (`decay_groups`: decay on the
  linear layers' weights only, so not on the tied embedding) in place of chapter 10's rule (every
  tensor of two or more axes, the tied embedding included);
* ``adam_l2``: as ``groups``, but Adam with the decay folded into the gradient (L2,
  ``torch.optim.Adam(weight_decay=...)``) in place of AdamW's decoupled decay.

Every run records, at each evaluation, the root mean square of the linear layers' weights and of the
embedding (``weight_rms``: what the decay acts on).

Run from the repository root (the book trains nothing long; it shows the recorded file)::

    python -m course.modern_lm --data data/tinyshakespeare.txt --json course/runs/modern_vs_gpt_cpu.json

``--update`` keeps the runs already in the file and adds these; ``--seeds 1 2 --variants modern gpt
sinusoidal scaled gelu --update`` (as recorded) adds runs of those variants from other seeds (the
initialisation, the training batches and the validation sample), named ``"modern seed 1"`` and so on.
``--repeat`` records the runs under ``"repeats"`` instead, to check that a run trained again
reproduces the recorded one. The record was made by four commands, each adding to the file: every
variant but ``scaled``, ``groups`` and ``adam_l2`` at seed 1337; ``scaled``; ``--seeds 1 2`` for
``modern gpt sinusoidal scaled gelu``; then, two days later on another machine (the runs made since
name theirs), ``--seeds 1337 1 2`` for ``groups adam_l2``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

import course.train as engine
from course.data import DEFAULT_PATH, SHA256, CharCorpus, load_text
from course.models import DecoderLM, DecoderLMConfig
from course.parts import Parts
from course.reference.add_norm import LayerNorm
from course.reference.feed_forward import FeedForward
from course.reference.positional_encoding import PositionalEncoding
from course.train import History, TrainConfig, cpu_name, fit, load_average, omp_wait_policy

try:  # chapter 11's answers, which the comparison's runs are made of; a student edition holds them once
    import course.reference.modern as modern  # chapter 11 is due, and `train_yours` needs only the learner's
except ModuleNotFoundError as missing:
    if missing.name != "course.reference.modern":
        raise
    modern = None


@dataclass
class Variant:
    """One run: the modern model's config, and what the ablation changes (None: nothing)."""

    config: modern.ModernConfig
    change: str | None = None           # "sinusoidal", "scaled", "layernorm" or "gelu"
    gelu_d_ff: int = 576
    optimizer: str = "chapter 10"       # "chapter 10" (fit's AdamW), "groups" or "adam_l2" (see `optimizer_of`)


#: the comparison's model: the fields of chapter 11's ModernConfig that differ from its defaults
SHAPE = {"vocab_size": 69, "d_model": 128, "num_heads": 4, "num_kv_heads": 2, "num_layers": 4, "d_ff": 384}
BASE = None if modern is None else modern.ModernConfig(**SHAPE)
VARIANTS: dict[str, Variant | None] = {} if modern is None else {
    "gpt": None,                                         # chapter 10's DecoderLM: DecoderLMConfig below
    "modern": Variant(BASE),
    "sinusoidal": Variant(BASE, "sinusoidal"),
    "scaled": Variant(BASE, "scaled"),
    "layernorm": Variant(BASE, "layernorm"),
    "gelu": Variant(BASE, "gelu"),
    "mha": Variant(replace(BASE, num_kv_heads=4, d_ff=341)),
    "mqa": Variant(replace(BASE, num_kv_heads=1, d_ff=405)),
    "groups": Variant(BASE, optimizer="groups"),
    "adam_l2": Variant(BASE, optimizer="adam_l2"),
}
GPT = DecoderLMConfig(vocab_size=69, d_model=128, num_heads=4, num_layers=4, d_ff=512, dropout=0.0, max_len=64)
# nanoGPT's CPU schedule at half its steps (chapter 10's nanogpt-cpu preset, 1,000 steps)
TRAIN = TrainConfig(steps=1000, batch_size=12, max_lr=1e-3, min_lr=1e-4, warmup_steps=50, weight_decay=0.1,
                    betas=(0.9, 0.99), eval_every=100, eval_batches=20, seed=1337, threads=1, progress=False)


class _Positions(nn.Module):
    """An embedding scaled by sqrt(d_model), then (with `max_len`) chapter 3's sinusoidal table
    added, as chapter 10's model has them: with the embedding initialised N(0, 1/d_model), tokens
    (size 1) and positions (size about 0.7) start on the same scale: ids (batch, n) -> (batch, n, d_model)."""

    def __init__(self, embedding: nn.Embedding, max_len: int | None) -> None:
        super().__init__()
        self.embedding = embedding
        self.positions = None if max_len is None else PositionalEncoding(embedding.embedding_dim, max_len=max_len)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embedding(ids) * self.embedding.embedding_dim ** 0.5
        return x if self.positions is None else self.positions(x)


@contextmanager
def rotation_off(off: bool) -> Iterator[None]:
    """While inside, `course.reference.modern`'s attention rotates nothing (the sinusoidal ablation)."""
    rotate = modern.apply_rope
    if off:
        modern.apply_rope = lambda x, positions, base=10000.0: x
    try:
        yield
    finally:
        modern.apply_rope = rotate


@contextmanager
def optimizer_of(kind: str, parts: Parts | None = None) -> Iterator[None]:
    """While inside, chapter 10's `fit` builds the optimiser `kind` names: "chapter 10" its own (AdamW,
    decay on every tensor of two or more axes); "groups" AdamW on exercise 11.5's `decay_groups`;
    "adam_l2" Adam on the same groups, each group's decay folded into its gradient (L2). All three are
    PyTorch's fused CPU kernels with fit's learning rate, betas and eps; with `parts`, "groups" is
    `parts.AdamW` on `parts.decay_groups` (a learner's own, from `course.learner.learner_parts`)."""
    made = engine.make_optimizer
    if kind != "chapter 10":
        def make(model: nn.Module, config: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
            if parts is not None and kind == "groups":
                return parts.AdamW(parts.decay_groups(model, config.weight_decay), lr=config.max_lr,
                                   betas=config.betas, eps=config.eps)
            groups = modern.decay_groups(model, config.weight_decay)
            kind_of = torch.optim.Adam if kind == "adam_l2" else torch.optim.AdamW
            return kind_of(groups, lr=config.max_lr, betas=config.betas, eps=config.eps,
                           fused=device.type in ("cuda", "cpu"))
        engine.make_optimizer = make
    try:
        yield
    finally:
        engine.make_optimizer = made


def weight_rms(model: nn.Module) -> dict[str, float]:
    """The root mean square of the linear layers' weights (a tied output layer's left out) and of the
    embedding's table."""
    embedding = getattr(model.embedding, "embedding", model.embedding).weight     # _Positions holds the table
    linear = [m.weight for m in model.modules() if isinstance(m, nn.Linear) and m.weight is not embedding]
    squares = sum(w.detach().double().pow(2).sum().item() for w in linear)
    return {"linear": round((squares / sum(w.numel() for w in linear)) ** 0.5, 5),
            "embedding": round(embedding.detach().double().pow(2).mean().sqrt().item(), 5)}


def build(name: str, vocab_size: int, block_size: int, seed: int) -> nn.Module:
    """The model of VARIANTS[name] for `vocab_size`, initialised from `seed`: embeddings N(0, 0.02^2)
    for the modern models (GPT-2's scale; nn.Embedding's own N(0, 1) would make the tied output's
    first logits about sqrt(d_model) = 11 times too large)."""
    torch.manual_seed(seed)
    variant = VARIANTS[name]
    if variant is None:
        return DecoderLM(replace(GPT, vocab_size=vocab_size, max_len=block_size))
    model = modern.ModernLM(replace(variant.config, vocab_size=vocab_size))
    nn.init.normal_(model.embedding.weight, std=0.02)
    d = variant.config.d_model
    if variant.change in ("sinusoidal", "scaled"):
        nn.init.normal_(model.embedding.weight, std=d ** -0.5)
        model.embedding = _Positions(model.embedding, block_size if variant.change == "sinusoidal" else None)
    for layer in model.layers:
        if variant.change == "layernorm":
            layer.norm1, layer.norm2 = LayerNorm(d), LayerNorm(d)
        if variant.change == "gelu":
            layer.ffn = FeedForward(d, variant.gelu_d_ff, activation="gelu")
    if variant.change == "layernorm":
        model.norm = LayerNorm(d)
    return model


def train(name: str, corpus: CharCorpus, config: TrainConfig = TRAIN, block_size: int = 64) -> dict:
    """Train VARIANTS[name] with chapter 10's fit; returns its record (parameters, val curve, seconds)."""
    model = build(name, corpus.vocab_size, block_size, config.seed)
    modern_model = VARIANTS[name] is not None

    def get_batch(split: str, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return corpus.batch(split, block_size, config.batch_size, generator)

    def loss_fn(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        logits = model(x)[0] if modern_model else model(x)             # ModernLM returns (logits, caches)
        return F.cross_entropy(logits.flatten(0, 1), y.flatten())

    rms = [(0, weight_rms(model))]

    def record_rms(done: int, history: object) -> None:
        if done % config.eval_every == 0 or done == config.steps:
            rms.append((done, weight_rms(model)))

    before = load_average()
    kind = VARIANTS[name].optimizer if modern_model else "chapter 10"
    with rotation_off(name == "sinusoidal"), optimizer_of(kind):
        history = fit(model, get_batch, loss_fn, config, count=lambda batch: batch[1].numel(),
                      callback=record_rms if config.eval_every else None)
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": cpu_name(), "seed": config.seed,
            "parameters": sum(p.numel() for p in model.parameters()), "val": history.val,
            "val_seconds": [round(s, 2) for s in history.val_seconds], "seconds": round(history.seconds, 2),
            "tokens_per_second": round(history.tokens_per_second), "final_val": round(history.val[-1][1], 4),
            "load_before": before, "load_after": load_average(), "optimizer": kind,
            "weight_rms": [[step, values] for step, values in rms]}


def train_yours(corpus: CharCorpus, parts: Parts, config: TrainConfig = TRAIN, block_size: int = 64,
                callback: Callable[[int, History], None] | None = None) -> tuple[nn.Module, History]:
    """The ``groups`` run with the pieces of `parts` (a learner's, from `course.learner.learner_parts`):
    their `ModernLM` of the comparison's shape (so their block, attention, RMSNorm and rotation), its
    embedding drawn N(0, 0.02^2) as every recorded modern run's, their `AdamW` on their
    `decay_groups`, chapter 10's `fit` with their `train_step`, `lr_at`, `evaluate` and `cross_entropy`.
    Returns (model, history)."""
    if not hasattr(parts, "ModernLM"):
        raise ValueError("no ModernLM to train: yours does not pass its visible tests yet, and chapter 11's "
                         "answers are not published yet (parts.reasons says why)")
    shape = sys.modules[parts.ModernLM.__module__].ModernConfig  # its own chapter's dataclass (the answer cell's)
    torch.manual_seed(config.seed)
    model = parts.ModernLM(shape(**{**SHAPE, "vocab_size": corpus.vocab_size}))  # the "groups" run's shape
    nn.init.normal_(model.embedding.weight, std=0.02)

    def get_batch(split: str, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return corpus.batch(split, block_size, config.batch_size, generator)

    def loss_fn(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return parts.cross_entropy(model(x)[0].flatten(0, 1), y.flatten())  # (batch * block, vocab), (batch * block,)

    with optimizer_of("groups", parts):
        history = fit(model, get_batch, loss_fn, config, count=lambda batch: batch[1].numel(), parts=parts,
                      callback=callback)
    return model, history


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=DEFAULT_PATH)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--steps", type=int, default=TRAIN.steps)
    parser.add_argument("--threads", type=int, default=TRAIN.threads)
    parser.add_argument("--seeds", nargs="+", type=int, default=[TRAIN.seed],
                        help=f"seeds of the initialisation and batches (default {TRAIN.seed}; others are recorded "
                             "as '<variant> seed <n>')")
    parser.add_argument("--json", help="write the runs here")
    parser.add_argument("--update", action="store_true", help="keep the other runs already in --json")
    parser.add_argument("--repeat", action="store_true",
                        help="record these runs under 'repeats' (named '<variant> seed <n>'), not 'runs': a run "
                             "trained again with the same seed, to see whether it gives the same result")
    args = parser.parse_args(argv)
    corpus = CharCorpus(load_text(args.data, expected=SHA256))
    config = replace(TRAIN, steps=args.steps, threads=args.threads)
    record = {"task": "modern_vs_gpt", "machine": cpu_name(), "cores": os.cpu_count(), "threads": config.threads,
              "torch": torch.__version__,
              "omp_wait_policy": omp_wait_policy(),
              "train": asdict(config), "block_size": 64, "gpt": asdict(GPT),
              "variants": {n: None if v is None else {**asdict(v.config), "change": v.change, "optimizer": v.optimizer}
                           for n, v in VARIANTS.items()},
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": {}}
    if args.update and args.json and os.path.exists(args.json):
        with open(args.json) as f:
            kept = json.load(f)
        record["runs"] = kept["runs"]
        record["machine"] = kept["machine"]  # the runs' machine where a run does not name its own
        if "repeats" in kept:
            record["repeats"] = kept["repeats"]
    for seed in args.seeds:
        for name in args.variants:
            run = train(name, corpus, replace(config, seed=seed))
            if args.repeat:
                key = f"{name} seed {seed}"
                record.setdefault("repeats", {})[key] = run
            else:
                key = name if seed == TRAIN.seed else f"{name} seed {seed}"
                record["runs"][key] = run
            print(f"{key:<18} {run['parameters']:>8,} parameters  val {run['final_val']:.4f}  {run['seconds']:6.1f} s  "
                  f"{run['tokens_per_second']:>6,} tokens/s  load {run['load_before']}", flush=True)
            if args.json:                                    # after every run: a long job interrupted keeps its runs
                with open(args.json, "w") as f:
                    json.dump(record, f, indent=1)
    return record


if __name__ == "__main__":
    main()
