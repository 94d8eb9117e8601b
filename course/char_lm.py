"""Train chapter 10's character language model (`course.models.DecoderLM`) on a text file.

The same code runs on a CPU, one GPU, or several under torchrun::

    python -m course.train_cli --preset cpu --data data/tinyshakespeare.txt
    python -m course.train_cli --preset gpu --data data/tinyshakespeare.txt --json run.json
    torchrun --nproc_per_node=2 -m course.train_cli --preset gpu --data data/tinyshakespeare.txt

A preset (`PRESETS`) sets the model's shape and the training; any flag overrides it. With
`--fused 1`, self-attention uses F.scaled_dot_product_attention, LayerNorm F.layer_norm and the loss
F.cross_entropy (PyTorch's kernels, `course.models.use_fused_kernels`); without it the course's own
pieces do. The run prints validation loss against training seconds and tokens/s; `--json PATH`
writes the run (config, loss curve, samples, hardware, machine load); `--save PATH` writes the final
weights and the full history.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace

import torch
import torch.nn.functional as F

from course.data import DEFAULT_PATH, SHA256, CharCorpus, load_text
from course.models import DecoderLM, use_fused_kernels
from course.parts import Parts, reference_parts
from course.train import (
    History,
    TrainConfig,
    estimate_flops_per_token,
    fit,
    setup_distributed,
)


@dataclass
class CharLMConfig:
    """A character-LM run: the model's shape, the batches, and the training (`TrainConfig`'s fields)."""

    num_layers: int = 4
    num_heads: int = 4
    d_model: int = 128
    d_ff: int = 512
    dropout: float = 0.0
    block_size: int = 64
    batch_size: int = 12
    steps: int = 2000
    max_lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 100
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.99)
    eval_every: int = 250
    eval_batches: int = 20
    fused: bool = False
    compile: bool = False
    autocast: bool | str = True
    device: str = "auto"
    threads: int | None = None
    time_limit: float | None = None
    schedule: str = "steps"
    checkpoint_every: int = 0
    seed: int = 1337

    def train_config(self, **overrides) -> TrainConfig:
        names = {f.name for f in fields(TrainConfig)}
        return TrainConfig(**{k: v for k, v in asdict(self).items() if k in names}, **overrides)


PRESETS: dict[str, CharLMConfig] = {
    # nanoGPT's README CPU run, shape and schedule (its anchor: val 1.8857 after 2,000 steps, 146 s)
    "nanogpt-cpu": CharLMConfig(),
    # 2 CPU cores, 150 s: nanoGPT's shape, a higher learning rate on a schedule that ends with the 150 s,
    # PyTorch's fused kernels
    "cpu": CharLMConfig(batch_size=16, steps=1000, max_lr=3e-3, min_lr=3e-4, warmup_steps=30, eval_every=100,
                        fused=True, threads=2, time_limit=150, schedule="time"),
    # one H100, 60 s (not yet run on one: chosen from nanoGPT's A100 run, see benchmarks/char_lm.py):
    # nanoGPT's shakespeare_char shape (10.7M parameters) in bf16, fused, compiled; the schedule
    # ends with the 60 s (about 2,500 steps expected, against nanoGPT's 5,000), hence 1.5x its lr
    "gpu": CharLMConfig(num_layers=6, num_heads=6, d_model=384, d_ff=1536, dropout=0.2, block_size=256,
                        batch_size=64, steps=2500, max_lr=1.5e-3, min_lr=1.5e-4, warmup_steps=100,
                        eval_every=250, eval_batches=20, fused=True, compile=True, time_limit=60, schedule="time"),
}


def build(config: CharLMConfig, vocab_size: int, parts: Parts | None = None) -> DecoderLM:
    """The model of `config` built from `parts` (default: the course's reference pieces), initialised
    from config.seed (the same on every rank)."""
    torch.manual_seed(config.seed)
    model = DecoderLM(vocab_size, config.d_model, config.num_heads, config.num_layers, config.d_ff,
                      config.dropout, max_len=config.block_size, parts=parts)
    return use_fused_kernels(model) if config.fused else model


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
        return corpus.batch(split, config.block_size, config.batch_size, generator)

    def loss_fn(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return cross_entropy(model(x).flatten(0, 1), y.flatten())       # (batch * block, vocab), (batch * block,)

    history = fit(model, get_batch, loss_fn,
                  config.train_config(checkpoint=checkpoint, progress=progress),
                  count=lambda batch: batch[1].numel(), parts=parts, resume=resume, callback=callback,
                  flops_per_token=estimate_flops_per_token(model, config.block_size))
    generator = torch.Generator().manual_seed(config.seed)
    newline = torch.tensor([corpus.tokenizer.encode("\n")] * samples, device=next(model.parameters()).device)
    texts = [corpus.decode(row) for row in model.sample(newline, sample_length, 0.8, generator=generator)] \
        if samples else []
    return model, history, texts


def load_average() -> str:
    """The machine's load averages (1, 5, 15 minutes), as `uptime` shows them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


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
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def _flag(text: str) -> bool:
    return text.lower() in ("1", "true", "yes", "on")


# CharLMConfig's field types (strings: annotations are not evaluated) -> how to read a flag
PARSERS = {"int": int, "float": float, "str": str, "bool": _flag, "int | None": int, "float | None": float,
           "bool | str": lambda text: text if text == "always" else _flag(text)}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    parser.add_argument("--data", default=DEFAULT_PATH, help="a text file (downloaded there if missing)")
    parser.add_argument("--no-sha256", action="store_true", help="a text other than Tiny Shakespeare")
    for f in fields(CharLMConfig):
        if f.name != "betas":
            parser.add_argument("--" + f.name.replace("_", "-"), type=PARSERS[f.type], default=None)
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
    overrides = {f.name: getattr(args, f.name) for f in fields(CharLMConfig) if getattr(args, f.name, None) is not None}
    config = replace(PRESETS[args.preset], **overrides)
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
