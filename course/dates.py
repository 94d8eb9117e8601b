"""Run A of chapter 10: an encoder-decoder that reads dates written in many forms and writes ISO 8601.

The task, generated here (no download): a date between 1950-01-01 and 2049-12-31, written in one
of the `FORMS` ("3 March 1998", "March 3rd, 1998", "03/03/98", "Tuesday, 3rd of March 1998",
"1998-3-3", "3.3.1998", "mar 3 98", ...; each with random variants: zero padding or not, ordinals,
abbreviated or full names, lower, upper or title case), must become ``"1998-03-03"``. Numeric forms
put the day first, except those that start with the four-digit year; two-digit years ``50`` .. ``99``
are 1950 .. 1999 and ``00`` .. ``49`` are 2000 .. 2049. A weekday, when written, is always right.
To copy the day, the month and the year the decoder has to look at the right source characters, and
they move from form to form: cross-attention is the whole job, and its maps show it.

Pieces:

* `SRC_VOCAB`, `TGT_VOCAB`: character vocabularies (`course.reversal.Vocab`), ``<pad>`` = 0,
  ``<bos>`` = 1, ``<eos>`` = 2.
* `render(day, form, rng)`: one text of a date; `examples(n, split, generator)`: n (text, iso) pairs.
* The held-out set, `held_out()`: 1,000 fixed examples on 1,000 dates (drawn once with
  `HELD_OUT_SEED`) that training never sees in any form, each form equally often. Training draws
  from the other 35,525 dates; the "val" split renders the held-out dates in fresh random forms.
* `encode_pairs(pairs)` -> (src, tgt) padded id tensors; `teacher_forcing_batch(...)`, `loss(...)`:
  the batch and loss that `course.train.fit` trains on.
* `train_dates(config_or_preset)` -> `TrainedDates`: ``.accuracy`` (exact match, greedy, on the
  1,000 held-out examples), ``.translate(text, beam_size=...)``, ``.cross_attention(text)``,
  ``.plot_cross_attention(text)``. `PRESETS`: "cpu" trains for 3 minutes (the learning-rate
  schedule runs on the clock, so a busy machine takes fewer steps), "cpu-steps" for 2,000 steps.
* `record()` writes ``course/runs/dates_cpu.json`` (``python -m course.dates record``).

Every piece of the course the run uses (model pieces, shift, loss, decoding) comes from a `Parts`:
the reference by default, a learner's own answers when given.

Example::

    run = train_dates("cpu")
    print(run.accuracy, run.history.seconds)
    run.translate("Tuesday, 3rd of March 1998")            # '1998-03-03'
    run.plot_cross_attention("mar 3 98")
"""

from __future__ import annotations

import json
import random
import string
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import date, timedelta
from functools import cache
from pathlib import Path

import torch

from course.models import Seq2SeqConfig, Seq2SeqModel
from course.parts import Parts, reference_parts
from course.reversal import Vocab, plot_attention
from course.train import History, TrainConfig, cpu_threads, fit, load_average

__all__ = [
    "FORMS",
    "HELD_OUT_SEED",
    "PRESETS",
    "SRC_VOCAB",
    "TGT_VOCAB",
    "DatesConfig",
    "TrainedDates",
    "encode_pairs",
    "examples",
    "held_out",
    "held_out_dates",
    "loss",
    "record",
    "render",
    "teacher_forcing_batch",
    "train_dates",
]

FIRST, LAST = date(1950, 1, 1), date(2049, 12, 31)
HELD_OUT_SEED = 1998
HELD_OUT_SIZE = 1000

SRC_VOCAB = Vocab(symbols=string.digits + string.ascii_lowercase + string.ascii_uppercase + " ,./-")
TGT_VOCAB = Vocab(symbols=string.digits + "-")

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _ordinal(n: int) -> str:
    """3 -> '3rd', 11 -> '11th', 22 -> '22nd'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _number(n: int, rng: random.Random) -> str:
    """A day or month number, zero-padded or not."""
    return rng.choice([str(n), f"{n:02d}"])


def _day(d: date, rng: random.Random) -> str:
    """The day of the month: '3', '03' or '3rd'."""
    return rng.choice([str(d.day), f"{d.day:02d}", _ordinal(d.day)])


def _month(d: date, rng: random.Random) -> str:
    """The month's name: 'March', 'Mar' or 'Mar.'."""
    name = MONTHS[d.month - 1]
    return rng.choice([name, name[:3], name[:3] + "."]) if len(name) > 3 else name


