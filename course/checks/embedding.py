"""Checks for chapter 2: one-hot vectors, the embedding lookup, the Embedding module.

Oracles are PyTorch's own: ``torch.nn.functional.one_hot`` (cast to float32)
for one-hot vectors, and ``torch.nn.functional.embedding`` (the function
behind ``nn.Embedding``) for lookups, on known weights copied into the
student's module and times sqrt(d_model) when scale=True, the same in
training and in eval mode (the module has no dropout). The module's
initialisation is compared with the report of ``torch.randn(vocab_size,
d_model)``: one float32 parameter, entries near N(0, 1), differentiable,
the constructor's arguments kept as attributes. Errors: an out-of-range id
raises ValueError/IndexError whose message names the id (and, for the
module, vocab_size); float or bool ids given to the module raise TypeError.

The kernel (`course.probing.calls.embedding`) records raw results; the
facts compared here are derived by each probe's `observe` there: whether an
error message names the bad id (`clear_error`), and the initialisation's
report from the weight and its gradient (`init_report`, which
`_init_expected` fills in from the weight ``torch.randn`` draws).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from course.probing.calls.embedding import init_report

from .framework import NOT_APPLICABLE, Case, Check, Mistake, register
from .kit import both_modes, raises, randn, shape_of, unless, variant

FLOAT = torch.float32


def _ids(rng: np.random.Generator, shape: tuple[int, ...], vocab: int, *, edges: bool = False,
         bad: int | None = None) -> torch.Tensor:
    """int64 ids in [0, vocab); with `edges` the first and last are vocab - 1 and 0;
    with `bad`, one random entry replaced by that out-of-range id."""
    ids = torch.from_numpy(rng.integers(0, vocab, size=shape).astype(np.int64))
    flat = ids.view(-1)
    if edges and ids.numel() >= 2:
        flat[0], flat[-1] = vocab - 1, 0
    if bad is not None:
        flat[int(rng.integers(0, ids.numel()))] = bad
    return ids


# -------------------------------------------------------------- one_hot ---

def _one_hot_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((3,), 5), ((2, 3), 4)] if not hidden else \
            [((4, 7), 11), ((2, 3, 5), 6), ((1,), 9), ((3, 1), 1000), ((5, 2), 2), ((1, 13), 13)]
    cases = []
    for shape, vocab in specs:
        ids = _ids(rng, shape, vocab, edges=True)
        cases.append(Case(f"ids of shape {shape_of(ids)}, vocab_size={vocab}", (ids, vocab)))
    if hidden:  # a sequence that repeats a token; one id alone (a 0-d tensor)
        cases.append(Case("ids [[3, 1, 3, 3, 0]] (repeats), vocab_size=4", (torch.tensor([[3, 1, 3, 3, 0]]), 4)))
        cases.append(Case("a single id, shape (), vocab_size=7", (torch.tensor(int(rng.integers(0, 7))), 7)))
    return cases


def _one_hot(case: Case, flat: bool = False, axis_first: bool = False) -> torch.Tensor:
    ids, vocab = case.args
    out = F.one_hot(ids.reshape(-1) if flat else ids, vocab).to(FLOAT)
    return out.movedim(-1, 0) if axis_first else out


def _one_hot_errors_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((3,), 5, -1), ((2, 2), 5, 7)] if not hidden else \
            [((2, 2), 5, 5), ((2, 3, 4), 12, -4), ((2, 6), 40, 123), ((1,), 12, -12), ((3, 5), 8, 9)]
    cases = [_edges_case(5, (5,))] if not hidden else []
    for shape, vocab, bad in specs:  # hidden: bad == vocab (off by one), wrap-around, large ids, 3-D
        ids = _ids(rng, shape, vocab, bad=bad)
        cases.append(Case(f"ids of shape {shape_of(ids)} holding the id {bad}, vocab_size={vocab}",
                          (ids, vocab), meta={"bad": bad}))
    return cases + ([_edges_case(12, (12,))] if hidden else [])


def _edges_case(vocab: int, more_args: tuple = (), **meta: Any) -> Case:
    """Valid ids that touch both ends of [0, vocab): they must NOT raise."""
    ids = torch.tensor([[vocab - 1, 0, vocab // 2], [0, vocab - 1, vocab - 1]])
    return Case(f"ids {ids.tolist()} (0 and vocab_size - 1 are valid ids), vocab_size={vocab}",
                (ids, *more_args), meta={"bad": None, **meta})


def _negative_bad(case: Case) -> bool:
    return case.meta["bad"] is not None and case.meta["bad"] < 0


register(
    __name__,
    Check(name="one_hot", cases=_one_hot_cases, expected=_one_hot,
          mistakes=[Mistake("Did you flatten the ids and forget to restore their shape? The result must have shape "
                            "ids.shape + (vocab_size,).", variant(_one_hot, flat=True)),
                    Mistake("Did you put the vocabulary axis first? It must be the last axis: shape "
                            "ids.shape + (vocab_size,).", variant(_one_hot, axis_first=True))],
          hint="one_hot(ids, vocab_size)[..., j] is 1.0 where ids == j and 0.0 elsewhere, float32 (so that it "
               "can multiply the float matrix E), of shape ids.shape + (vocab_size,). Comparing ids.unsqueeze(-1) "
               "with torch.arange(vocab_size) builds it in one line."),
    Check(name="one_hot_errors", guard=True, cases=_one_hot_errors_cases,
          expected=lambda c: _one_hot(c) if c.meta["bad"] is None else raises(
              f"the id {c.meta['bad']} is outside [0, {c.args[1]}); the message must name it", "ValueError",
              "IndexError"),
          mistakes=[
              Mistake("Negative ids wrap around in PyTorch indexing, as in Python lists: -1 picks the last "
                      "row. Did you check ids < 0 as well as ids >= vocab_size?",
                      unless(_negative_bad, lambda c: torch.eye(c.args[1])[c.args[0]])),
              Mistake("Your one_hot returned a row of zeros for an id outside [0, vocab_size), which would "
                      "embed it silently as the zero vector. Did you check (ids < 0) | (ids >= vocab_size) "
                      "and raise ValueError? (The valid ids are 0 .. vocab_size - 1.)",
                      unless(lambda c: c.meta["bad"] is not None,
                             lambda c: (c.args[0].unsqueeze(-1) == torch.arange(c.args[1])).to(FLOAT))),
          ],
          hint="Check (ids < 0) | (ids >= vocab_size) before building anything, and raise ValueError with a message "
               "that names the bad id, e.g. 'id 7 is out of range for vocab_size 5'; valid ids (0 and vocab_size - 1 "
               "included) must not raise."),
)


# ---------------------------------------------- embed_one_hot, embed_lookup ---

def _embed_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3), 6, 4), ((4,), 5, 3)] if not hidden else \
            [((3, 5), 11, 7), ((2, 6), 4, 9), ((2, 3, 4), 30, 16), ((2, 4), 8, 8), ((1, 1), 3, 5)]
    cases = []  # hidden: d_model > vocab, 3-D ids, a square E (transposes hide there), one token only
    for shape, vocab, d in specs:
        ids, E = _ids(rng, shape, vocab, edges=True), randn(rng, vocab, d)
        cases.append(Case(f"ids of shape {shape_of(ids)}, E of shape ({vocab}, {d})", (ids, E)))
    if hidden:
        cases.append(Case("ids all equal to 2, shape (2, 3), E of shape (5, 6)",
                          (torch.full((2, 3), 2), randn(rng, 5, 6))))
        cases.append(Case("a single id, shape (), E of shape (6, 4)",
                          (torch.tensor(int(rng.integers(0, 6))), randn(rng, 6, 4))))
    return cases


def _lookup(case: Case, flat: bool = False, transposed: bool = False) -> Any:
    ids, E = case.args
    if transposed:  # rows of E.T (columns of E), where the ids allow it
        if int(ids.max()) >= E.shape[1]:
            return NOT_APPLICABLE
        E = E.T.contiguous()
    return F.embedding(ids.reshape(-1) if flat else ids, E)


_EMBED = dict(
    cases=_embed_cases,
    expected=_lookup,
    mistakes=[
        Mistake("Did you flatten the ids and forget to restore their shape? The result must have shape "
                "ids.shape + (d_model,).", variant(_lookup, flat=True)),
        Mistake("Did you use E transposed? E has shape (vocab_size, d_model): token i's vector is the "
                "ROW E[i], not a column.", variant(_lookup, transposed=True)),
    ],
)

register(
    __name__,
    Check(name="embed_one_hot", **_EMBED,
          hint="embed_one_hot(ids, E) is one_hot(ids, E.shape[0]) @ E: one one-hot entry per ROW of E "
               "(vocab_size = E.shape[0], not d_model = E.shape[1]), float32 like E, and E itself, not "
               "E.T; the result has shape ids.shape + (d_model,)."),
    Check(name="embed_lookup", **_EMBED,
          hint="embed_lookup(ids, E) is E[ids]: token i's vector is row i of E (not column i, so not "
               "E.T[ids]), and indexing with a tensor of any shape gives ids.shape + (d_model,) "
               "(index_select, by contrast, only takes 1-D ids)."),
)


# ---------------------------------------------------------- Embedding ---
# Case.args: what forward() is called with (the ids); meta: the constructor's arguments ("size", and
# "scale", None for its default) and the known weights the check copies in.

def _forward_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3), 10, 4, False), ((1, 5), 7, 6, True)] if not hidden else \
            [((4, 9), 50, 8, None), ((3, 2, 7), 13, 5, True), ((11,), 6, 16, True),
             ((2, 4), 9, 9, True), ((2, 5), 100, 3, False), ((3, 3), 12, 4, "int32")]
    cases = []  # hidden: d > vocab, 3-D and 1-D ids, a square table, default scale, int32 ids
    for shape, vocab, d, scale in specs:
        ids, W = _ids(rng, shape, vocab, edges=True), randn(rng, vocab, d)
        label = f"ids of shape {shape_of(ids)}, vocab_size={vocab}, d_model={d}"
        if scale == "int32":
            ids, scale, label = ids.to(torch.int32), True, label + " (int32 ids)"
        scaled = "scale left at its default" if scale is None else f"scale={scale}"
        cases.append(Case(f"{label}, {scaled}", (ids,), meta={"size": (vocab, d), "scale": scale, "weight": W}))
    return cases


def _forward(case: Case, factor: str = "sqrt", when: str = "scale", flat: bool = False) -> dict:
    """The module's output in both modes; the knobs are the scaling mistakes."""
    (ids,), (_, d) = case.args, case.meta["size"]
    on = {"scale": bool(case.meta["scale"]), "always": True, "never": False}[when]
    f = {"sqrt": math.sqrt(d), "d": d, "1/sqrt": 1 / math.sqrt(d)}[factor] if on else 1.0
    out = F.embedding(ids.long(), case.meta["weight"]) * f
    return both_modes(out.reshape(-1, d) if flat else out)


