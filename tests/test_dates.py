"""course/dates.py: the dates task of chapter 10's run A (generation, batches, a short training)."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import time
from collections import Counter
from datetime import date, datetime

import pytest
import torch

from course.parts import reference_parts
from course.dates import (
    FORMS,
    RECORD_PATH,
    SRC_VOCAB,
    TGT_VOCAB,
    DatesConfig,
    examples,
    held_out,
    held_out_dates,
    render,
    teacher_forcing_batch,
    train_dates,
)
from course.train import TrainConfig

# each form -> the strptime formats that read it, after `normalise` (written independently of dates.py)
FORMATS = {
    "3 March 1998": ["%d %B %Y", "%d %b %Y"],
    "March 3, 1998": ["%B %d, %Y", "%b %d, %Y"],
    "Tuesday, 3rd of March 1998": [f"{a}, %d of {b} %Y" for a in ("%A", "%a") for b in ("%B", "%b")],
    "Tuesday, March 3, 1998": [f"{a}, {b} %d, %Y" for a in ("%A", "%a") for b in ("%B", "%b")],
    "the 3rd of March, 1998": ["the %d of %B, %Y", "the %d of %b, %Y"],
    "mar 3 98": ["%b %d %y"],
    "03-Mar-1998": ["%d-%b-%Y"],
    "03/03/98": ["%d/%m/%y"],
    "03/03/1998": ["%d/%m/%Y"],
    "3.3.1998": ["%d.%m.%Y"],
    "1998-3-3": ["%Y-%m-%d"],
    "1998/03/03": ["%Y/%m/%d"],
    "19980303": ["%Y%m%d"],
}


def normalise(text: str) -> str:
    """Lower case, ordinals '3rd' -> '3', abbreviation dots 'mar.' -> 'mar'."""
    text = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", text.lower())
    return re.sub(r"([a-z])\.", r"\1", text)


def readings(text: str) -> set[tuple[str, date]]:
    """Every (form, date) that some format reads `text` as; a written weekday must be the date's."""
    found = set()
    for form, formats in FORMATS.items():
        for fmt in formats:
            try:
                parsed = datetime.strptime(normalise(text), fmt).date()
            except ValueError:
                continue
            if "%y" in fmt and parsed.year > 2049:        # the task's two-digit years: 50 .. 99 -> 19xx
                parsed = parsed.replace(year=parsed.year - 100)
            if "%a" in fmt.lower():
                assert time.strptime(normalise(text), fmt).tm_wday == parsed.weekday(), text
            found.add((form, parsed))
    return found


def test_forms_are_the_tests_forms():
    assert set(FORMS) == set(FORMATS)


@pytest.mark.parametrize("form", list(FORMS))
def test_every_form_reads_back_as_its_date_and_only_so(form):
    rng = random.Random(0)
    days = [date(1950, 1, 1), date(2049, 12, 31), date(2000, 2, 29), date(1998, 3, 3)]
    days += [date(rng.randint(1950, 2049), rng.randint(1, 12), day) for day in (1, 2, 3, 11, 12, 13, 21, 22, 23, 28)]
    texts = set()
    for day in days:
        for _ in range(8):                                # the variants: padding, names, case
            text = render(day, form, rng)
            texts.add(text)
            assert readings(text) == {(form, day)}, text
    assert len(texts) >= len(days)                        # no two dates share a text


def test_examples_are_seeded_and_cover_every_form():
    a = examples(500, "train", torch.Generator().manual_seed(3))
    assert a == examples(500, "train", torch.Generator().manual_seed(3))
    assert a != examples(500, "train", torch.Generator().manual_seed(4))
    forms = Counter()
    for text, iso in a:
        (form, day), = readings(text)
        assert day.isoformat() == iso
        forms[form] += 1
    assert set(forms) == set(FORMS)
    assert {text.islower() for text, _ in a if any(c.isalpha() for c in text)} == {True, False}


