"""Chapter 11's measured comparison (course.modern_lm) and the side-by-side benchmark against nanoGPT
(benchmarks/versus_nanogpt.py): the variants are what they say, the runs run, nanoGPT's log is read
right. Fast: tiny runs, and a stand-in for nanoGPT's train.py (nothing is downloaded)."""

from __future__ import annotations

import importlib.util
import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

import course.reference.modern as modern
import course.train as engine
from course import modern_lm
from course.data import CharCorpus
from course.reference.add_norm import LayerNorm
from course.reference.feed_forward import FeedForward

ROOT = Path(__file__).resolve().parents[1]


def test_every_variant_keeps_the_parameter_count_within_two_percent():
    counts = {name: sum(p.numel() for p in modern_lm.build(name, 69, 64, 0).parameters())
              for name in modern_lm.VARIANTS}
    for name, n in counts.items():
        assert abs(n / counts["gpt"] - 1) < 0.02, (name, n, counts["gpt"])


def test_each_ablation_changes_the_one_thing_it_names():
    base = modern_lm.build("modern", 69, 64, 0)
    assert all(isinstance(m, modern.RMSNorm) for m in (base.norm, base.layers[0].norm1))
    assert all(not isinstance(m, LayerNorm) for m in base.modules())
    assert all(isinstance(m, LayerNorm) for m in (modern_lm.build("layernorm", 69, 64, 0).norm,
                                                  modern_lm.build("layernorm", 69, 64, 0).layers[0].norm2))
    assert isinstance(modern_lm.build("gelu", 69, 64, 0).layers[0].ffn, FeedForward)
    assert modern_lm.build("mqa", 69, 64, 0).layers[0].attn.num_kv_heads == 1
    sinusoidal = modern_lm.build("sinusoidal", 69, 64, 0)
    assert isinstance(sinusoidal.embedding, modern_lm._Positions)     # the table, added to the scaled embedding
    assert sinusoidal.embedding.positions is not None
    scaled = modern_lm.build("scaled", 69, 64, 0)                     # its control: the same embedding, no table
    assert isinstance(scaled.embedding, modern_lm._Positions) and scaled.embedding.positions is None
    assert torch.equal(sinusoidal.embedding.embedding.weight, scaled.embedding.embedding.weight)
    x = torch.randn(1, 3, 4)
    with modern_lm.rotation_off(True):
        assert torch.equal(modern.apply_rope(x, torch.arange(3)), x)
    assert not torch.equal(modern.apply_rope(x, torch.arange(3)), x)   # restored afterwards


def test_a_tiny_comparison_trains_and_records(tmp_path):
    corpus = CharCorpus("To be, or not to be, that is the question. " * 60)
    config = replace(modern_lm.TRAIN, steps=6, warmup_steps=2, eval_every=3, eval_batches=2, threads=1)
    for name, optimizer in (("gpt", "chapter 10"), ("sinusoidal", "chapter 10"), ("adam_l2", "adam_l2")):
        run = modern_lm.train(name, corpus, config, block_size=16)
        assert [step for step, _ in run["val"]] == [3, 6] and run["final_val"] < 5 and run["parameters"] > 0
        assert run["optimizer"] == optimizer
        assert [step for step, _ in run["weight_rms"]] == [0, 3, 6]          # at the start and each evaluation
        assert all(values["linear"] > 0 and values["embedding"] > 0 for _, values in run["weight_rms"])


def test_the_optimiser_variants_use_exercise_11_5s_groups_and_put_fits_own_back():
    model = modern_lm.build("groups", 69, 64, 0)
    made = engine.make_optimizer
    for kind, kind_of in (("groups", torch.optim.AdamW), ("adam_l2", torch.optim.Adam)):
        assert modern_lm.VARIANTS[kind].optimizer == kind
        with modern_lm.optimizer_of(kind):
            optimizer = engine.make_optimizer(model, modern_lm.TRAIN, torch.device("cpu"))
        assert type(optimizer) is kind_of
        decayed, spared = optimizer.param_groups
        assert decayed["weight_decay"] == modern_lm.TRAIN.weight_decay and spared["weight_decay"] == 0.0
        assert any(p is model.embedding.weight for p in spared["params"])     # the tied embedding is not decayed
        assert all(p.dim() == 2 for p in decayed["params"]) and len(decayed["params"]) == 4 * 7
        assert engine.make_optimizer is made
    with modern_lm.optimizer_of("chapter 10"):
        assert engine.make_optimizer is made
    weights = modern_lm.weight_rms(model)
    assert abs(weights["embedding"] - 0.02) < 0.002 and weights["linear"] > weights["embedding"]


