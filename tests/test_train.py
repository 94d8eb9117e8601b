"""Chapter 10's training engine: course.train, course.char_lm, course.models, course.data, course.runs.

Fast (tiny models, generated text; the DDP test starts two processes), so it runs in the default
suite. Tiny Shakespeare itself is never used here.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import urllib.error

import pytest
import torch
import torch.nn.functional as F

from course import data, runs
from course.char_lm import CharLMConfig, flags, train_char_lm
from course.models import (
    DecoderLM,
    DecoderLMConfig,
    Seq2SeqConfig,
    Seq2SeqModel,
    benchmark_attention,
    use_fused_kernels,
)
from course.parts import Parts, reference_parts
from course.train import History, TrainConfig, estimate_flops_per_token, fit, shard

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def generated_text(n: int = 6000, seed: int = 0) -> str:
    """Pseudo-words over a small alphabet: learnable, and nothing like Shakespeare."""
    g = torch.Generator().manual_seed(seed)
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far"]
    picks = torch.randint(len(words), (n // 4,), generator=g).tolist()
    return " ".join(words[i] for i in picks)[:n] + "\n"


TINY = CharLMConfig(DecoderLMConfig(vocab_size=0, num_layers=1, num_heads=2, d_model=16, d_ff=32, max_len=16),
                    train=TrainConfig(steps=12, batch_size=4, max_lr=1e-2, min_lr=1e-3, warmup_steps=2, eval_every=4,
                                      eval_batches=2, threads=1, device="cpu", seed=3))


def tiny(dropout: float = 0.0, **train) -> CharLMConfig:
    """TINY with the model's dropout and training fields changed."""
    return dataclasses.replace(TINY, model=dataclasses.replace(TINY.model, dropout=dropout),
                               train=dataclasses.replace(TINY.train, **train))



@pytest.fixture(scope="module")
def corpus() -> data.CharCorpus:
    return data.CharCorpus(generated_text())


# ------------------------------------------------------------------- fit ---

def test_fit_uses_the_given_parts_schedule_and_records_the_run(corpus):
    """fit takes each step's learning rate from parts.lr_at and sets it on the optimizer."""
    seen = []
    parts = reference_parts()
    lr_at = parts.lr_at
    swapped = Parts({**parts.objects, "lr_at": lambda step, *a: seen.append(step) or lr_at(step, *a)})
    model = DecoderLM(DecoderLMConfig(corpus.vocab_size, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=16))
    config = TrainConfig(steps=6, batch_size=4, max_lr=1e-2, warmup_steps=2, eval_every=3, eval_batches=2,
                         device="cpu", progress=False)
    history = fit(model, lambda split, g: corpus.batch(split, 16, 4, g),
                  lambda m, b: F.cross_entropy(m(b[0]).flatten(0, 1), b[1].flatten()), config,
                  count=lambda b: b[1].numel(), parts=swapped)
    assert seen == list(range(6))
    assert history.lr == [lr_at(i, 1e-2, 2, 6) for i in range(6)]
    assert [step for step, _ in history.val] == [3, 6] and len(history.train_loss) == 6
    assert history.tokens == 6 * 4 * 16 and history.tokens_per_second > 0
    assert history.mfu is None and history.device == "cpu"
    assert History.from_dict(json.loads(json.dumps(history.to_dict()))) == history


def test_fit_stops_at_the_time_limit_after_an_evaluation(corpus):
    config = tiny(steps=1000, time_limit=0.0)
    _, history, _ = train_char_lm(config, corpus, progress=False)
    assert history.steps == 1 and history.val == [(1, history.val[0][1])]


def test_a_time_schedule_ends_with_the_time_limit(corpus):
    config = tiny(steps=20, warmup_steps=2, time_limit=1.0, schedule="time", eval_every=0)
    _, history, _ = train_char_lm(config, corpus, progress=False)
    lr_at = reference_parts().lr_at
    assert 1.0 <= history.seconds and history.val[-1][0] == history.steps
    assert history.lr[0] == lr_at(0, config.train.max_lr, 2, 20, config.train.min_lr)
    decay = history.lr[history.lr.index(max(history.lr)):]
    assert decay == sorted(decay, reverse=True) and decay[-1] < 0.3 * config.train.max_lr     # annealed by the end
    with pytest.raises(ValueError, match="time_limit"):
        train_char_lm(tiny(steps=20, time_limit=None, schedule="time"), corpus, progress=False)