def _init_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(1000, 64)] if not hidden else [(300, 200), (5000, 16), (64, 1000)]
    return [Case(f"vocab_size={v}, d_model={d}", (_ids(rng, (4, 6), v),), meta={"size": (v, d)})
            for v, d in specs]


def _init_expected(case: Case, std: float = 1.0, uniform: bool = False, transposed: bool = False,
                   dtype: str = "float32", registered: bool = True) -> dict:
    vocab, d = case.meta["size"]
    g = torch.Generator().manual_seed(0)
    shape = (d, vocab) if transposed else (vocab, d)
    w = torch.rand(shape, generator=g) if uniform else std * torch.randn(shape, generator=g)
    params = {"weight": (shape, dtype)} if registered else {}
    return init_report(params, {"vocab_size": vocab, "d_model": d, "scale": False}, w, registered)


def _errors_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [((2, 3), 10, 4, -1), ((2, 2), 10, 4, 12), ((1, 3), 10, 4, "float32")] if not hidden else \
            [((3, 4), 20, 6, -3), ((2, 3, 4), 57, 5, 1000), ((1,), 9, 3, -9), ((2, 5), 30, 8, "float64"),
             ((4, 2), 16, 8, -16), ((2, 5), 30, 8, "bool")]
    cases = [] if hidden else [_edges_case(10, size=(10, 4), weight=torch.linspace(-1, 1, 40).view(10, 4))]
    for shape, vocab, d, bad in specs:  # bad: an out-of-range id, or the name of a dtype that is not ids
        W, dtype, bad = randn(rng, vocab, d), *((bad, None) if isinstance(bad, str) else (None, bad))
        ids = _ids(rng, shape, vocab, bad=bad).to(getattr(torch, dtype or "int64"))
        what = (f"{dtype} ids of shape {shape_of(ids)}" if dtype else
                f"ids of shape {shape_of(ids)} holding the id {bad}")
        cases.append(Case(f"{what}, vocab_size={vocab}", (ids,),
                          meta={"size": (vocab, d), "weight": W, "bad": bad}))
    return cases


