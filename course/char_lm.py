"""Chapter 10's run B: a character language model (`course.models.DecoderLM`) trained on a text file.

`CharLMConfig` holds the model's config and the training's; `PRESETS` names a few; `train_char_lm`
trains one with `course.train.fit`. The same code runs on a CPU, one GPU, or several under torchrun::

    python -m course.char_lm --preset cpu --data data/tinyshakespeare.txt
    python -m course.char_lm --preset gpu --data data/tinyshakespeare.txt --json run.json
    torchrun --nproc_per_node=2 -m course.char_lm --preset gpu --data data/tinyshakespeare.txt

A preset sets the model's shape and the training; any flag overrides it (`--d-model 64`,
`--batch-size 32`: every field of the two configs has one). With
`--fused 1`, self-attention uses F.scaled_dot_product_attention, LayerNorm F.layer_norm and the loss
F.cross_entropy (PyTorch's kernels, `course.models.use_fused_kernels`); without it the course's own
pieces do. The run prints validation loss against training seconds and tokens/s; `--json PATH`
writes the run (config, loss curve, samples, hardware, machine load); `--save PATH` writes the final
weights and the full history.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import torch
import torch.nn.functional as F

from course.data import DEFAULT_PATH, SHA256, CharCorpus, load_text
from course.models import DecoderLM, DecoderLMConfig, use_fused_kernels
from course.parts import Parts, reference_parts
from course.train import (
    History,
    TrainConfig,
    estimate_flops_per_token,
    fit,
    load_average,
    omp_wait_policy,
    setup_distributed,
)


@dataclass
class CharLMConfig:
    """A character-LM run: the model's shape (`DecoderLMConfig`; its vocab_size is the corpus's, its
    max_len the context: the length of the training windows), PyTorch's fused kernels or the course's
    pieces, and the training (`TrainConfig`: steps, batches, schedule, optimiser, device)."""

    # vocab_size: Tiny Shakespeare's 65 characters and chapter 1's 4 special tokens (build() takes the corpus's)
    model: DecoderLMConfig = field(default_factory=lambda: DecoderLMConfig(
        vocab_size=69, d_model=128, num_heads=4, num_layers=4, d_ff=512, dropout=0.0, max_len=64))
    fused: bool = False
    train: TrainConfig = field(default_factory=lambda: TrainConfig(
        steps=2000, batch_size=12, max_lr=1e-3, min_lr=1e-4, warmup_steps=100, weight_decay=0.1,
        betas=(0.9, 0.99), eval_every=250, eval_batches=20, seed=1337))

    @property
    def block_size(self) -> int:
        """The training windows' length: the model's context."""
        return self.model.max_len


def _preset(model: dict | None = None, fused: bool = False, **train) -> CharLMConfig:
    """A CharLMConfig that changes `model` and `train` fields of the default (nanoGPT's CPU run)."""
    default = CharLMConfig()
    return CharLMConfig(replace(default.model, **(model or {})), fused, replace(default.train, **train))


PRESETS: dict[str, CharLMConfig] = {
    # nanoGPT's README CPU run, shape and schedule (see course/runs/versus_nanogpt_cpu.json)
    "nanogpt-cpu": CharLMConfig(),
    # 2 CPU cores, 150 s: nanoGPT's shape, batch 16, a higher learning rate on a schedule that ends with
    # the 150 s, PyTorch's fused kernels
    "cpu": _preset(fused=True, batch_size=16, steps=1000, max_lr=3e-3, min_lr=3e-4, warmup_steps=30, eval_every=100,
                   threads=2, time_limit=150, schedule="time"),
    # one H100, 60 s (not yet run on one: chosen from nanoGPT's A100 run, see benchmarks/char_lm.py):
    # nanoGPT's shakespeare_char shape (10.7M parameters) in bf16, fused, compiled; the schedule
    # ends with the 60 s (about 2,500 steps expected, against nanoGPT's 5,000), hence 1.5x its lr
    "gpu": _preset(dict(num_layers=6, num_heads=6, d_model=384, d_ff=1536, dropout=0.2, max_len=256), fused=True,
                   batch_size=64, steps=2500, max_lr=1.5e-3, min_lr=1.5e-4, warmup_steps=100, eval_every=250,
                   eval_batches=20, compile=True, time_limit=60, schedule="time"),
}


def build(config: CharLMConfig, vocab_size: int, parts: Parts | None = None) -> DecoderLM:
    """The model of `config` for a vocabulary of `vocab_size`, built from `parts` (default: the course's
    reference pieces), initialised from config.train.seed (the same on every rank)."""
    torch.manual_seed(config.train.seed)
    model = DecoderLM(replace(config.model, vocab_size=vocab_size), parts=parts)
    return use_fused_kernels(model, causal=True) if config.fused else model  # a decoder-only model: causal masks


def train_char_lm(config: CharLMConfig, corpus: CharCorpus, *, samples: int = 0, sample_length: int = 300,
                  checkpoint: str | None = None, resume: bool = False, progress: bool = True,
                  callback: Callable[[int, History], None] | None = None,
                  parts: Parts | None = None) -> tuple[DecoderLM, History, list[str]]:
    """Train a DecoderLM built from `parts` (default: the course's reference pieces; a learner's own
    with `course.learner.learner_parts`) on `corpus` (`fit`'s checkpoint, resume and callback); returns
    (model, history, `samples` texts of `sample_length` characters sampled after training, each from
    a newline)."""
    parts = parts or reference_parts()
    model = build(config, corpus.vocab_size, parts)
    cross_entropy = F.cross_entropy if config.fused else parts.cross_entropy

    def get_batch(split: str, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return corpus.batch(split, config.block_size, config.train.batch_size, generator)

    def loss_fn(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return cross_entropy(model(x).flatten(0, 1), y.flatten())       # (batch * block, vocab), (batch * block,)

    history = fit(model, get_batch, loss_fn, replace(config.train, checkpoint=checkpoint, progress=progress),
                  count=lambda batch: batch[1].numel(), parts=parts, resume=resume, callback=callback,
                  flops_per_token=estimate_flops_per_token(model, config.block_size))
    generator = torch.Generator().manual_seed(config.train.seed)
    newline = torch.tensor([corpus.tokenizer.encode("\n")] * samples, device=next(model.parameters()).device)
    texts = [corpus.decode(row) for row in model.sample(newline, sample_length, 0.8, generator=generator)] \
        if samples else []
    return model, history, texts


def record(config: CharLMConfig, history: History, samples: list[str], load_before: str, points: int = 200) -> dict:
    """The run as a small JSON-able dict: the per-step curves subsampled to about `points` points
    (every `curve_every`-th step), 4 decimals; the machine's load averages before and after it."""
    every = max(1, len(history.train_loss) // points)

    def curve(values: list[float]) -> list[float]:
        return [round(v, 4) for v in values[::every]]

    run = {**history.to_dict(), "train_loss": curve(history.train_loss), "lr": curve(history.lr),
           "grad_norm": curve(history.grad_norm), "curve_every": every,
           "val": [(step, round(v, 4)) for step, v in history.val],
           "val_seconds": [round(s, 2) for s in history.val_seconds]}
    return {"task": "char_lm", "config": asdict(config), "history": run, "samples": samples,
            "load_average": {"before": load_before, "after": load_average()},
            "omp_wait_policy": omp_wait_policy(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def _flag(text: str) -> bool:
    return text.lower() in ("1", "true", "yes", "on")


# field types (strings: annotations are not evaluated) -> how to read a flag
PARSERS = {"int": int, "float": float, "str": str, "bool": _flag, "int | None": int, "float | None": float,
           "bool | str": lambda text: text if text == "always" else _flag(text),
           "tuple[float, float]": lambda text: tuple(float(x) for x in text.strip("()").split(","))}
# the flags: every field of the model's config (but its vocabulary, the corpus's) and of the training's
# (but those set otherwise: the checkpoint's path, the progress bar), and `fused`
FLAGS: dict[str, tuple[str, Any]] = {
    **{f.name: ("model", f) for f in fields(DecoderLMConfig) if f.name != "vocab_size"},
    **{f.name: ("train", f) for f in fields(TrainConfig) if f.name not in ("checkpoint", "progress")},
    "fused": ("", next(f for f in fields(CharLMConfig) if f.name == "fused")),
}


def flags(config: CharLMConfig) -> list[str]:
    """`config` as command-line flags (those of FLAGS whose value is not None)."""
    out = []
    for name, (where, _) in FLAGS.items():
        value = getattr(getattr(config, where) if where else config, name)
        if value is not None:
            out.append(f"--{name.replace('_', '-')}={value}")
    return out


def configure(preset: CharLMConfig, args: argparse.Namespace) -> CharLMConfig:
    """`preset` with the flags given in `args` (None: not given)."""
    given = {name: getattr(args, name) for name in FLAGS if getattr(args, name) is not None}
    part = {where: {n: v for n, v in given.items() if FLAGS[n][0] == where} for where in ("model", "train", "")}
    return replace(preset, model=replace(preset.model, **part["model"]), train=replace(preset.train, **part["train"]),
                   **part[""])


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    parser.add_argument("--data", default=DEFAULT_PATH, help="a text file (downloaded there if missing)")
    parser.add_argument("--no-sha256", action="store_true", help="a text other than Tiny Shakespeare")
    for name, (where, f) in FLAGS.items():
        parser.add_argument("--" + name.replace("_", "-"), type=PARSERS[f.type], default=None,
                            help=f"{where + '.' if where else ''}{name}")
    parser.add_argument("--block-size", dest="max_len", type=int, help="model.max_len: the context")
    parser.add_argument("--samples", type=int, default=2, help="texts sampled after training")
    parser.add_argument("--sample-length", type=int, default=300)
    parser.add_argument("--json", help="write the run here")
    parser.add_argument("--save", help="write {'model': weights, 'history': ...} here")
    parser.add_argument("--checkpoint")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> History:
    args = parse(argv)
    rank, world_size = setup_distributed()
    config = configure(PRESETS[args.preset], args)
    load_before = load_average()
    corpus = CharCorpus(load_text(args.data, expected=None if args.no_sha256 else SHA256))
    model, history, samples = train_char_lm(config, corpus, samples=args.samples if rank == 0 else 0,
                                            sample_length=args.sample_length,
                                            checkpoint=args.checkpoint, resume=args.resume,
                                            progress=not args.quiet and rank == 0)
    if rank == 0:
        print(f"{args.preset}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
              f"{history.hardware}, load before {load_before}, after {load_average()}")
        for (step, val), seconds in zip(history.val, history.val_seconds):
            print(f"step {step:5d}  {seconds:7.1f} s  val {val:.4f}")
        mfu = f", MFU {history.mfu:.1%}" if history.mfu is not None else ""
        print(f"{history.tokens_per_second:,.0f} tokens/s{mfu}; {history.steps} steps in {history.seconds:.1f} s")
        for text in samples:
            print("-" * 40 + "\n" + text)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(record(config, history, samples, load_before), f, indent=1)
        if args.save:
            torch.save({"model": model.state_dict(), "history": history.to_dict()}, args.save)
    if world_size > 1:
        torch.distributed.destroy_process_group()
    return history


if __name__ == "__main__":
    main()