def test_resume_gives_exactly_the_loss_curve_of_an_unbroken_run(corpus, tmp_path):
    config = tiny(dropout=0.1)            # dropout: torch's RNG state matters too
    _, unbroken, _ = train_char_lm(config, corpus, progress=False)
    config = tiny(dropout=0.1, checkpoint_every=4)
    path = str(tmp_path / "run.pt")

    class Interrupted(Exception):
        pass

    def interrupt(step: int, history: History) -> None:
        if step == 7:                       # after the checkpoint of step 4, before that of step 8
            raise Interrupted

    with pytest.raises(Interrupted):
        train_char_lm(config, corpus, checkpoint=path, progress=False, callback=interrupt)
    assert torch.load(path)["history"]["steps"] == 4
    _, resumed, _ = train_char_lm(config, corpus, checkpoint=path, resume=True, progress=False)
    assert resumed.train_loss == unbroken.train_loss
    assert resumed.val == unbroken.val
    assert resumed.steps == unbroken.steps == 12


def test_bf16_autocast_runs_on_the_cpu_when_asked(corpus):
    """The GPU's mixed-precision path, exercised on the CPU: the linear layers compute in bf16."""
    model = use_fused_kernels(DecoderLM(DecoderLMConfig(corpus.vocab_size, d_model=16, num_heads=2, num_layers=1,
                                                        d_ff=32, max_len=16)))
    dtypes = []
    model.decoder.layers[0].ffn.linear1.register_forward_hook(lambda m, args, out: dtypes.append(out.dtype))
    for autocast, dtype in (("always", torch.bfloat16), (True, torch.float32)):
        dtypes.clear()
        config = TrainConfig(steps=8, batch_size=4, max_lr=1e-2, warmup_steps=2, device="cpu",
                             autocast=autocast, eval_batches=1, progress=False)
        history = fit(model, lambda split, g: corpus.batch(split, 16, 4, g),
                      lambda m, b: F.cross_entropy(m(b[0]).flatten(0, 1), b[1].flatten()), config,
                      count=lambda b: b[1].numel())
        assert set(dtypes) == {dtype}
        assert all(map(math.isfinite, history.train_loss + [history.val[-1][1]]))
        assert history.train_loss[-1] < history.train_loss[0]


def test_ddp_with_gloo_on_two_processes_matches_one_process(corpus, tmp_path):
    """torchrun, 2 CPU ranks, each with half of the global batch: the same losses and weights."""
    text = tmp_path / "text.txt"
    text.write_text(generated_text())
    config = tiny(steps=8, eval_every=4)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
         "course.char_lm", "--preset=nanogpt-cpu", f"--data={text}", "--no-sha256", "--samples=0", "--quiet",
         f"--save={tmp_path / 'run.pt'}", *flags(config)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = torch.load(tmp_path / "run.pt")
    ddp = saved["history"]
    assert ddp["world_size"] == 2
    model, single, _ = train_char_lm(config, data.CharCorpus(text.read_text()), progress=False)
    assert single.world_size == 1
    torch.testing.assert_close(ddp["train_loss"], single.train_loss, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close([v for _, v in ddp["val"]], [v for _, v in single.val], rtol=1e-4, atol=1e-5)
    weights = saved["model"]
    # W_k's bias adds q . b_k to every score of a row, which the softmax ignores: its gradient is float
    # rounding noise, which Adam's g / sqrt(v) scales up to full-size steps. Every other weight must agree.
    for name, value in model.state_dict().items():
        if not name.endswith("W_k.bias"):
            torch.testing.assert_close(weights[name], value, rtol=1e-4, atol=1e-5, msg=name)


FAST_CLOCK_ON_RANK_1 = """
import json, os, sys, time
rank = int(os.environ["RANK"])
if rank == 1:  # this rank's clock runs three times as fast as rank 0's
    real = time.perf_counter
    time.perf_counter = lambda: 3 * real()
from course.char_lm import main
history = main(sys.argv[2:])
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
    json.dump({"steps": history.steps, "lr": history.lr, "val": history.val}, f)
"""


def test_ddp_ranks_share_one_clock_on_the_time_schedule(tmp_path):
    """With schedule "time" (the GPU preset's) the learning rate and the last step come from the
    clock: each rank reading its own would take other learning rates, and a rank that stopped first
    would leave the others waiting in an all-reduce for ever. Rank 1's clock runs three times as fast
    here: both ranks still take the same steps, learning rates and evaluations."""
    text = tmp_path / "text.txt"
    text.write_text(generated_text())
    config = tiny(steps=50, eval_every=0, schedule="time", time_limit=1.5, warmup_steps=2)
    (tmp_path / "run.py").write_text(FAST_CLOCK_ON_RANK_1)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(tmp_path / "run.py"),
         str(tmp_path), "--preset=nanogpt-cpu", f"--data={text}", "--no-sha256", "--samples=0", "--quiet",
         *flags(config)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0] == ranks[1] and ranks[0]["steps"] > 1


