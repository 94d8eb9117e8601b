"""Checks for chapter 2: one-hot vectors, the embedding lookup, the Embedding module.

Oracles are PyTorch's own: ``torch.nn.functional.one_hot`` for one-hot
vectors and ``torch.nn.functional.embedding`` (the function behind
``nn.Embedding``) for lookups, with the student's weights replaced by known
ones. Error checks also read the message: it must name the offending id
(and, for the module, the vocabulary size).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from .framework import Case, Check, Mistake, Raises, randn, register


class UnclearErrorMessage(Exception):
    """Raised by a check when the student's error does not say what was wrong."""


# ------------------------------------------------------------- helpers ---

def _ids(rng: np.random.Generator, shape: tuple[int, ...], vocab: int, *, edges: bool = False) -> torch.Tensor:
    """int64 ids in [0, vocab); with `edges`, the first and last ids are 0 and vocab - 1."""
    ids = torch.from_numpy(rng.integers(0, vocab, size=shape).astype(np.int64))
    if edges and ids.numel() >= 2:
        flat = ids.view(-1)
        flat[0], flat[-1] = vocab - 1, 0
    return ids


def _with_bad(rng: np.random.Generator, shape: tuple[int, ...], vocab: int, bad: int) -> torch.Tensor:
    """Valid ids of `shape` with exactly one entry replaced by the out-of-range `bad`."""
    ids = _ids(rng, shape, vocab)
    ids.view(-1)[int(rng.integers(0, ids.numel()))] = bad
    return ids


def _shape(t: torch.Tensor) -> str:
    return "(" + ", ".join(str(s) for s in t.shape) + ")" if t.dim() != 1 else f"({t.shape[0]},)"


def _refuse(what: str) -> Callable:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{what} is not allowed in this exercise: build it from basic tensor operations")
    return refuse


@contextmanager
def _forbidden(*names: str) -> Iterator[None]:
    """Temporarily replace functions of torch.nn.functional the exercise asks you not to use."""
    saved = {n: getattr(F, n) for n in names}
    try:
        for n in names:
            setattr(F, n, _refuse(f"torch.nn.functional.{n}"))
        yield
    finally:
        for n, fn in saved.items():
            setattr(F, n, fn)


def _message_names(err: Exception, *values: int) -> bool:
    text = str(err)
    return all(str(v) in text for v in values)


def _expect_clear_error(run: Callable[[], Any], bad: int, vocab: int | None) -> Any:
    """Run `run()`; a ValueError/IndexError whose message omits `bad` (or `vocab`)
    becomes an `UnclearErrorMessage`, so the feedback says what is missing."""
    try:
        return run()
    except (ValueError, IndexError) as err:
        need = (bad,) if vocab is None else (bad, vocab)
        if not _message_names(err, *need):
            what = f"the bad id {bad}" if vocab is None else f"the bad id {bad} and the vocabulary size {vocab}"
            raise UnclearErrorMessage(f"your {type(err).__name__} says {str(err)[:120]!r}, which does not "
                                      f"name {what}") from None
        raise


# -------------------------------------------------------------- one_hot ---

def _one_hot_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        specs = [((3,), 5), ((2, 3), 4)]
    else:
        specs = [((4, 7), 11), ((2, 3, 5), 6), ((1,), 9), ((3, 1), 1000), ((5, 2), 2), ((1, 13), 13)]
    cases = []
    for shape, vocab in specs:
        ids = _ids(rng, shape, vocab, edges=True)
        cases.append(Case(f"ids of shape {_shape(ids)}, vocab_size={vocab}", (ids, vocab)))
    if hidden:  # one sequence that repeats a token
        ids = torch.tensor([[3, 1, 3, 3, 0]])
        cases.append(Case("ids [[3, 1, 3, 3, 0]] (repeats), vocab_size=4", (ids, 4)))
    return cases


def _call_one_hot(fn: Callable, case: Case) -> Any:
    with _forbidden("one_hot"):
        return fn(*case.args)