def _weekday(d: date, rng: random.Random) -> str:
    """The (right) day of the week: 'Tuesday' or 'Tue'."""
    name = WEEKDAYS[d.weekday()]
    return rng.choice([name, name[:3]])


# form name (an example of it, for 1998-03-03) -> a function (date, rng) -> one text of that form
FORMS: dict[str, Callable[[date, random.Random], str]] = {
    "3 March 1998": lambda d, r: f"{_day(d, r)} {_month(d, r)} {d.year}",
    "March 3, 1998": lambda d, r: f"{_month(d, r)} {_day(d, r)}, {d.year}",
    "Tuesday, 3rd of March 1998": lambda d, r: f"{_weekday(d, r)}, {_ordinal(d.day)} of {_month(d, r)} {d.year}",
    "Tuesday, March 3, 1998": lambda d, r: f"{_weekday(d, r)}, {_month(d, r)} {_day(d, r)}, {d.year}",
    "the 3rd of March, 1998": lambda d, r: f"the {_ordinal(d.day)} of {_month(d, r)}, {d.year}",
    "mar 3 98": lambda d, r: f"{MONTHS[d.month - 1][:3]} {_number(d.day, r)} {d.year % 100:02d}",
    "03-Mar-1998": lambda d, r: f"{_number(d.day, r)}-{MONTHS[d.month - 1][:3]}-{d.year}",
    "03/03/98": lambda d, r: f"{_number(d.day, r)}/{_number(d.month, r)}/{d.year % 100:02d}",
    "03/03/1998": lambda d, r: f"{_number(d.day, r)}/{_number(d.month, r)}/{d.year}",
    "3.3.1998": lambda d, r: f"{_number(d.day, r)}.{_number(d.month, r)}.{d.year}",
    "1998-3-3": lambda d, r: f"{d.year}-{_number(d.month, r)}-{_number(d.day, r)}",
    "1998/03/03": lambda d, r: f"{d.year}/{d.month:02d}/{d.day:02d}",
    "19980303": lambda d, r: f"{d.year}{d.month:02d}{d.day:02d}",
}


def render(day: date, form: str, rng: random.Random) -> str:
    """One text of `day` in `form` (a key of FORMS), its variants and case drawn from `rng`."""
    text = FORMS[form](day, rng)
    return rng.choice([str, str.lower, str.upper])(text)


@cache
def held_out_dates() -> tuple[date, ...]:
    """The 1,000 dates of the held-out set, drawn once with HELD_OUT_SEED; training never sees them."""
    days = (LAST - FIRST).days + 1
    offsets = random.Random(HELD_OUT_SEED).sample(range(days), HELD_OUT_SIZE)
    return tuple(FIRST + timedelta(days=k) for k in offsets)


@cache
def _training_dates() -> tuple[date, ...]:
    """Every date of the range that is not held out."""
    held = set(held_out_dates())
    days = (LAST - FIRST).days + 1
    return tuple(d for d in (FIRST + timedelta(days=k) for k in range(days)) if d not in held)


@cache
def held_out() -> tuple[tuple[str, str], ...]:
    """The 1,000 fixed held-out (text, iso) pairs: example i is held_out_dates()[i] in form i % len(FORMS)."""
    rng = random.Random(HELD_OUT_SEED + 1)
    forms = list(FORMS)
    return tuple((render(d, forms[i % len(forms)], rng), d.isoformat())
                 for i, d in enumerate(held_out_dates()))