def test_the_gpu_preset_runs_through_the_benchmark_on_the_cpu_at_tiny_sizes(tmp_path):
    """benchmarks/char_lm.py --preset gpu: the GPU run's code path (its preset's dropout, fused kernels,
    autocast setting and time schedule) at tiny sizes on the CPU; torch.compile left out (minutes on a CPU)."""
    text = tmp_path / "text.txt"
    text.write_text(generated_text())
    tiny = ["--num-layers=1", "--num-heads=2", "--d-model=16", "--d-ff=32", "--block-size=16", "--batch-size=4",
            "--steps=4", "--warmup-steps=1", "--time-limit=0.5", "--eval-batches=2", "--compile=0", "--threads=1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "char_lm.py"), "--preset=gpu", f"--data={text}",
         "--no-sha256", "--samples=1", "--sample-length=20", "--quiet", f"--json={tmp_path / 'run.json'}", *tiny],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "anchor: targets" in result.stdout and "tokens/s" in result.stdout
    run = json.loads((tmp_path / "run.json").read_text())
    config = run["config"]
    assert config["model"]["dropout"] == 0.2 and config["fused"] and config["model"]["num_layers"] == 1
    assert config["train"]["schedule"] == "time" and not config["train"]["compile"]
    assert run["history"]["val"] and run["history"]["device"] == "cpu" and len(run["samples"]) == 1


# ---------------------------------------------------------- fused kernels ---

def test_fused_kernels_give_the_course_pieces_results():
    torch.manual_seed(0)
    lm = DecoderLM(DecoderLMConfig(20, d_model=32, num_heads=4, num_layers=2, d_ff=64, max_len=24)).eval()
    ids = torch.randint(20, (3, 24))
    expected = lm(ids)
    torch.testing.assert_close(use_fused_kernels(lm)(ids), expected, rtol=1e-4, atol=1e-5)
    layer = lm.decoder.layers[0]
    assert "forward" in vars(layer.self_attn) and "forward" in vars(layer.norm1)      # really swapped
    assert use_fused_kernels(lm, enabled=False)(ids).equal(expected)
    assert "forward" not in vars(layer.self_attn)
    torch.testing.assert_close(use_fused_kernels(lm, causal=True)(ids), expected, rtol=1e-4, atol=1e-5)
    use_fused_kernels(lm, enabled=False)

    model = Seq2SeqModel(Seq2SeqConfig(src_vocab=15, tgt_vocab=17, d_model=32, num_heads=4, num_encoder_layers=1,
                                       num_decoder_layers=2, d_ff=64)).eval()
    src, tgt = torch.randint(1, 15, (2, 9)), torch.randint(1, 17, (2, 7))
    src[0, 6:] = 0                                            # padding: masked keys
    expected = model(src, tgt)
    weights = model.transformer.decoder.layers[-1].cross_weights.clone()
    model.transformer.decoder.layers[-1].cross_weights = None
    torch.testing.assert_close(use_fused_kernels(model)(src, tgt), expected, rtol=1e-4, atol=1e-5)
    assert "forward" in vars(model.transformer.encoder.layers[0].self_attn)
    assert "forward" not in vars(model.transformer.decoder.layers[-1].cross_attn)   # for the plots
    torch.testing.assert_close(model.transformer.decoder.layers[-1].cross_weights, weights)


