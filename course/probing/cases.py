"""Cases as data: the inputs the trusted side hands a sandboxed kernel.

The grader makes every case (visible ones from a fixed seed, hidden ones from
the instructor's secret) outside the sandbox, writes them into the probe
folder with `encode_cases`, and the kernel rebuilds them with `decode_cases`.
No seed and no oracle reaches the kernel: it only calls the student's object
on inputs it was given.

Besides what `plain` carries (numbers, strings, lists, tuples, dicts, numpy
arrays), inputs may hold torch tensors (dtype and ``requires_grad`` kept),
``torch.dtype`` and ``torch.device`` values, sets, library functions named in
`FUNCTIONS`, ``functools.partial`` of those, and objects of the classes
registered with `transportable` (probe networks, earlier chapters' modules):
each is sent as its state and rebuilt from it.
"""

from __future__ import annotations

import functools
import importlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from . import plain


@dataclass
class Case:
    """One input to a student's object.

    `args` and `kwargs` are exactly what the student's object is called with
    (through the probe's `call`); `meta` holds what the call itself needs
    (the weights to copy in, ...). `meta` travels to the kernel too: put the
    call's inputs there, never an expected answer. `aid` holds what the
    probe's `observe` needs from the trusted side to read a raw output (a
    few rows of a table the oracle knows): it never reaches the kernel, and
    ships only with the visible answers. `label` appears in feedback:
    describe the input, never the answer.
    """

    label: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    aid: dict = field(default_factory=dict)


# -------------------------------------------------- what may travel ---

#: library functions a case may pass (by identity), sent by name
FUNCTIONS = ("torch.tanh", "torch.relu", "torch.sigmoid", "torch.exp", "torch.nn.functional.gelu",
             "torch.nn.functional.relu", "torch.nn.functional.silu", "torch.nn.functional.softmax",
             "torch.nn.functional.cross_entropy", "torch.nn.functional.dropout",
             "torch.sin", "torch.nn.functional.layer_norm")


@dataclass(frozen=True)
class _Transport:
    cls: type
    to_state: Callable[[Any], Any]
    from_state: Callable[[Any], Any]


_OBJECTS: dict[str, _Transport] = {}


def transportable(name: str, cls: type, to_state: Callable[[Any], Any],
                  from_state: Callable[[Any], Any]) -> None:
    """Let objects of exactly `cls` travel in cases, as ``to_state(obj)``
    (plain data, tensors allowed) rebuilt with ``from_state(state)``."""
    known = _OBJECTS.get(name)
    if known is not None and known.cls is not cls:
        raise ValueError(f"two classes registered as transportable {name!r}")
    _OBJECTS[name] = _Transport(cls, to_state, from_state)


def module_state(module: torch.nn.Module, **init: Any) -> dict:
    """A module's state for `transportable`: its constructor arguments and weights."""
    return {"init": init, "weights": dict(module.state_dict()), "training": module.training}


def module_from_state(cls: Callable[..., torch.nn.Module]) -> Callable[[dict], torch.nn.Module]:
    """The `from_state` of a module sent with `module_state`."""
    def rebuild(state: dict) -> torch.nn.Module:
        module = cls(**state["init"])
        module.load_state_dict(state["weights"])
        return module.train(state["training"])
    return rebuild


def _function_name(fn: Any) -> str | None:
    for dotted in FUNCTIONS:
        if _resolve(dotted) is fn:
            return dotted
    return None


@functools.cache
def _resolve(dotted: str) -> Any:
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


# ------------------------------------------------------------- encode ---