def _one_hot_oracle(case: Case) -> torch.Tensor:
    ids, vocab = case.args
    return F.one_hot(ids, vocab).to(torch.float32)


def _one_hot_errors_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        specs = [((3,), 5, -1), ((2, 2), 5, 7)]
    else:  # bad == vocab exactly (off by one), a wrap-around id, large ids, 3-D batches
        specs = [((2, 2), 5, 5), ((2, 3, 4), 12, -4), ((2, 6), 40, 123), ((1,), 12, -12), ((3, 5), 8, 9)]
    cases = []
    for shape, vocab, bad in specs:
        ids = _with_bad(rng, shape, vocab, bad)
        cases.append(Case(f"ids of shape {_shape(ids)} holding the id {bad}, vocab_size={vocab}",
                          (ids, vocab), {"bad": bad}))
    return cases


def _call_one_hot_errors(fn: Callable, case: Case) -> Any:
    with _forbidden("one_hot"):
        return _expect_clear_error(lambda: fn(*case.args), case.kwargs["bad"], None)


def _one_hot_wraps(case: Case) -> torch.Tensor:
    ids, vocab = case.args
    return torch.eye(vocab)[ids]


def _one_hot_zero_row(case: Case) -> torch.Tensor:
    ids, vocab = case.args
    return (ids.unsqueeze(-1) == torch.arange(vocab)).to(torch.float32)


register(
    Check(
        name="one_hot",
        cases=_one_hot_cases,
        expected=_one_hot_oracle,
        call=_call_one_hot,
        exact_dtype=True,
        mistakes=[
            Mistake("Did you return an integer or bool tensor? The result must be float32 "
                    "(e.g. `.to(torch.float32)`), so that it can multiply the float matrix E.",
                    lambda c: F.one_hot(*c.args)),
            Mistake("Did you flatten the ids and forget to restore their shape? The result must have "
                    "shape ids.shape + (vocab_size,).",
                    lambda c: F.one_hot(c.args[0].reshape(-1), c.args[1]).to(torch.float32)),
            Mistake("Did you put the vocabulary axis first? It must be the last axis: shape "
                    "ids.shape + (vocab_size,).",
                    lambda c: F.one_hot(*c.args).to(torch.float32).movedim(-1, 0)),
        ],
        hint="one_hot(ids, V)[..., j] is 1.0 where ids == j and 0.0 elsewhere, float32, of shape "
             "ids.shape + (V,). Comparing ids.unsqueeze(-1) with torch.arange(V) builds it in one line.",
    ),
    Check(
        name="one_hot_errors",
        cases=_one_hot_errors_cases,
        expected=lambda c: Raises(("ValueError", "IndexError"),
                                  f"the id {c.kwargs['bad']} is outside [0, {c.args[1]}); "
                                  "the message must name it"),
        call=_call_one_hot_errors,
        mistakes=[
            Mistake("Negative ids wrap around in PyTorch indexing, as in Python lists: -1 picks the last "
                    "row. Did you check ids < 0 as well as ids >= vocab_size?", _one_hot_wraps),
            Mistake("Your one_hot returned a row of zeros for an id outside [0, vocab_size), which would "
                    "embed it silently as the zero vector. Did you check (ids < 0) | (ids >= vocab_size) "
                    "and raise ValueError? (The valid ids are 0 .. vocab_size - 1.)", _one_hot_zero_row),
        ],
        hint="Check (ids < 0) | (ids >= vocab_size) before building anything, and raise ValueError "
             "with a message that names the bad id, e.g. 'id 7 is out of range for vocab_size 5'.",
    ),
)


# ---------------------------------------------- embed_one_hot, embed_lookup ---

def _embed_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        specs = [((2, 3), 6, 4), ((4,), 5, 3)]
    else:  # d_model > vocab, 3-D ids, a square E (transposes hide there), one token only
        specs = [((3, 5), 11, 7), ((2, 6), 4, 9), ((2, 3, 4), 30, 16), ((2, 4), 8, 8), ((1, 1), 3, 5)]
    cases = []
    for shape, vocab, d in specs:
        ids, E = _ids(rng, shape, vocab, edges=True), randn(rng, vocab, d)
        cases.append(Case(f"ids of shape {_shape(ids)}, E of shape ({vocab}, {d})", (ids, E)))
    if hidden:
        ids, E = torch.full((2, 3), 2), randn(rng, 5, 6)
        cases.append(Case("ids all equal to 2, shape (2, 3), E of shape (5, 6)", (ids, E)))
    return cases