def test_only_the_exact_causal_mask_takes_sdpas_causal_path():
    from course.models import _is_causal
    from course.reference.decoder import causal_mask

    mask = causal_mask(5)
    assert _is_causal(mask) and _is_causal(mask.clone()) and _is_causal(causal_mask(5, dtype=torch.float64))
    for bad in (mask[:4], mask[None], mask.masked_fill(torch.eye(5, dtype=torch.bool), -1.0), torch.zeros(5, 5),
                mask.masked_fill(mask == 0, float("-inf")).masked_fill(torch.eye(5, dtype=torch.bool), 0.0)):
        assert not _is_causal(bad)
    lm = DecoderLM(DecoderLMConfig(9, d_model=8, num_heads=2, num_layers=1, d_ff=16, max_len=6))
    lm(torch.zeros(2, 6, dtype=torch.long))
    lm(torch.zeros(1, 6, dtype=torch.long))
    assert list(lm.masks) == [(6, torch.device("cpu"))] and lm.masks[(6, torch.device("cpu"))].equal(causal_mask(6))


def test_benchmark_attention_compares_agreement_and_speed():
    result = benchmark_attention(batch=2, num_heads=2, seq=32, d_head=8, repeats=2)
    assert result["max_abs_diff"] < 1e-5 and result["course_ms"] > 0 and result["sdpa_ms"] > 0
    wrong = benchmark_attention(batch=2, num_heads=2, seq=32, d_head=8, repeats=1,
                                attention=lambda q, k, v, mask: (v, None))
    assert wrong["max_abs_diff"] > 0.1


def test_flops_per_token_counts_parameters_and_attention():
    lm = DecoderLM(DecoderLMConfig(20, d_model=32, num_heads=4, num_layers=3, d_ff=64, max_len=16))
    n = sum(p.numel() for p in lm.parameters())
    assert estimate_flops_per_token(lm, 16) == 6 * n + 12 * 3 * 32 * 16


# ------------------------------------------------------------------- data ---

