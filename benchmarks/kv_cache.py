"""Benchmark: generation with and without a key-value cache (chapter 9), against sequence length.

Not a test: it measures. A randomly initialised `course.reversal.ToyLM` (speed does not depend on the
weights) generates N tokens greedily from a one-token prompt, twice:

* without a cache: every step runs the model on the whole sequence so far and keeps the last
  position's logits (what `generate` does with ``model.next_token_logits``);
* with a cache: the prompt once, then one new token per step through
  `course.reference.decoding.decode_step`, which reuses every earlier position's keys and values.

Both must give the same tokens (checked). Prints one line per length and the machine it ran on.
Run from the repository root, after ``python -m autograder release 09_decoding``::

    python benchmarks/kv_cache.py                      # lengths 32 .. 512, one thread
    python benchmarks/kv_cache.py --lengths 64 256 --threads 2 --repeats 5
"""

from __future__ import annotations

import argparse
import time

import torch

from course.reference.decoding import decode_step
from course.reversal import LM_VOCAB, ToyLM
from course.train import cpu_name


@torch.no_grad()
def without_cache(model: ToyLM, prompt: torch.Tensor, n: int) -> torch.Tensor:
    seq = prompt
    for _ in range(n):
        seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return seq


@torch.no_grad()
def with_cache(model: ToyLM, prompt: torch.Tensor, n: int) -> torch.Tensor:
    logits, cache = decode_step(model, prompt)
    seq = prompt
    for _ in range(n):
        token = logits[:, -1].argmax(-1, keepdim=True)
        seq = torch.cat([seq, token], dim=1)
        logits, cache = decode_step(model, token, cache)
    return seq


def best_of(fn, repeats: int) -> tuple[float, torch.Tensor]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128, 256, 512])
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = ToyLM(LM_VOCAB, d_model=args.d_model, num_heads=args.heads, d_ff=4 * args.d_model,
                  num_layers=args.layers, max_len=max(args.lengths) + 2).eval()
    prompt = torch.full((args.batch, 1), LM_VOCAB.bos)
    print(f"CPU: {cpu_name()}, {args.threads} thread(s), torch {torch.__version__}")
    print(f"ToyLM d_model={args.d_model}, {args.layers} layers, {args.heads} heads, batch {args.batch}; "
          f"best of {args.repeats} runs")
    print(f"{'new tokens':>10} {'no cache (s)':>13} {'cache (s)':>10} {'speed-up':>9}")
    for n in args.lengths:
        slow, a = best_of(lambda n=n: without_cache(model, prompt, n), args.repeats)
        fast, b = best_of(lambda n=n: with_cache(model, prompt, n), args.repeats)
        assert torch.equal(a, b), "the cache changed the generated tokens"
        print(f"{n:>10} {slow:>13.3f} {fast:>10.3f} {slow / fast:>8.1f}x")


if __name__ == "__main__":
    main()
