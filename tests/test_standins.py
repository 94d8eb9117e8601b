"""Stand-ins (`course.standins`): the same behaviour as the answers they stand in for, and no answer.

* Built like the reference (the same constructor arguments, parameter names and shapes) and given
  the same weights, each computes what the reference computes, errors included.
* Submitted as the answer of its own exercise, each earns nothing there (it calls what that exercise
  forbids), judged as the grader judges.
* The edition's audit finds no line of an answer in them.
"""

from __future__ import annotations

import importlib
import re

import pytest
import torch

from autograder.chapters import all_chapters
from autograder.edition import answer_lines, published_lines
from course import standins
from submissions import (Bank, as_module, cell_fraction, cells_of, grader_seeds, solution_sources, student_notebook,
                         verdicts)

TOPICS = standins.topics()
CHAPTER = {ch.topic: ch for ch in all_chapters()}


def pair(topic: str, name: str):
    return (getattr(importlib.import_module(f"course.reference.{topic}"), name),
            getattr(importlib.import_module(f"course.standins.{topic}"), name))


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def outcome(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as err:  # the same error type, where the reference raises
        return type(err).__name__


def twins(topic: str, name: str, *args, **kwargs):
    """The reference module and the stand-in, built alike, the stand-in holding the reference's weights."""
    ref_cls, std_cls = pair(topic, name)
    torch.manual_seed(0)
    ref = ref_cls(*args, **kwargs)
    std = std_cls(*args, **kwargs)
    assert [(n, p.shape) for n, p in ref.named_parameters()] == [(n, p.shape) for n, p in std.named_parameters()]
    assert sorted(ref.state_dict()) == sorted(std.state_dict())
    std.load_state_dict(ref.state_dict())
    return ref.eval(), std.eval()


def test_functions_compute_what_the_answers_compute():
    torch.manual_seed(1)
    x, W, b = torch.randn(3, 5, 4), torch.randn(4, 6), torch.randn(6)
    assert same(*(f(x, W, b) for f in pair("introduction", "linear_rows")))
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 6)
    mask = torch.zeros(2, 1, 5, 7)
    mask[0, 0, :, 4:] = float("-inf")
    full = torch.zeros(2, 1, 5, 7)
    full[1, 0, 2, :] = float("-inf")
    for m in (None, mask, full):
        assert same(*(outcome(f, q, k, v, m) for f in pair("attention", "scaled_dot_product_attention")))
    h = torch.randn(2, 5, 12, dtype=torch.float64)
    for heads in (3, 4, 5):
        assert same(*(outcome(f, h, heads) for f in pair("multi_head_attention", "split_heads")))
    split = torch.randn(2, 3, 5, 4)
    assert same(*(f(split) for f in pair("multi_head_attention", "merge_heads")))
    norm = torch.nn.LayerNorm(12)
    sub = torch.nn.Linear(12, 12)
    assert same(*(f(h.float(), sub, norm) for f in pair("add_norm", "pre_ln_residual")))
    logits = torch.randn(4, 9) * 50
    for dim in (0, -1):
        assert same(*(f(logits, dim) for f in pair("decoding", "log_softmax")))


@pytest.mark.parametrize("corpus,specials", [("to be or not to be\n", ("<pad>", "<bos>", "<eos>", "<unk>")),
                                             ("Ünïcode ✓ 😀", ("<eos>", "<unk>", "<pad>", "<bos>", "<sep>")),
                                             ("", ("<pad>", "<bos>", "<eos>", "<unk>"))])
def test_the_character_tokenizer_does_what_the_answer_does(corpus, specials):
    ref, std = (cls(corpus, specials) for cls in pair("tokenizing", "CharTokenizer"))
    facts = ("itos", "stoi", "vocab_size", "pad_id", "bos_id", "eos_id", "unk_id")
    assert [getattr(ref, f) for f in facts] == [getattr(std, f) for f in facts]
    for text in ("to be", "not ✓ seen: Q", "", corpus):
        for add in (False, True):
            assert ref.encode(text, add) == std.encode(text, add)
    for ids in (list(range(ref.vocab_size)), [ref.unk_id, ref.bos_id, 0], [ref.vocab_size], [-1]):
        assert outcome(ref.decode, ids) == outcome(std.decode, ids)
    for tok in (ref, std):  # a token added after construction (as 1.5's subclass does): read when called
        tok.itos.append("Q")
        tok.stoi["Q"] = tok.vocab_size
        tok.vocab_size += 1
    new = [ref.vocab_size - 1]
    assert ref.encode("to Q") == std.encode("to Q") and ref.decode(new) == std.decode(new)


