"""A later exercise judged on what it adds: its calls of the chapter's earlier pieces, traced and replayed.

Chapter 11's decoder layer runs the student's own RMSNorm (exercise 11.1) and grouped-query attention
(11.3). When the RMSNorm is wrong, the layer's output is wrong too, however right the layer's own code:
judged against the answer alone, one mistake would cost points twice. So an exercise whose probe names
the earlier pieces it `builds_on`:

* in the kernel, `tracing` swaps each of those pieces, in the namespace the student's object reads its
  names from, for a copy that records every call: the data it was given and what it returned (a
  class is subclassed, so parameters, names and ``isinstance`` stay the same);
* on the trusted side, where a case failed, `replaying` runs the course's own answer to the exercise
  (`course.reference.<topic>`) on the same case, each of its earlier pieces swapped for one that returns
  what the student's piece returned on the same inputs. If the student's pieces were called on the
  inputs the answer gives them and the answer then returns what the student's object returned, the
  exercise does its own part right: the fault is the earlier piece's, which loses its points in its
  own exercise (`course.probing.verdicts.evaluate` credits the case and says so).

Nothing here knows an answer: the trace holds the student's values only, and the replay runs on the
instructor's side. A student's own run (Jupyter, the self-check) has no answers to replay with: there a
later exercise fails with its earlier piece, and its report says which pieces it runs.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import types
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from .plain import Raised, dtype_name, raised, to_plain

#: set on the classes `tracing` makes: `kit.load_weights` forgives a traced piece its own layout
TRACED = "_course_traced_piece"
#: a trace is dropped past this many calls (sampling thousands of tokens): such a case is not replayed
MAX_CALLS = 4000


def namespace_of(obj: Any) -> dict | None:
    """The globals the student's function or class reads its names from (a notebook's namespace)."""
    if isinstance(obj, types.FunctionType):
        return obj.__globals__
    if isinstance(obj, type):
        for value in vars(obj).values():
            fn = getattr(value, "__func__", value)
            if isinstance(fn, types.FunctionType):
                return fn.__globals__
    return None


_DATA = (torch.Tensor, np.ndarray, int, float, str, bool, type(None))


def given(args: Sequence[Any], kwargs: dict[str, Any]) -> list:
    """What a call was given that is data (tensors, numbers, strings, and lists and tuples of them),
    positional arguments first, then keywords by name; modules and functions passed along are left
    out (they are compared by what they return, if they are earlier pieces too)."""
    def keep(value: Any) -> bool:
        if isinstance(value, (list, tuple)):
            return all(keep(item) for item in value)
        return isinstance(value, _DATA)
    return [v for v in [*args, *(kwargs[k] for k in sorted(kwargs))] if keep(v)]


def _is_students(piece: Any) -> bool:
    return piece is not None and not getattr(piece, "__module__", "").startswith("course.")


def _swapped(piece: Any, make_call: Callable[[Callable, nn.Module | None], Callable],
             make_new: Callable[[Callable], Callable]) -> Any:
    """`piece` with its calls (a module's forward, a function itself) going through
    `make_call(original, the module or None)` and, for a module, its construction through
    `make_new(original __init__)`."""
    if isinstance(piece, type) and issubclass(piece, nn.Module):
        original, made = piece.forward, piece.__init__

        def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
            return make_call(lambda *a, **k: original(self, *a, **k), self)(*args, **kwargs)

        def __init__(self: nn.Module, *args: Any, **kwargs: Any) -> None:
            make_new(lambda *a, **k: made(self, *a, **k))(self, *args, **kwargs)
        return type(piece.__name__, (piece,), {"forward": forward, "__init__": __init__, TRACED: True,
                                                "__module__": piece.__module__, "__qualname__": piece.__qualname__})
    if isinstance(piece, types.FunctionType):
        return functools.wraps(piece)(make_call(piece, None))
    return piece


class _Ordinals:
    """Which instance of an earlier piece a call is on: the n-th module of that piece built since the
    trace (or the replay) began. Two layers of a stack are two pieces: their calls are not interchangeable."""

    def __init__(self) -> None:
        self.made: dict[str, int] = {}
        self.of: dict[int, int] = {}  # id(module) -> its ordinal

    def number(self, name: str, module: nn.Module) -> None:
        self.of[id(module)] = self.made.get(name, 0)
        self.made[name] = self.of[id(module)] + 1

    def key(self, name: str, module: nn.Module | None) -> str:
        return name if module is None else f"{name}#{self.of.get(id(module), '?')}"


def layout(module: nn.Module) -> dict[str, list]:
    """A module's parameters and buffers, {name: [shape, dtype, "parameter" or "buffer"]}, and its
    dropout layers, {name: [p, None, "dropout"]}: what a later exercise reads of a piece it holds."""
    tensors = {n: [list(t.shape), dtype_name(t.dtype), kind]
               for kind, named in (("parameter", module.named_parameters()), ("buffer", module.named_buffers()))
               for n, t in named}
    return {**tensors, **{n: [m.p, None, "dropout"] for n, m in module.named_modules()
                          if n and isinstance(m, nn.Dropout)}}


def new_key(name: str) -> str:
    """The trace's name for the construction of the earlier piece `name` (a module)."""
    return f"{name}()"


@contextlib.contextmanager
def tracing(obj: Any, names: Sequence[str], trace: list) -> Iterator[None]:
    """While the block runs, every call of the student's earlier pieces `names` (found where `obj`
    reads its names; the course's own pieces are not traced) that is not made inside another such
    call appends ``[name, the data it was given (`given`), what it returned, that data after the call
    (a piece may change its arguments in place), torch's random state after the call if the call drew
    from it (dropout) or None]`` to `trace`, as plain data; and every construction of such a module
    ``[name(), its arguments, its `layout`, its arguments, None or the random state]``."""
    namespace = namespace_of(obj) if names else None
    kept = {n: namespace[n] for n in names if namespace is not None and _is_students(namespace.get(n))}
    depth = [0]  # a piece called inside another (a layer's norm, in the model) is the outer one's business

    def note(key: str, before: Any, args: tuple, kwargs: dict, result: Callable[[], Any],
             rng: torch.Tensor | None = None) -> None:
        if depth[0] == 0 and len(trace) < MAX_CALLS:
            after_rng = torch.get_rng_state()
            drew = None if rng is None or torch.equal(rng, after_rng) else after_rng.numpy()
            try:
                trace.append([key, before, to_plain(result()), to_plain(given(args, kwargs)), drew])
            except (TypeError, ValueError):  # a result that is not plain data: not replayable
                trace.append([key, [], None, [], None])

    def before(args: tuple, kwargs: dict) -> Any:
        try:
            return to_plain(given(args, kwargs))
        except (TypeError, ValueError):
            return []

    def nested(original: Callable) -> Callable:
        def run(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            try:
                return original(*args, **kwargs)
            finally:
                depth[0] -= 1
        return run

    ordinals = _Ordinals()

    def recorder(name: str) -> tuple[Callable, Callable]:
        def make_call(original: Callable, module: nn.Module | None) -> Callable:
            def call(*args: Any, **kwargs: Any) -> Any:
                key = ordinals.key(name, module)
                given_before = before(args, kwargs) if depth[0] == 0 else None
                rng = torch.get_rng_state() if depth[0] == 0 else None  # what the piece draws (dropout)
                try:
                    out = nested(original)(*args, **kwargs)
                except Exception as exc:  # the later exercise fails with it: the replay must too
                    note(key, given_before, args, kwargs, lambda exc=exc: raised(exc), rng)
                    raise
                note(key, given_before, args, kwargs, lambda: out, rng)
                return out
            return call

        def make_new(original: Callable) -> Callable:
            def new(self: nn.Module, *args: Any, **kwargs: Any) -> None:
                given_before = before(args, kwargs) if depth[0] == 0 else None
                nested(original)(*args, **kwargs)
                if depth[0] == 0:
                    ordinals.number(name, self)
                note(new_key(name), given_before, args, kwargs, lambda: layout(self))
            return new
        return make_call, make_new

    try:
        for name, piece in kept.items():
            namespace[name] = _swapped(piece, *recorder(name))
        yield
    finally:
        for name, piece in kept.items():
            namespace[name] = piece
        if len(trace) >= MAX_CALLS:
            trace.clear()


# ---------------------------------------------------------- trusted side ---

@dataclass
class Replay:
    """How a replay went: `diverged` once an earlier piece was called on inputs that its recorded
    call did not have (the student's exercise feeds its pieces something else)."""

    calls: dict[str, deque] = field(default_factory=dict)
    diverged: bool = False


def _close(mine: Any, recorded: Any) -> bool:
    """Whether the answer's call got what the student's recorded call got (arrays to float rounding)."""
    if isinstance(mine, np.ndarray):
        return isinstance(recorded, np.ndarray) and recorded.shape == mine.shape and (
            np.allclose(recorded.astype(np.float64), mine.astype(np.float64), rtol=1e-4, atol=1e-5, equal_nan=True)
            if mine.dtype.kind in "fc" or recorded.dtype.kind in "fc" else np.array_equal(recorded, mine))
    if isinstance(mine, (list, tuple)):
        return isinstance(recorded, (list, tuple)) and len(recorded) == len(mine) and all(
            _close(a, b) for a, b in zip(mine, recorded))
    if isinstance(mine, float) and isinstance(recorded, float):
        return abs(mine - recorded) <= 1e-6 * max(1.0, abs(mine))
    return type(mine) is type(recorded) and mine == recorded


def _leave_as(mine: Any, after: Any) -> None:
    """Give the tensors of a replayed call the values the student's piece left in its own (in place)."""
    if isinstance(mine, torch.Tensor):
        if isinstance(after, np.ndarray):
            left = torch.from_numpy(after.copy()).to(mine.dtype)
            with torch.no_grad():
                if tuple(mine.shape) == after.shape:
                    mine.copy_(left)
                else:  # reshaped in place (an unsqueeze_): the same tensor object, the new shape
                    mine.data = left
    elif isinstance(mine, (list, tuple)) and isinstance(after, (list, tuple)) and len(after) == len(mine):
        for part, value in zip(mine, after):
            _leave_as(part, value)


def as_torch(value: Any) -> Any:
    """Plain data back into tensors (numpy arrays become tensors), to hand to the answer's code."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, Raised):  # the student's piece raised this: so does its replay
        kind = getattr(builtins, value.names[0], None)
        raise (kind if isinstance(kind, type) and issubclass(kind, Exception) else RuntimeError)(value.message)
    if isinstance(value, tuple):
        return tuple(as_torch(v) for v in value)
    if isinstance(value, list):
        return [as_torch(v) for v in value]
    if isinstance(value, dict):
        return {k: as_torch(v) for k, v in value.items()}
    return value


def _build_layout(module: nn.Module, recorded: dict[str, list]) -> None:
    """Give an empty module the parameters, buffers and dropout layers of a recorded `layout` (zeros: a
    replayed piece returns recorded outputs, so only their names and shapes matter)."""
    for name, (shape, dtype, kind) in recorded.items():
        owner, *path, leaf = [module, *name.split(".")]
        for part in path:
            if not hasattr(owner, part):
                owner.add_module(part, nn.Module())
            owner = getattr(owner, part)
        if kind == "dropout":
            owner.add_module(leaf, nn.Dropout(float(shape)))
            continue
        zeros = torch.zeros(shape, dtype=getattr(torch, dtype))
        if kind == "buffer":
            owner.register_buffer(leaf, zeros)
        else:
            owner.register_parameter(leaf, nn.Parameter(zeros, requires_grad=zeros.is_floating_point()))


def piece_of(key: str) -> str:
    """The earlier piece a trace entry is of: ``RMSNorm`` for ``RMSNorm#1`` and ``RMSNorm()``."""
    return key.partition("#")[0].removesuffix("()")


@contextlib.contextmanager
def replaying(namespace: dict, names: Sequence[str], trace: list,
              only: Sequence[str] | None = None) -> Iterator[Replay]:
    """While the block runs, the pieces `names` of `namespace` (the course's answers' module) return,
    call after call, what the student's pieces returned (`trace`, recorded by `tracing`) when they are
    given the same data, and a module built with the same arguments gets the parameters the student's
    had; on other data they compute as the answer does, and the replay is marked `diverged`. With
    `only`, the other pieces' calls are not replayed: they compute as the answer does (to tell which
    piece explains the student's output)."""
    replay = Replay()
    for entry in trace:
        if not (isinstance(entry, list) and len(entry) in (4, 5) and isinstance(entry[0], str)):
            replay.diverged = True  # not a trace `tracing` wrote
            continue
        name, inputs, out, after, *drew = entry
        if only is not None and piece_of(name) not in only:
            continue
        replay.calls.setdefault(name, deque()).append((inputs, out, after, drew[0] if drew else None))

    def recorded(key: str, args: tuple, kwargs: dict) -> Any:
        """The next recorded result of `key` if it was given the same data (else None: diverged); the
        data it was given are left as the student's piece left them, and torch's random state as it was
        after the student's call."""
        queue = replay.calls.get(key)
        mine = given(args, kwargs)
        if queue and queue[0][1] is not None and _close(to_plain(mine), queue[0][0]):
            _, out, after, drew = queue.popleft()
            _leave_as(mine, after)
            if drew is not None:  # the student's piece drew random numbers: the answer's later draws follow on
                try:
                    torch.set_rng_state(torch.from_numpy(np.asarray(drew, dtype=np.uint8).copy()))
                except (RuntimeError, TypeError, ValueError):  # not a state torch made
                    replay.diverged = True
                    return None
            return out
        replay.diverged = True
        return None

    ordinals = _Ordinals()

    def replayer(name: str) -> tuple[Callable, Callable]:
        def make_call(original: Callable, module: nn.Module | None) -> Callable:
            def call(*args: Any, **kwargs: Any) -> Any:
                out = recorded(ordinals.key(name, module), args, kwargs)
                return original(*args, **kwargs) if out is None else as_torch(out)
            return call

        def make_new(original: Callable) -> Callable:
            def new(self: nn.Module, *args: Any, **kwargs: Any) -> None:
                table = recorded(new_key(name), args, kwargs)
                ordinals.number(name, self)
                if table is None:
                    original(*args, **kwargs)
                    return
                nn.Module.__init__(self)
                _build_layout(self, table)
            return new
        return make_call, make_new

    kept = {n: namespace[n] for n in names if n in namespace and (only is None or n in only)}
    try:
        for name, piece in kept.items():
            namespace[name] = _swapped(piece, *replayer(name))
        yield replay
    finally:
        namespace.update(kept)
