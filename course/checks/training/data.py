"""10.1 decoder inputs and targets for teacher forcing, 10.6 BERT's masked-token inputs.

The kernel records what mask_tokens returned on its draws (`course.probing.calls.training`:
`mask_draws`, `mask_once`); the facts the contract promises (which positions changed, to what,
how often) are derived from them there too, by each check's probe's `observe` (`mask_facts`,
`rate_facts`), which the judge runs outside the sandbox; the answers here are those facts."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from course.probing.calls.training import P_DEFAULT, uniform_or_unchecked
from course.probing.plain import dtype_name

from ..framework import Case, Check, Mistake, register
from ..kit import raises, unless, variant

# ------------------------------------------------------- 10.1 teacher forcing ---

def _shift_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    # (lengths of the rows, n, bos, eos, pad, dtype)
    specs = [([2, 4], 4, 1, 2, 0, torch.int64), ([3, 1, 5], 5, 1, 2, 0, torch.int64)] if not hidden else [
        ([3, 6, 1, 4], 6, 1, 2, 0, torch.int64), ([2, 5, 5], 5, 5, 6, 3, torch.int64),
        ([0, 3], 4, 1, 2, 0, torch.int64), ([1], 1, 1, 2, 0, torch.int64), ([4, 2, 7, 1, 3], 7, 2, 3, 1, torch.int32),
        ([2, 2], 3, 10, 11, 12, torch.int64), (None, 3, 1, 2, 0, torch.int64), ("1-d", 4, 1, 2, 0, torch.int64)]
    cases = []
    for lengths, n, bos, eos, pad, dtype in specs:
        if lengths is None or lengths == "1-d":  # not (batch, n): a 3- or a 1-dimensional tensor
            tgt = torch.from_numpy(rng.integers(3, 9, size=(2, 2, n) if lengths is None else (n,))).to(dtype)
        else:
            symbols = [i for i in range(20) if i not in (0, 1, 2, bos, eos, pad)]
            tgt = torch.full((len(lengths), n), pad, dtype=dtype)
            for b, length in enumerate(lengths):
                tgt[b, :length] = torch.from_numpy(rng.choice(symbols, size=length)).to(dtype)
            if pad != 0 and lengths[0] > 0:
                tgt[0, 0] = 0                     # a real token 0, where the padding id is not 0
        what = (f"rows of {lengths} tokens padded to {n}" if tgt.dim() == 2
                else f"a {tgt.dim()}-d tensor {tuple(tgt.shape)}")
        cases.append(Case(f"tgt {what} ({dtype_name(dtype)}), bos={bos}, eos={eos}, pad={pad}",
                          (tgt, bos, eos, pad)))
    return cases


def _shift(case: Case, *, shifted: bool = True, eos: str = "after", pad_zero: bool = False,
           eos_in_input: bool = False) -> Any:
    tgt, bos, eos_id, pad = case.args
    if tgt.dim() != 2:
        return raises("tgt must have shape (batch, n)")
    rows_in, rows_out = [], []
    for row in tgt.tolist():
        length = sum(t != (0 if pad_zero else pad) for t in row)   # padding only at the end
        rows_in.append([bos, *row])
        out = [*row, pad]
        if eos == "after":
            out[length] = eos_id
        elif eos == "last":                       # at the end of the padded row
            out[-1] = eos_id
        rows_out.append(out)                      # eos == "none": left out
        if eos_in_input:                          # the input is <bos> + target[:-1]
            rows_in[-1] = [bos, *out[:-1]]
    decoder_input = torch.tensor(rows_in, dtype=tgt.dtype)
    target = torch.tensor(rows_out, dtype=tgt.dtype)
    return decoder_input, (target if shifted else decoder_input)


def _pad_not_zero(case: Case) -> bool:
    return case.args[3] != 0


_NOT_SHIFTED = ("Did you forget to shift? The target at position i is the token that FOLLOWS decoder_input[:, :i + 1] "
                "(target = y_1 .. y_L <eos>), not the decoder's own input: trained that way the model learns to copy.")

# ------------------------------------------------------- 10.6 masked tokens ---

def _mask_case(rng: np.random.Generator, batch: int, n: int, vocab: int, specials: list[int] | tuple[int, ...],
               mask_id: int, p: float, pad_tail: int = 0, global_rng: bool = False, *, rates: bool = False) -> Case:
    """p is left out where it is the default (0.15); with global_rng, so is the generator: torch's global
    generator, seeded by the check, is then the one the contract names. `rates`: a mask_tokens_rates
    case, whose single seeded draw (`mask_once`) always passes a generator (no "global_rng" in meta)."""
    ordinary = [i for i in range(vocab) if i not in specials]
    tokens = torch.from_numpy(rng.choice(ordinary, size=(batch, n))).long()
    if len(specials) > 1:
        tokens[:, 0] = specials[0]                                        # a [CLS]-like token first
    if pad_tail:
        tokens[:, -pad_tail:] = specials[-1]                              # padding at the end
    label = (f"tokens ({batch}, {n}) over {vocab} ids, special_ids={specials}, mask_id={mask_id}, "
             + (f"p={p}" if p != P_DEFAULT else "p left out")
             + (f", {pad_tail} padding positions per row" if pad_tail else "")
             + (", no generator (torch's global one, seeded)" if global_rng else ""))
    return Case(label, (tokens, mask_id, vocab, specials), {"p": p} if p != P_DEFAULT else {},
                meta={"seed": int(rng.integers(2**31))} | ({} if rates else {"global_rng": global_rng}))


def _mask_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(2, 12, 20, [0, 1, 2], 1, 0.3, 3), (3, 8, 15, [0, 1], 1, 0.15, 0)] if not hidden else [
        (4, 16, 30, [0, 1, 2, 3], 3, 0.25, 4), (1, 40, 12, [5, 0], 5, 0.5, 6), (3, 10, 25, [0, 1, 2], 2, 0.0, 2),
        (2, 9, 18, [0, 1, 2], 1, 1.0, 3), (5, 7, 40, (7, 8, 9), 9, 0.15, 0), (2, 6, 10, [0, 1], 1, 1.5, 0),
        (2, 6, 10, [0, 1], 1, -0.1, 0), (4, 16, 30, [0, 1, 2], 1, 0.3, 0, True),
        (4, 16, 30, [0, 1, 2], 1, 0.15, 2, True)]
    return [_mask_case(rng, *spec) for spec in specs]


def _mask(case: Case, *, labels_everywhere: bool = False, specials_selected: bool = False,
          any_random: bool = False, global_rng: bool = False, label_inputs: bool = False,
          fresh_default: bool = False) -> Any:
    tokens, _, _, specials = case.args
    p = case.kwargs.get("p", P_DEFAULT)
    if not 0 <= p <= 1:
        return raises("p must be in [0, 1]")
    ordinary = int((~torch.isin(tokens, torch.tensor(specials))).sum())
    count: int | str = ordinary * int(p) if p in (0.0, 1.0) else "not checked here"
    if labels_everywhere and p in (0.0, 1.0) or specials_selected and p == 1.0:
        count = tokens.numel()
    return {
        "shapes and dtypes of (inputs, labels)": [(tuple(tokens.shape), "int64")] * 2,
        "labels: the original token or -100": not label_inputs,
        "every position has a label": labels_everywhere or specials_selected and p == 1.0,
        "special positions never selected": not (specials_selected or labels_everywhere),
        "unselected positions left as they were": True,
        "selected positions hold the mask, the original or an ordinary token": not any_random,
        "the same generator seed gives the same result": not global_rng,
        "positions selected": count,
        "without a generator, another global seed gives another result":
            not fresh_default if case.meta["global_rng"] else "not checked here",
    }


# Rates over many positions: what share of the ordinary positions is selected, and of those what
# share becomes the mask, another token or stays. A random token equals the original with
# probability 1 / (number of ordinary ids), so "kept" is 0.1 + 0.1 / K and "random" 0.1 - 0.1 / K.

def _rate_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(128, 128, 30, [0, 1, 2], 1, 0.15, 8)] if not hidden else [
        (128, 128, 50, [0, 1, 2, 3], 3, 0.15, 16), (128, 128, 8, [0, 1], 1, 0.4, 0),
        (128, 128, 20, [2, 0, 1], 2, 0.25, 10), (128, 128, 10, [0, 4, 9], 4, 0.3, 0)]
    return [_mask_case(rng, *spec, rates=True) for spec in specs]


def _rates(case: Case, *, mask: float = 0.8, random: float = 0.1, any_random: bool = False,
           lowest: bool = False) -> dict[str, Any]:
    """`lowest`: the random replacement drawn from the ids above the first len(specials), as if the specials
    were the lowest ids."""
    _, _, vocab, specials = case.args
    k = vocab - len(specials)
    keep = 1.0 - mask - random
    off = lowest and sorted(specials) != list(range(len(specials)))  # then a special is drawn, an ordinary id never
    return {"no random replacement is a special id": not (any_random or off),
            "rows select different numbers of positions": True, "selected": case.kwargs.get("p", P_DEFAULT),
            "of the selected: mask": mask,
            "of the selected: another token": random * (1 - 1 / k), "of the selected: unchanged": keep + random / k,
            "random tokens: every ordinary id drawn, none twice as often as uniform":
                uniform_or_unchecked(case, not off)}


_ANY_RANDOM = ("Did you draw the random replacement from the whole vocabulary? It is drawn uniformly from the "
               "ordinary ids: never a special id such as padding or the mask.")
_SPECIAL = ("Did you select special tokens? Positions holding a special id (padding, [CLS], [SEP], the mask itself) "
            "are never selected: their labels stay -100 and their inputs unchanged.")

register(
    __name__,
    Check(name="shift_for_teacher_forcing", cases=_shift_cases, expected=_shift,
          mistakes=[Mistake(_NOT_SHIFTED, variant(_shift, shifted=False)),
                    Mistake("Did you put <eos> in the last column? It goes right after each row's last real token "
                            "(at index L), before that row's padding.", variant(_shift, eos="last")),
                    Mistake("Did you leave out <eos>? The model must learn to end the sequence: target = y_1 .. y_L "
                            "<eos>, then padding.", variant(_shift, eos="none")),
                    Mistake("Did you feed <eos> to the decoder (decoder_input = <bos> + target[:-1])? The decoder "
                            "input holds <bos> and the row's tokens, then padding: <eos> is only ever a target.",
                            variant(_shift, eos_in_input=True)),
                    Mistake("Did you assume the padding id is 0? Count a row's real tokens with tgt != pad.",
                            unless(_pad_not_zero, variant(_shift, pad_zero=True)))],
          hint="shift_for_teacher_forcing returns (decoder_input, target), both (batch, n + 1) of tgt's dtype: "
               "decoder_input = <bos> y_1 .. y_L then pad; target = y_1 .. y_L <eos> then pad, where L is the row's "
               "number of tokens that are not pad; a tgt that is not 2-dimensional raises ValueError."),
    Check(name="mask_tokens", guard=True, cases=_mask_cases, expected=_mask,
          mistakes=[Mistake(_SPECIAL, variant(_mask, specials_selected=True)),
                    Mistake("Did you give every position a label? Only selected positions get one (the original "
                            "token); every other label is -100, so the loss skips it.",
                            variant(_mask, labels_everywhere=True)),
                    Mistake(_ANY_RANDOM, variant(_mask, any_random=True)),
                    Mistake("Did you use the global random generator? Pass generator=generator to every torch.rand / "
                            "torch.randint / torch.bernoulli call, so one seed reproduces the masking.",
                            variant(_mask, global_rng=True)),
                    Mistake("Did you make a new torch.Generator() when none is given? An unseeded new generator "
                            "gives the same masking every time; without a generator, draw from torch's global one "
                            "(pass generator=None through to torch.rand and torch.randint).",
                            unless(lambda c: c.meta["global_rng"], variant(_mask, fresh_default=True))),
                    Mistake("Did you take the labels after masking? A label is the ORIGINAL token at its position "
                            "(what the model must recover), not the [MASK] id.", variant(_mask, label_inputs=True))],
          hint="mask_tokens returns (inputs, labels), both (batch, n) int64: labels hold the original token at "
               "selected positions and -100 elsewhere; special positions are never selected; unselected inputs "
               "stay as they were; a selected input becomes mask_id (80%), an ordinary random id (10%) or stays "
               "(10%); all randomness from `generator`; p outside [0, 1] raises ValueError."),
    Check(name="mask_tokens_rates", cases=_rate_cases, expected=_rates, rtol=0.0, atol=0.04,
          mistakes=[Mistake(_ANY_RANDOM, variant(_rates, any_random=True)),
                    Mistake("Did you assume the special ids are the lowest (drawing from len(special_ids) .. "
                            "vocab_size - 1)? They can be any ids: draw from the ids that are not special.",
                            variant(_rates, lowest=True)),
                    Mistake("Did you replace every selected token by the mask? BERT's rule is 80% mask, 10% a "
                            "random token, 10% unchanged, so the model cannot rely on seeing [MASK] where it must "
                            "predict.", variant(_rates, mask=1.0, random=0.0)),
                    Mistake("Did you swap the shares? 80% of the selected positions become the mask, 10% a random "
                            "token, 10% stay.", variant(_rates, mask=0.1, random=0.1)),
                    Mistake("Did you give a random token to 10% of the positions left after masking? That is 10% "
                            "of 20%, 2% of the selected. Of the unmasked fifth, half get a random token and half "
                            "stay.", variant(_rates, random=0.02))],
          hint="Over 16,384 positions (within 0.04): the share of ordinary positions selected is p, each position "
               "on its own (so rows select different numbers); of the selected, 0.8 become mask_id, 0.1 a random "
               "ordinary id (which is the original token again with probability 1/K, K ordinary ids) and 0.1 stay; "
               "the random ids are uniform over the K ordinary ids (each about 1/K of them)."),
)