@pytest.mark.parametrize("topic,name,args,kwargs,inputs", [
    ("embedding", "Embedding", (11, 6), {}, [(torch.tensor([[0, 3, 10], [2, 2, 1]]),), (torch.tensor([11]),),
                                             (torch.tensor([-1]),), (torch.tensor([1.0]),), (torch.tensor([True]),)]),
    ("embedding", "Embedding", (11, 6), {"scale": True}, [(torch.tensor([4, 5]),)]),
    ("positional_encoding", "PositionalEncoding", (8,), {"max_len": 20}, [(torch.randn(2, 7, 8),),
                                                                         (torch.randn(1, 21, 8),)]),
    ("positional_encoding", "PositionalEncoding", (6,), {"base": 100.0}, [(torch.randn(3, 40, 6),)]),
    ("attention", "AttentionHead", (6, 4), {}, [(torch.randn(2, 5, 6),), (torch.randn(2, 5, 6), torch.randn(2, 3, 6))]),
    ("attention", "AttentionHead", (6, 4, 3), {}, [(torch.randn(1, 2, 6),)]),
    ("multi_head_attention", "MultiHeadAttention", (12, 3), {}, [
        (torch.randn(2, 5, 12),), (torch.randn(2, 5, 12), torch.randn(2, 4, 12)),
        (torch.randn(2, 5, 12), None, None, torch.zeros(2, 5, 5).masked_fill(torch.rand(2, 5, 5) < 0.3, -1e9))]),
    ("multi_head_attention", "MultiHeadAttention", (12, 4), {"d_q_in": 5, "d_kv_in": 7, "bias": False},
     [(torch.randn(2, 3, 5), torch.randn(2, 4, 7))]),
    ("add_norm", "LayerNorm", (10,), {}, [(torch.randn(3, 4, 10) * 5 + 2,),
                                          (torch.randn(3, 10, dtype=torch.float64),)]),
    ("add_norm", "LayerNorm", (10,), {"eps": 0.1}, [(torch.randn(3, 10),)]),
    ("feed_forward", "FeedForward", (8, 20), {}, [(torch.randn(2, 5, 8),), (torch.randn(8),)]),
    ("feed_forward", "FeedForward", (8, 20), {"activation": "gelu"}, [(torch.randn(3, 8),)]),
    ("feed_forward", "SwiGLUFeedForward", (8, 20), {}, [(torch.randn(2, 5, 8),)]),
    ("feed_forward", "EncoderLayer", (12, 3, 24), {}, [(torch.randn(2, 5, 12),),
                                                        (torch.randn(2, 5, 12), torch.zeros(2, 1, 5))]),
    ("feed_forward", "Encoder", (2, 12, 3, 24), {}, [(torch.randn(2, 5, 12),)]),
])
def test_modules_compute_what_the_answers_compute(topic, name, args, kwargs, inputs):
    ref, std = twins(topic, name, *args, **kwargs)
    for given in inputs:
        given = tuple(given)
        assert same(outcome(ref, *given), outcome(std, *given)), (name, [getattr(t, "shape", t) for t in given])


@pytest.mark.parametrize("topic,name,args", [("add_norm", "LayerNorm", (0,)),
                                             ("feed_forward", "FeedForward", (8, 4, 0.0, "tanh")),
                                             ("multi_head_attention", "MultiHeadAttention", (10, 3)),
                                             ("positional_encoding", "PositionalEncoding", (5,))])
def test_constructors_refuse_what_the_answers_refuse(topic, name, args):
    assert same(*(outcome(cls, *args) for cls in pair(topic, name))) and isinstance(
        outcome(pair(topic, name)[1], *args), str)


def exercise_of(topic: str, name: str) -> tuple:
    ch = CHAPTER[topic]
    for gid, source in solution_sources(ch).items():
        if re.search(rf"^(def {name}\(|class {name}[(:])", source, re.M):
            return ch, gid
    raise AssertionError(f"no answer cell of {ch.id} defines {name}")


STOOD_IN = [(topic, name) for topic in TOPICS for name in importlib.import_module(f"course.standins.{topic}").__all__]


@pytest.mark.parametrize("topic,name", STOOD_IN, ids=[f"{t}.{n}" for t, n in STOOD_IN])
def test_a_stand_in_handed_in_as_its_exercise_earns_nothing(topic, name):
    """The stand-in's source, copied whole into the answer cell of the exercise that defines `name` (as a
    student could copy it): every test cell that checks `name` scores zero there (its code calls what
    that exercise forbids, and the calls are now the student's)."""
    ch, gid = exercise_of(topic, name)
    answers = solution_sources(ch)
    answers[gid] = (standins.HERE / f"{topic}.py").read_text()  # copied into the answer cell, whole
    module = as_module(student_notebook(ch, answers), f"standin_{topic}")
    bank = Bank(hints=False)
    earned = []
    for cell, calls in cells_of(ch).items():
        mine = [c for c in calls if c.obj == name]
        if not mine:
            continue
        for seed in grader_seeds(ch, 1):
            judged = verdicts(calls, module, seed, bank)
            if cell_fraction(judged) > 0:
                earned.append(f"{cell}: {[v.record['check'] for v in judged if v.passed]}")
    assert not earned, f"{topic}.{name} as its own answer earned points: {earned}"


def test_no_stand_in_holds_a_line_of_an_answer():
    texts = "\n".join((standins.HERE / f"{t}.py").read_text() for t in TOPICS)
    found = []
    for ch in all_chapters():
        for lines, need in answer_lines(ch):
            lines -= published_lines(lines)
            hits = sorted(ln for ln in lines if ln in texts)
            if len(lines) >= need and len(hits) >= need:
                found.append(f"{ch.id}: {hits}")
    assert not found, found