def _versus():
    spec = importlib.util.spec_from_file_location("versus_nanogpt", ROOT / "benchmarks" / "versus_nanogpt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_nanogpts_log_is_read_over_its_training_steps_only(tmp_path):
    """A stand-in for nanoGPT's train.py prints its log lines: iterations 0 and 250 (which evaluated)
    are left out of tokens/s, the last validation loss is the result, bias=True reaches it."""
    versus = _versus()
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "train_shakespeare_char.py").write_text("")
    (tmp_path / "train.py").write_text(
        "import sys\n"
        "assert '--device=cpu' in sys.argv and '--max_iters=2000' in sys.argv\n"
        "print('step 0: train loss 4.2000, val loss 4.1000')\n"
        "for i in range(0, 501):\n"
        "    if i % 250 == 0 and i: print(f'step {i}: train loss 2.0000, val loss {3 - i / 500:.4f}')\n"
        "    slow = i % 250 == 0\n"
        "    print(f'iter {i}: loss 2.0000, time {900.0 if slow else 10.0:.2f}ms, mfu 0.01%')\n"
        "print('bias' if '--bias=True' in sys.argv else 'no bias', file=sys.stderr)\n")
    run = versus.run_nanogpt(str(tmp_path), threads=1, out_dir=str(tmp_path / "out"))
    assert run["train_steps_counted"] == 498 and run["final_val"] == 2.0
    assert run["tokens_per_second"] == round(498 * versus.TOKENS_PER_ITER / (498 * 0.010))
    assert run["val"][0] == (0, 4.1)


def test_nanogpts_data_files_are_written_as_its_prepare_script_writes_them(tmp_path):
    versus = _versus()
    text = tmp_path / "input.txt"
    text.write_text("abcabcabcd")
    versus.prepare_nanogpt_data(str(tmp_path / "nanoGPT"), str(text))
    folder = tmp_path / "nanoGPT" / "data" / "shakespeare_char"
    train, val = np.fromfile(folder / "train.bin", dtype=np.uint16), np.fromfile(folder / "val.bin", dtype=np.uint16)
    assert train.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2] and val.tolist() == [3]
    assert pickle.loads((folder / "meta.pkl").read_bytes())["vocab_size"] == 4


def test_adamw_step_takes_a_closure_that_computes_the_loss_and_its_gradients():
    """step(closure) calls the closure with gradients on (step itself runs under no_grad), as PyTorch's
    optimisers do, and returns its loss; the update is the one step() without a closure makes."""
    from course.reference.modern import AdamW

    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(3))
    twin = torch.nn.Parameter(w.detach().clone())
    opt, plain = AdamW([w], lr=0.1), AdamW([twin], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (w ** 2).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    (twin ** 2).sum().backward()
    plain.step()
    assert loss is not None and loss.item() > 0
    assert torch.equal(w, twin)


def test_the_chapters_table_of_runs_is_the_record():
    """Chapter 11's table of final validation losses (and differences from the modern model at the same
    seed) reads, digit for digit, what course/runs/modern_vs_gpt_cpu.json records."""
    import re

    import nbformat

    from course.figures import paired_differences
    from course.runs import load

    record = load("modern_vs_gpt_cpu")
    final: dict[str, dict[int, float]] = {}
    for key, run in record["runs"].items():
        final.setdefault(key.split(" seed ")[0], {})[run["seed"]] = run["final_val"]
    differences = paired_differences(record)
    nb = nbformat.read(Path(__file__).resolve().parents[1] / "solutions/11_modern/11_modern.ipynb", as_version=4)
    table = next(c.source for c in nb.cells if c.cell_type == "markdown" and "| variant | seed 1337" in c.source)
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `(\w+)` \| (.*) \|$", table, re.M)}
    assert set(rows) == set(final)
    for variant, text in rows.items():
        want = [f"{final[variant][s]:.3f}" + ("" if variant == "modern" else f" ({differences[variant][s]:+.3f})")
                for s in (1337, 1, 2)]
        assert text.split(" | ") == want, variant