def _not_ids(case: Case) -> bool:
    return case.args[0].is_floating_point() or case.args[0].dtype == torch.bool


def _errors_expected(case: Case) -> Any:
    (ids,), bad = case.args, case.meta["bad"]
    if bad is None and not _not_ids(case):
        return F.embedding(ids, case.meta["weight"])
    if bad is None:
        return raises(f"ids of dtype {ids.dtype} are not token ids", "TypeError", "ValueError")
    return raises(f"the id {bad} is outside [0, {case.meta['size'][0]}); the message must name the id "
                  "and vocab_size", "ValueError", "IndexError")


register(
    __name__,
    Check(name="embedding_forward", cases=_forward_cases, expected=_forward,
          mistakes=[
              Mistake("Did you multiply by d_model instead of sqrt(d_model)?", variant(_forward, factor="d")),
              Mistake("Did you scale even though scale=False? Multiply by sqrt(d_model) only when "
                      "scale is True (the default is False).", variant(_forward, when="always")),
              Mistake("Did you forget to multiply by sqrt(d_model) when scale=True?",
                      variant(_forward, when="never")),
              Mistake("Did you divide by sqrt(d_model) instead of multiplying?",
                      variant(_forward, factor="1/sqrt")),
              Mistake("Did you flatten the ids and forget to restore their shape? The output must have "
                      "shape ids.shape + (d_model,).", variant(_forward, flat=True)),
          ],
          hint="forward(ids) is self.weight[ids], of shape ids.shape + (d_model,), times sqrt(d_model) only when "
               "scale=True; the module has no dropout, so training and eval mode give the same result."),
    Check(name="embedding_init", guard=True, cases=_init_cases, expected=_init_expected,
          mistakes=[
              Mistake("Did you scale the initial values down (e.g. 0.02 * torch.randn, as GPT-2 does)? "
                      "This exercise asks for N(0, 1), like nn.Embedding.", variant(_init_expected, std=0.02)),
              Mistake("Did you use torch.rand (uniform on [0, 1)) instead of torch.randn (standard normal)?",
                      variant(_init_expected, uniform=True)),
              Mistake("Did you store the matrix transposed? self.weight must have shape (vocab_size, d_model).",
                      variant(_init_expected, transposed=True)),
              Mistake("Did you make the weight float64? Parameters are float32, torch.randn's default dtype.",
                      variant(_init_expected, dtype="float64")),
              Mistake("Did you store self.weight as a plain tensor? Wrap it in nn.Parameter, so that the module "
                      "registers it (and an optimiser trains it).", variant(_init_expected, registered=False)),
          ],
          hint="self.weight = nn.Parameter(torch.randn(vocab_size, d_model)): a registered float32 parameter "
               "of shape (vocab_size, d_model), entries drawn from N(0, 1), and no other parameters; store "
               "vocab_size, d_model and scale as attributes of the same names."),
    Check(name="embedding_errors", guard=True, cases=_errors_cases, expected=_errors_expected,
          mistakes=[
              Mistake("Negative ids wrap around in PyTorch indexing, as in Python lists: weight[-1] is the "
                      "LAST row, returned without a word. Did you check ids < 0 as well as ids >= vocab_size?",
                      unless(_negative_bad, lambda c: c.meta["weight"][c.args[0]])),
              Mistake("Did you convert the ids with .long() instead of rejecting a floating-point tensor? "
                      "Raise TypeError: a float tensor of ids is almost always a bug upstream.",
                      unless(_not_ids, lambda c: c.meta["weight"][c.args[0].long()])),
          ],
          hint="Before the lookup: raise TypeError if ids is a floating-point or bool tensor (not integer ids), "
               "and raise IndexError (or ValueError) naming the bad id and vocab_size if any id is < 0 or "
               ">= vocab_size; valid ids (0 and vocab_size - 1 included) are looked up as usual."),
)