def _encode(x: Any, depth: int = 0) -> Any:
    if depth > 30:
        raise TypeError("a case nested too deeply")
    if isinstance(x, torch.Tensor):
        return {"__tensor__": plain.to_json_value(x.detach().cpu().float() if x.dtype == torch.bfloat16 else x),
                "dtype": plain.dtype_name(x.dtype), "grad": x.requires_grad}
    if isinstance(x, torch.dtype):
        return {"__dtype__": plain.dtype_name(x)}
    if isinstance(x, torch.device):
        return {"__device__": str(x)}
    if isinstance(x, (set, frozenset)):
        return {"__set__": [_encode(v, depth + 1) for v in sorted(x, key=repr)]}
    if isinstance(x, tuple):
        return {"__tuple__": [_encode(v, depth + 1) for v in x]}
    if isinstance(x, list):
        return [_encode(v, depth + 1) for v in x]
    if isinstance(x, dict):
        return {"__dict__": [[_encode(k, depth + 1), _encode(v, depth + 1)] for k, v in x.items()]}
    if isinstance(x, functools.partial):
        return {"__partial__": _encode(x.func, depth + 1), "args": _encode(x.args, depth + 1),
                "kwargs": _encode(x.keywords, depth + 1)}
    for name, t in _OBJECTS.items():
        if type(x) is t.cls:
            return {"__object__": name, "state": _encode(t.to_state(x), depth + 1)}
    if callable(x) and not isinstance(x, type):
        name = _function_name(x)
        if name is None:
            raise TypeError(f"a case holds the function {x!r}, which cannot travel: add it to FUNCTIONS")
        return {"__function__": name}
    if x is None or isinstance(x, (bool, int, float, str, np.ndarray, np.generic)):
        return plain.to_json_value(x, depth)
    raise TypeError(f"a case holds a {type(x).__name__}, which cannot travel to the kernel: "
                    "register it with `transportable`")


def encode_cases(cases: list[Case], *, aid: bool = False) -> str:
    """The cases as JSON text (trusted side); their `aid` only when asked
    (for the visible answers, never for a kernel)."""
    return json.dumps([{"label": c.label, "args": _encode(tuple(c.args)), "kwargs": _encode(dict(c.kwargs)),
                        "meta": _encode(dict(c.meta))} | ({"aid": _encode(dict(c.aid))} if aid else {})
                       for c in cases])


# ------------------------------------------------------------- decode ---

def _decode(x: Any) -> Any:
    if isinstance(x, list):
        return [_decode(v) for v in x]
    if not isinstance(x, dict):
        return plain.from_json_value(x)
    if "__tensor__" in x:
        t = torch.from_numpy(plain.from_json_value(x["__tensor__"]))
        t = t.to(getattr(torch, x["dtype"]))
        return t.requires_grad_(True) if x["grad"] else t
    if "__dtype__" in x:
        return getattr(torch, x["__dtype__"])
    if "__device__" in x:
        return torch.device(x["__device__"])
    if "__set__" in x:
        return {_decode(v) for v in x["__set__"]}
    if "__tuple__" in x:
        return tuple(_decode(v) for v in x["__tuple__"])
    if "__dict__" in x:
        return {_decode(k): _decode(v) for k, v in x["__dict__"]}
    if "__partial__" in x:
        return functools.partial(_decode(x["__partial__"]), *_decode(x["args"]), **_decode(x["kwargs"]))
    if "__function__" in x:
        if x["__function__"] not in FUNCTIONS:
            raise ValueError(f"unknown function {x['__function__']!r}")
        return _resolve(x["__function__"])
    if "__object__" in x:
        return _OBJECTS[x["__object__"]].from_state(_decode(x["state"]))
    return plain.from_json_value(x)


def decode_cases(text: str) -> list[Case]:
    """Rebuild the cases (inside the kernel) from `encode_cases`'s text."""
    return [Case(c["label"], _decode(c["args"]), _decode(c["kwargs"]), _decode(c["meta"]),
                 _decode(c["aid"]) if "aid" in c else {})
            for c in json.loads(text)]


def carried(cases: list[Case]) -> list[Case]:
    """The cases as the kernel sees them, after the trip (what a student's
    own run uses too, so that both see the same inputs)."""
    return decode_cases(encode_cases(cases))