def examples(n: int, split: str = "train", generator: torch.Generator | None = None) -> list[tuple[str, str]]:
    """n random (text, iso) pairs. split "train": dates outside the held-out set; "val": the
    held-out dates in fresh random forms and variants. All randomness comes from `generator`."""
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    rng = random.Random(torch.randint(2 ** 62, (1,), generator=generator).item())
    pool = _training_dates() if split == "train" else held_out_dates()
    forms = list(FORMS)
    days = rng.choices(pool, k=n)
    return [(render(d, rng.choice(forms), rng), d.isoformat()) for d in days]


def _pad(rows: Sequence[list[int]], pad: int) -> torch.Tensor:
    """Lists of ids -> (len(rows), longest) int64, padded on the right."""
    out = torch.full((len(rows), max(map(len, rows))), pad, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.tensor(row)
    return out


def encode_pairs(pairs: Sequence[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(text, iso) pairs -> (src (batch, longest text), tgt (batch, 10)), int64 ids padded with <pad>
    (no <bos> / <eos>: `shift_for_teacher_forcing` adds them to the target)."""
    return (_pad([SRC_VOCAB.encode(text) for text, _ in pairs], SRC_VOCAB.pad),
            _pad([TGT_VOCAB.encode(iso) for _, iso in pairs], TGT_VOCAB.pad))


# ------------------------------------------------------------------ training ---

def teacher_forcing_batch(pairs: Sequence[tuple[str, str]],
                          parts: Parts | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(text, iso) pairs -> (src (batch, n_src), decoder_input (batch, 11), target (batch, 11)):
    decoder_input = <bos> y_1 .. y_10, target = y_1 .. y_10 <eos> (`parts.shift_for_teacher_forcing`)."""
    parts = parts or reference_parts()
    src, tgt = encode_pairs(pairs)
    return (src, *parts.shift_for_teacher_forcing(tgt, TGT_VOCAB.bos, TGT_VOCAB.eos, TGT_VOCAB.pad))


def loss(model: Seq2SeqModel, batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor], label_smoothing: float = 0.1,
         parts: Parts | None = None) -> torch.Tensor:
    """The mean cross-entropy (`parts.cross_entropy`, padding ignored, label smoothing) of a
    `teacher_forcing_batch`: a 0-dim tensor."""
    parts = parts or reference_parts()
    src, decoder_input, target = batch
    return parts.cross_entropy(model(src, decoder_input), target, pad=TGT_VOCAB.pad, label_smoothing=label_smoothing)


@dataclass
class DatesConfig:
    """A run: the model (its shape), the loss's label smoothing, and the training (batches included)."""

    model: Seq2SeqConfig = field(default_factory=lambda: Seq2SeqConfig(
        src_vocab=SRC_VOCAB.size, tgt_vocab=TGT_VOCAB.size, d_model=64, num_heads=4, num_encoder_layers=2,
        num_decoder_layers=2, d_ff=256, dropout=0.0, pad=SRC_VOCAB.pad, max_len=64))
    label_smoothing: float = 0.1
    train: TrainConfig = field(default_factory=lambda: TrainConfig(
        steps=2000, batch_size=64, max_lr=3e-3, min_lr=3e-4, warmup_steps=50, eval_every=250, eval_batches=4,
        threads=1, time_limit=295))


# One thread: on an idle 2-core CPU two threads train these small tensors about 1.5 times faster,
# but several times slower when other processes share the cores.
PRESETS: dict[str, DatesConfig] = {
    # 2,000 steps, the same run on any machine. Measured on 2 shared cores at load average 7.5:
    # time_limit stopped it at step 1,989 after 300 s, 99.8% exact match
    "cpu-steps": DatesConfig(),
    # 3 minutes of training whatever the load: the learning-rate schedule runs on the clock
    "cpu": DatesConfig(train=replace(DatesConfig().train, schedule="time", time_limit=180)),
}

MAX_NEW_TOKENS = 11  # ten characters of yyyy-mm-dd, then <eos>


@dataclass
class TrainedDates:
    """A trained date model with what the chapter shows: accuracy, translations, cross-attention."""

    model: Seq2SeqModel
    config: DatesConfig
    history: History
    parts: Parts
    accuracy: float = float("nan")    # exact match on held_out(), greedy decoding

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _logits_fn(self, src: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        """src (batch, n_src) -> next_token_logits(ids) for the decoding functions: the source is
        encoded once; ids (rows, t) on the CPU, rows = batch or (for beam search, batch 1) any
        number of hypotheses -> logits (rows, |TGT|) on the CPU."""
        src = src.to(self.device)
        memory = self.model.encode(src)

        def next_token_logits(ids: torch.Tensor) -> torch.Tensor:
            rows = ids.shape[0]       # a one-row source expands to beam search's hypotheses
            return self.model.decode(ids.to(self.device), memory.expand(rows, -1, -1),
                                     src.expand(rows, -1))[:, -1].float().cpu()

        return next_token_logits

    @staticmethod
    def _text(ids: torch.Tensor) -> str:
        """Generated ids after <bos>, up to the first <eos> -> text (another special token shows as
        itself, so it never matches a date)."""
        ids = ids.tolist()
        ids = ids[:ids.index(TGT_VOCAB.eos)] if TGT_VOCAB.eos in ids else ids
        return TGT_VOCAB.decode(ids, keep_specials=True)

    @torch.no_grad()
    def predict(self, texts: Sequence[str], batch_size: int = 500) -> list[str]:
        """Greedy translations (`parts.greedy_decode`) of many texts, `batch_size` at a time, on
        the training's CPU threads (config.train.threads)."""
        self.model.eval()
        out = []
        with cpu_threads(self.config.train.threads):
            for i in range(0, len(texts), batch_size):
                src, _ = encode_pairs([(text, "") for text in texts[i:i + batch_size]])
                bos = torch.full((len(src), 1), TGT_VOCAB.bos)
                ids = self.parts.greedy_decode(self._logits_fn(src), bos, MAX_NEW_TOKENS, TGT_VOCAB.eos,
                                               TGT_VOCAB.pad)
                out += [self._text(row[1:]) for row in ids]
        return out

    def exact_match(self, pairs: Sequence[tuple[str, str]]) -> float:
        """The fraction of (text, iso) pairs translated exactly right by greedy decoding."""
        predicted = self.predict([text for text, _ in pairs])
        return sum(p == iso for p, (_, iso) in zip(predicted, pairs)) / len(pairs)

    @torch.no_grad()
    def translate(self, text: str, beam_size: int = 1) -> str:
        """One text -> its ISO date: greedy for beam_size 1, else `parts.beam_search`."""
        if beam_size == 1:
            return self.predict([text])[0]
        self.model.eval()
        src, _ = encode_pairs([(text, "")])
        ids, _ = self.parts.beam_search(self._logits_fn(src), torch.tensor([[TGT_VOCAB.bos]]), beam_size,
                                        MAX_NEW_TOKENS, TGT_VOCAB.eos)
        return self._text(ids[0, 1:])

    @torch.no_grad()
    def cross_attention(self, text: str) -> tuple[torch.Tensor, str]:
        """The decoder's cross-attention on `text` while it writes its own greedy translation.
        Returns (weights (decoder layers, heads, len(output) + 1, len(text)), output): row i is
        where the decoder looked to produce output character i (the last row: <eos>); from
        each DecoderLayer's ``cross_weights`` after one teacher-forced pass over the output."""
        output = self.translate(text)
        src, tgt = encode_pairs([(text, output)])
        decoder_input, _ = self.parts.shift_for_teacher_forcing(tgt, TGT_VOCAB.bos, TGT_VOCAB.eos, TGT_VOCAB.pad)
        self.model(src.to(self.device), decoder_input.to(self.device))
        weights = [layer.cross_weights[0].float().cpu() for layer in self.model.transformer.decoder.layers]
        return torch.stack(weights), output

    def plot_cross_attention(self, text: str, layer: int = -1, head: int | None = None, ax=None):
        """`course.reversal.plot_attention` of one decoder layer's cross-attention (averaged over the
        heads unless `head` is given): source characters across, output characters down."""
        weights, output = self.cross_attention(text)
        w = weights[layer].mean(dim=0) if head is None else weights[layer, head]
        which = "mean over heads" if head is None else f"head {head}"
        ax = plot_attention(w, list(text), [*output, "<eos>"], ax=ax,
                            title=f"decoder layer {layer % len(weights)}, {which}")
        ax.set(xlabel="source character", ylabel="output character")
        return ax


def train_dates(config: DatesConfig | str = "cpu", parts: Parts | None = None,
                callback: Callable[[int, History], None] | None = None) -> TrainedDates:
    """Train a `Seq2SeqModel` (built from `parts`) on the date task with `course.train.fit`, then
    measure its exact-match accuracy on the 1,000 held-out examples. `config`: a DatesConfig or
    the name of a preset. The model's initialisation and the batches are drawn from config.train.seed."""
    config = PRESETS[config] if isinstance(config, str) else config
    parts = parts or reference_parts()
    torch.manual_seed(config.train.seed)
    model = Seq2SeqModel(config.model, parts=parts)

    def get_batch(split: str, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return teacher_forcing_batch(examples(config.train.batch_size, split, generator), parts)

    history = fit(model, get_batch, lambda m, batch: loss(m, batch, config.label_smoothing, parts), config.train,
                  count=lambda batch: int((batch[2] != TGT_VOCAB.pad).sum()), parts=parts, callback=callback)
    run = TrainedDates(model, config, history, parts)
    run.accuracy = run.exact_match(held_out())
    return run


# ----------------------------------------------------------------- recording ---

RECORD_PATH = Path(__file__).parent / "runs" / "dates_cpu.json"
SHOWN = ["Tuesday, 3rd of March 1998", "mar 3 98", "03/03/98", "the 29th of february, 2000", "12.11.1955",
         "SUNDAY, JULY 4TH, 2049"]
ALIGNED = "Tuesday, 3rd of March 1998"     # the example whose cross-attention map is recorded


def _round(x: object, digits: int = 3) -> object:
    """Floats in nested lists rounded (the recorded file stays small)."""
    return [_round(v, digits) for v in x] if isinstance(x, list) else round(x, digits)


def record(config: DatesConfig | str = "cpu", path: Path | str | None = RECORD_PATH, points: int = 200) -> dict:
    """Train `config` and return (and write to `path`, unless None) a small JSON-able record of the run:
    the config, the loss curve subsampled to at most `points` points, the validation curve, the
    accuracy, greedy and beam translations of SHOWN, the cross-attention map of ALIGNED (last decoder
    layer, mean over heads), the hardware and the machine's load averages before and after."""
    before = load_average()
    run = train_dates(config)
    history = run.history
    every = -(-len(history.train_loss) // points)     # ceil: at most `points` points
    weights, output = run.cross_attention(ALIGNED)
    result = {
        "task": "dates", "config": asdict(run.config), "accuracy": run.accuracy, "held_out": len(held_out()),
        "seconds": history.seconds, "steps": history.steps, "tokens_per_second": history.tokens_per_second,
        "hardware": history.hardware, "device": history.device,
        "train_loss": _round(history.train_loss[::every], 4), "train_loss_every": every,
        "val": [[step, round(value, 4)] for step, value in history.val],
        "val_seconds": _round(history.val_seconds, 1),
        "translations": [{"text": text, "greedy": run.translate(text), "beam": run.translate(text, beam_size=4)}
                         for text in SHOWN],
        "cross_attention": {"text": ALIGNED, "output": output, "layer": len(weights) - 1,
                            "weights": _round(weights[-1].mean(dim=0).tolist())},
        "load_average_before": before, "load_average": load_average(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if path is not None:
        Path(path).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    if sys.argv[1:2] != ["record"]:
        sys.exit("usage: python -m course.dates record [PRESET]   (writes course/runs/dates_cpu.json)")
    done = record(*sys.argv[2:3])
    print(f"exact match {done['accuracy']:.1%} on {done['held_out']} held-out dates after {done['steps']} steps, "
          f"{done['seconds']:.0f} s of training; {done['hardware']}; load {done['load_average_before']} -> "
          f"{done['load_average']}")