def _call_embed(fn: Callable, case: Case) -> Any:
    with _forbidden("one_hot", "embedding"):
        return fn(*case.args)


def _transposed_lookup(case: Case) -> torch.Tensor | None:
    """Rows of E.T (columns of E), where the ids allow it."""
    ids, E = case.args
    return F.embedding(ids, E.T.contiguous()) if int(ids.max()) < E.shape[1] else None


_EMBED_MISTAKES = [
    Mistake("Did you flatten the ids and forget to restore their shape? The result must have shape "
            "ids.shape + (d_model,).", lambda c: F.embedding(c.args[0].reshape(-1), c.args[1])),
    Mistake("Did you use E transposed? E has shape (vocab_size, d_model): token i's vector is the "
            "ROW E[i], not a column.", _transposed_lookup),
]

register(
    Check(name="embed_one_hot", cases=_embed_cases, expected=lambda c: F.embedding(*c.args),
          call=_call_embed, mistakes=_EMBED_MISTAKES,
          hint="embed_one_hot(ids, E) is one_hot(ids, E.shape[0]) @ E: one one-hot entry per ROW of E "
               "(vocab_size = E.shape[0], not d_model = E.shape[1]), float32 like E, and E itself, not "
               "E.T; the result has shape ids.shape + (d_model,)."),
    Check(name="embed_lookup", cases=_embed_cases, expected=lambda c: F.embedding(*c.args),
          call=_call_embed, mistakes=_EMBED_MISTAKES,
          hint="embed_lookup(ids, E) is E[ids]: token i's vector is row i of E (not column i, so not "
               "E.T[ids]), and indexing with a tensor of any shape gives ids.shape + (d_model,) "
               "(index_select, by contrast, only takes 1-D ids)."),
)


# ---------------------------------------------------------- Embedding ---

def _build(cls: Callable, vocab: int, d: int, scale: bool | None) -> Any:
    """Make the student's module (scale left to its default when None)."""
    return cls(vocab, d) if scale is None else cls(vocab, d, scale=scale)


def _load(module: Any, W: torch.Tensor) -> None:
    """Copy known weights into the student's module, with a clear message on a wrong shape."""
    weight = getattr(module, "weight", None)
    if not isinstance(weight, torch.Tensor):
        raise AttributeError("the module has no tensor attribute `weight`: store the matrix as "
                             "self.weight = nn.Parameter(...)")
    if tuple(weight.shape) != tuple(W.shape):
        raise ValueError(f"self.weight has shape {tuple(weight.shape)}, not (vocab_size, d_model) = "
                         f"{tuple(W.shape)} (transposed?)")
    with torch.no_grad():
        weight.copy_(W)


def _scale_label(scale: bool | None) -> str:
    return "scale left at its default" if scale is None else f"scale={scale}"


def _forward_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        specs = [((2, 3), 10, 4, False), ((1, 5), 7, 6, True)]
    else:  # d > vocab, 3-D and 1-D ids, a square table, default scale, int32 ids
        specs = [((4, 9), 50, 8, None), ((3, 2, 7), 13, 5, True), ((11,), 6, 16, True),
                 ((2, 4), 9, 9, True), ((2, 5), 100, 3, False), ((3, 3), 12, 4, "int32")]
    cases = []
    for shape, vocab, d, scale in specs:
        ids, W = _ids(rng, shape, vocab, edges=True), randn(rng, vocab, d)
        label = f"ids of shape {_shape(ids)}, vocab_size={vocab}, d_model={d}"
        if scale == "int32":
            ids, scale = ids.to(torch.int32), True
            label += " (int32 ids)"
        cases.append(Case(f"{label}, {_scale_label(scale)}", (vocab, d, scale, ids, W)))
    return cases