def test_random_blocks_are_windows_and_their_next_tokens():
    ids = torch.arange(100) * 3
    x, y = data.random_blocks(ids, 8, 5, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (5, 8) and x.dtype == torch.long
    assert (y == x + 3).all() and (x[:, 1:] == x[:, :-1] + 3).all()
    again, _ = data.random_blocks(ids, 8, 5, torch.Generator().manual_seed(0))
    assert again.equal(x)
    with pytest.raises(ValueError):
        data.random_blocks(ids[:8], 8, 1)


def test_char_corpus_splits_90_10_and_decodes_back(corpus):
    text = generated_text()
    assert len(corpus.train) == int(0.9 * len(text)) and len(corpus.train) + len(corpus.val) == len(text)
    assert corpus.decode(torch.cat([corpus.train, corpus.val])) == text
    assert corpus.vocab_size == 4 + len(set(text))
    x, y = corpus.batch("val", 10, 3, torch.Generator().manual_seed(1))
    assert corpus.decode(x[0]) in corpus.decode(corpus.val)


def test_load_text_checks_the_sha256(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("to be or not to be\n")
    digest = data.sha256(path.read_bytes())
    assert data.load_text(str(path), expected=digest) == "to be or not to be\n"
    with pytest.raises(ValueError, match="sha256"):
        data.load_text(str(path))                              # not Tiny Shakespeare


class _Response:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def read(self) -> bytes:
        return self.body


def test_download_writes_only_a_verified_file(tmp_path, monkeypatch):
    body = b"generated, not downloaded\n"
    monkeypatch.setattr(data.urllib.request, "urlopen", lambda url, timeout: _Response(body))
    path = tmp_path / "sub" / "t.txt"
    assert data.load_text(str(path), expected=data.sha256(body)) == body.decode()
    with pytest.raises(ValueError, match="sha256"):
        data.download(str(tmp_path / "bad.txt"))               # the default sha256 is Tiny Shakespeare's
    assert not (tmp_path / "bad.txt").exists()


def test_offline_download_says_what_to_do(tmp_path, monkeypatch):
    def offline(url, timeout):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(data.urllib.request, "urlopen", offline)
    with pytest.raises(RuntimeError, match="offline.*copy it to"):
        data.load_text(str(tmp_path / "t.txt"))


# ------------------------------------------------------------------- runs ---

def test_recorded_runs_load():
    for name in runs.names():
        run = runs.load(name)
        if run["task"] == "char_lm":
            assert run["config"] and run["history"]["val"] and run["history"]["hardware"] and run["samples"]
        elif run["task"] == "versus_nanogpt":       # benchmarks/versus_nanogpt.py: side by side, its commit
            assert run["nanogpt_commit"] and run["machine"] and run["rounds"] and run["ratio_to_nanogpt"]
            assert all(r["nanogpt"]["val"] and r["course_fused"]["tokens_per_second"] for r in run["rounds"])
        elif run["task"] == "modern_vs_gpt":        # course.modern_lm (chapter 11)
            assert {"gpt", "modern"} <= set(run["runs"]) and all(r["val"] for r in run["runs"].values())
        elif run["task"] == "bpe_training":         # benchmarks/bpe_training.py (chapter 1)
            assert set(run["processor_seconds"]) == {"train_bpe", "train_bpe_fast"} and run["hardware"]
        else:
            assert run["task"] and run["config"], name
    with pytest.raises(FileNotFoundError, match="no recorded run"):
        runs.load("no such run")


def test_each_rank_gets_its_slice_of_the_global_batch():
    x, y = torch.arange(12).reshape(6, 2), torch.arange(6)
    assert [shard((x, y), torch.device("cpu"), rank, 3)[1].tolist() for rank in range(3)] == [[0, 1], [2, 3], [4, 5]]
    assert shard({"ids": x}, torch.device("cpu"), 1, 2)["ids"].equal(x[3:])
    assert shard([x], torch.device("cpu"))[0].equal(x)


# ------------------------------------------------- the exercises' contracts ---

@pytest.mark.parametrize("accepted", __import__("mutants.training", fromlist=["ACCEPTED"]).ACCEPTED,
                         ids=lambda m: m.name)
def test_every_accepted_reading_of_a_contract_keeps_full_marks(accepted):
    """Chapter 10's contracts allow more than the reference's way (gradients cleared by the model or the
    optimizer, to None or to zero; the mode restored on an error by finally or by except and re-raise):
    each such answer passes every check of its test cell, visible and hidden, on several seeds."""
    from autograder.chapters import all_chapters
    from submissions import apply_edits, as_module, cells_of, solution_sources, student_notebook, verdicts

    ch = next(c for c in all_chapters() if c.id == "10_training")
    answers = solution_sources(ch)
    answers[accepted.cell] = apply_edits(answers[accepted.cell], accepted.edits, accepted.name)
    module = as_module(student_notebook(ch, answers), "accepted_training")
    for gid in accepted.loses:                  # here: the cells that must keep full marks
        for seed in (None, 11):
            failed = [text for ok, text in verdicts(cells_of(ch)[gid], module, seed) if not ok]
            assert not failed, f"{accepted.name}: {gid} lost points on seed {seed}:\n" + "\n".join(failed)


def test_a_causal_model_takes_sdpas_causal_path_without_comparing_its_mask(monkeypatch):
    """use_fused_kernels(model, causal=True), as the char LM uses it: no comparison of the mask's values
    (it breaks a compiled graph and waits for the GPU in every layer), the same logits."""
    import course.models as models

    torch.manual_seed(0)
    lm = DecoderLM(DecoderLMConfig(20, d_model=32, num_heads=4, num_layers=2, d_ff=64, max_len=24)).eval()
    ids = torch.randint(20, (2, 24))
    expected = lm(ids)

    def compared(mask):
        raise AssertionError("the mask was compared")
    monkeypatch.setattr(models, "_is_causal", compared)
    torch.testing.assert_close(use_fused_kernels(lm, causal=True)(ids), expected, rtol=1e-4, atol=1e-5)