def test_held_out_is_fixed_disjoint_from_training_and_balanced():
    held = held_out()
    assert len(held) == len(held_out_dates()) == len(set(held_out_dates())) == 1000
    held_out.cache_clear()
    held_out_dates.cache_clear()
    assert held_out() == held                             # regenerated: the same 1,000 examples
    held_dates = {d.isoformat() for d in held_out_dates()}
    assert {iso for _, iso in held} == held_dates
    train = examples(5000, "train", torch.Generator().manual_seed(0))
    assert not {iso for _, iso in train} & held_dates     # training never sees a held-out date
    assert {iso for _, iso in examples(500, "val", torch.Generator().manual_seed(0))} <= held_dates
    forms = Counter(next(iter(readings(text)))[0] for text, _ in held)
    assert set(forms) == set(FORMS) and max(forms.values()) - min(forms.values()) <= 1


def test_vocabularies_round_trip():
    for vocab in (SRC_VOCAB, TGT_VOCAB):
        assert vocab.tokens[:3] == ["<pad>", "<bos>", "<eos>"] and (vocab.pad, vocab.bos, vocab.eos) == (0, 1, 2)
    for text, iso in examples(300, "train", torch.Generator().manual_seed(1)):
        assert SRC_VOCAB.decode(SRC_VOCAB.encode(text)) == text
        assert TGT_VOCAB.decode(TGT_VOCAB.encode(iso)) == iso


def test_teacher_forcing_batch_is_padded_and_shifted():
    pairs = examples(16, "train", torch.Generator().manual_seed(2))
    src, decoder_input, target = teacher_forcing_batch(pairs)
    longest = max(len(text) for text, _ in pairs)
    assert src.shape == (16, longest) and decoder_input.shape == target.shape == (16, 11)
    assert src.dtype == decoder_input.dtype == target.dtype == torch.int64
    for row, (text, iso) in enumerate(pairs):
        assert SRC_VOCAB.decode(src[row, :len(text)]) == text and (src[row, len(text):] == SRC_VOCAB.pad).all()
        assert decoder_input[row, 0] == TGT_VOCAB.bos and TGT_VOCAB.decode(decoder_input[row, 1:]) == iso
        assert TGT_VOCAB.decode(target[row, :10]) == iso and target[row, 10] == TGT_VOCAB.eos


def test_short_training_through_fit_lowers_the_loss_with_the_given_parts():
    parts = reference_parts()
    calls = Counter()
    for name in ("cross_entropy", "shift_for_teacher_forcing", "greedy_decode", "beam_search", "train_step"):
        def spy(*args, _f=parts.objects[name], _name=name, **kwargs):
            calls[_name] += 1
            return _f(*args, **kwargs)
        parts.objects[name] = spy
    model = dataclasses.replace(DatesConfig().model, d_model=32, num_heads=2, num_encoder_layers=1,
                                num_decoder_layers=1, d_ff=64)
    config = DatesConfig(model,
                         train=TrainConfig(steps=60, batch_size=32, max_lr=3e-3, warmup_steps=5, eval_batches=1,
                                           threads=1, progress=False))
    run = train_dates(config, parts=parts)
    losses = run.history.train_loss
    assert len(losses) == 60 and sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5
    assert len(run.history.val) == 1 and 0.0 <= run.accuracy <= 1.0
    assert calls["train_step"] == 60 and calls["cross_entropy"] >= 61 and calls["greedy_decode"] >= 2
    text = "Tuesday, 3rd of March 1998"
    assert isinstance(run.translate(text, beam_size=3), str) and calls["beam_search"] == 1
    weights, output = run.cross_attention(text)
    assert output == run.translate(text)
    assert weights.shape == (1, 2, len(output) + 1, len(text))
    assert torch.allclose(weights.sum(dim=-1), torch.ones(weights.shape[:-1]), atol=1e-5)
    run.plot_cross_attention(text)


def test_recorded_run_meets_the_target():
    if not RECORD_PATH.exists():
        pytest.skip("no recorded run: python -m course.dates record")
    assert RECORD_PATH.stat().st_size < 100_000
    run = json.loads(RECORD_PATH.read_text())
    assert run["accuracy"] >= 0.99 and run["held_out"] == 1000 and run["seconds"] <= 300
    assert len(run["train_loss"]) <= 200 and run["train_loss"][-1] < run["train_loss"][0]
    attention = run["cross_attention"]
    weights = torch.tensor(attention["weights"])
    assert weights.shape == (len(attention["output"]) + 1, len(attention["text"]))
    assert torch.allclose(weights.sum(dim=-1), torch.ones(len(weights)), atol=0.02)