def _call_forward(cls: Callable, case: Case) -> Any:
    vocab, d, scale, ids, W = case.args
    module = _build(cls, vocab, d, scale)
    _load(module, W)
    with _forbidden("embedding"):
        out = module(ids)
    return out.detach() if isinstance(out, torch.Tensor) else out


def _forward_oracle(case: Case, factor: Callable[[int, bool], float] | None = None) -> torch.Tensor:
    vocab, d, scale, ids, W = case.args
    scale = bool(scale)
    f = factor(d, scale) if factor else (math.sqrt(d) if scale else 1.0)
    return F.embedding(ids.long(), W) * f


def _init_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    specs = [(1000, 64)] if not hidden else [(300, 200), (5000, 16), (64, 1000)]
    return [Case(f"vocab_size={v}, d_model={d}", (v, d, _ids(rng, (4, 6), v))) for v, d in specs]


def _init_report(weight: torch.Tensor | None, registered: bool, n_params: int, got_grad: bool) -> dict:
    w = weight.detach().double() if isinstance(weight, torch.Tensor) else torch.zeros(1, dtype=torch.float64)
    return {
        "weight shape": tuple(int(s) for s in w.shape) if weight is not None else None,
        "weight is a registered nn.Parameter": registered,
        "number of parameters": n_params,
        "weight entries have mean near 0": bool(abs(float(w.mean())) < 0.05),
        "weight entries have standard deviation near 1": bool(abs(float(w.std()) - 1.0) < 0.05),
        "the output is differentiable with respect to weight": got_grad,
    }


def _call_init(cls: Callable, case: Case) -> Any:
    vocab, d, ids = case.args
    module = cls(vocab, d)
    weight = getattr(module, "weight", None)
    registered = isinstance(weight, torch.nn.Parameter) and any(p is weight for p in module.parameters())
    n_params = sum(int(p.numel()) for p in module.parameters())
    out = module(ids)
    got_grad = False
    if isinstance(out, torch.Tensor) and out.requires_grad and isinstance(weight, torch.Tensor):
        out.sum().backward()
        got_grad = weight.grad is not None
    return _init_report(weight, registered, n_params, got_grad)


def _init_expected(case: Case, std: float = 1.0, uniform: bool = False, transposed: bool = False) -> dict:
    vocab, d, _ = case.args
    g = torch.Generator().manual_seed(0)
    shape = (d, vocab) if transposed else (vocab, d)
    w = torch.rand(shape, generator=g) if uniform else std * torch.randn(shape, generator=g)
    return _init_report(w, True, vocab * d, True)


def _errors_cases(rng: np.random.Generator, hidden: bool) -> list[Case]:
    if not hidden:
        specs = [((2, 3), 10, 4, -1), ((2, 2), 10, 4, 12), ((1, 3), 10, 4, "float32")]
    else:
        specs = [((3, 4), 20, 6, -3), ((2, 3, 4), 57, 5, 1000), ((1,), 9, 3, -9), ((2, 5), 30, 8, "float64"),
                 ((4, 2), 16, 8, -16)]
    cases = []
    for shape, vocab, d, bad in specs:
        W = randn(rng, vocab, d)
        if isinstance(bad, str):
            ids = _ids(rng, shape, vocab).to(getattr(torch, bad))
            cases.append(Case(f"{bad} ids of shape {_shape(ids)}, vocab_size={vocab}", (vocab, d, ids, W),
                              {"bad": None}))
        else:
            ids = _with_bad(rng, shape, vocab, bad)
            cases.append(Case(f"ids of shape {_shape(ids)} holding the id {bad}, vocab_size={vocab}",
                              (vocab, d, ids, W), {"bad": bad}))
    return cases


def _call_errors(cls: Callable, case: Case) -> Any:
    vocab, d, ids, W = case.args
    module = cls(vocab, d)
    _load(module, W)
    bad = case.kwargs["bad"]

    def run() -> Any:
        with _forbidden("embedding"):
            out = module(ids)
        return out.detach() if isinstance(out, torch.Tensor) else out

    return run() if bad is None else _expect_clear_error(run, bad, vocab)


def _errors_expected(case: Case) -> Raises:
    vocab, _, ids, _ = case.args
    bad = case.kwargs["bad"]
    if bad is None:
        return Raises(("TypeError", "ValueError"), f"ids of dtype {ids.dtype} are not token ids")
    return Raises(("ValueError", "IndexError"),
                  f"the id {bad} is outside [0, {vocab}); the message must name the id and vocab_size")


def _wrapped_lookup(case: Case) -> torch.Tensor | None:
    """What a lookup without a range check returns: negative ids wrap around."""
    vocab, d, ids, W = case.args
    return W[ids] if case.kwargs["bad"] is not None else None


def _cast_lookup(case: Case) -> torch.Tensor | None:
    """What a lookup that casts float ids to int64 returns."""
    vocab, d, ids, W = case.args
    return W[ids.long()] if case.kwargs["bad"] is None else None


register(
    Check(
        name="embedding_forward",
        cases=_forward_cases,
        expected=_forward_oracle,
        call=_call_forward,
        mistakes=[
            Mistake("Did you multiply by d_model instead of sqrt(d_model)?",
                    lambda c: _forward_oracle(c, lambda d, s: d if s else 1.0)),
            Mistake("Did you scale even though scale=False? Multiply by sqrt(d_model) only when "
                    "scale is True (the default is False).",
                    lambda c: _forward_oracle(c, lambda d, s: math.sqrt(d))),
            Mistake("Did you forget to multiply by sqrt(d_model) when scale=True?",
                    lambda c: _forward_oracle(c, lambda d, s: 1.0)),
            Mistake("Did you divide by sqrt(d_model) instead of multiplying?",
                    lambda c: _forward_oracle(c, lambda d, s: 1 / math.sqrt(d) if s else 1.0)),
            Mistake("Did you flatten the ids and forget to restore their shape? The output must have "
                    "shape ids.shape + (d_model,).",
                    lambda c: _forward_oracle(c).reshape(-1, c.args[1])),
        ],
        hint="forward(ids) is self.weight[ids], of shape ids.shape + (d_model,), times sqrt(d_model) "
             "only when scale=True.",
    ),
    Check(
        name="embedding_init",
        cases=_init_cases,
        expected=_init_expected,
        call=_call_init,
        mistakes=[
            Mistake("Did you scale the initial values down (e.g. 0.02 * torch.randn, as GPT-2 does)? "
                    "This exercise asks for N(0, 1), like nn.Embedding.",
                    lambda c: _init_expected(c, std=0.02)),
            Mistake("Did you use torch.rand (uniform on [0, 1)) instead of torch.randn (standard normal)?",
                    lambda c: _init_expected(c, uniform=True)),
            Mistake("Did you store the matrix transposed? self.weight must have shape (vocab_size, d_model).",
                    lambda c: _init_expected(c, transposed=True)),
        ],
        hint="self.weight = nn.Parameter(torch.randn(vocab_size, d_model)): a registered parameter of "
             "shape (vocab_size, d_model), entries drawn from N(0, 1), and no other parameters.",
    ),
    Check(
        name="embedding_errors",
        cases=_errors_cases,
        expected=_errors_expected,
        call=_call_errors,
        mistakes=[
            Mistake("Negative ids wrap around in PyTorch indexing, as in Python lists: weight[-1] is the "
                    "LAST row, returned without a word. Did you check ids < 0 as well as ids >= vocab_size?",
                    _wrapped_lookup),
            Mistake("Did you convert the ids with .long() instead of rejecting a floating-point tensor? "
                    "Raise TypeError: a float tensor of ids is almost always a bug upstream.",
                    _cast_lookup),
        ],
        hint="Before the lookup: raise TypeError if ids is not an integer tensor, and raise IndexError "
             "(or ValueError) naming the bad id and vocab_size if any id is < 0 or >= vocab_size.",
    ),
)
