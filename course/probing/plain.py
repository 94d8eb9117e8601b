"""Plain data: how a student's results travel from the sandbox to the judge.

The autograder never trusts an object created by student code. Inside the
student's process, `encode` turns what a function returned into JSON made of
numbers, strings, lists and base64 array bytes. The trusted judge reads that
JSON back with `decode`, which builds only plain Python values and numpy
arrays of a few numeric dtypes: no pickle, no custom classes, so no
`__eq__`/`__bool__` tricks survive the trip.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

#: dtypes an array may have once it reaches the judge
ALLOWED_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8",
                  "float16", "float32", "float64")
#: the judge refuses to build arrays bigger than this (elements)
MAX_ELEMENTS = 20_000_000


@dataclass(frozen=True)
class Raised:
    """What a student's call raised instead of returning.

    `names` lists the exception's class and its bases (so a subclass of
    ValueError still counts as a ValueError).
    """

    names: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        return f"{self.names[0]}: {self.message}" if self.message else self.names[0]


def dtype_name(dtype: Any) -> str:
    """'float32' for torch.float32: a dtype as the records write it."""
    return str(dtype).removeprefix("torch.")


def raised(exc: BaseException) -> Raised:
    names = tuple(c.__name__ for c in type(exc).__mro__ if c not in (object, BaseException))
    return Raised(names or ("BaseException",), str(exc)[:500])


# --------------------------------------------------------------- encoding ---

def to_json_value(x: Any, depth: int = 0) -> Any:
    """`x` as a JSON-ready value (what `encode` writes as text). `course.probing.cases`, the codec of the
    inputs the trusted side sends a kernel, extends it with the types only inputs may hold."""
    if depth > 20:
        raise TypeError("nested too deeply to record")
    if x is None or isinstance(x, bool):
        return None if x is None else bool(x)
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return {"__float__": repr(float(x))}  # keeps nan/inf, which JSON cannot
    if isinstance(x, str):
        return str(x)
    if isinstance(x, Raised):
        return {"__raised__": list(x.names), "message": x.message}
    if isinstance(x, np.generic):
        return to_json_value(x.item(), depth + 1)
    array = _as_numpy(x)
    if array is not None:
        if array.dtype.name not in ALLOWED_DTYPES:
            array = array.astype(np.float64 if array.dtype.kind in "fc" else np.int64)
        array = np.ascontiguousarray(array).reshape(array.shape)  # ascontiguousarray makes a 0-d array 1-d
        return {"__ndarray__": array.dtype.name, "shape": list(array.shape),
                "data": base64.b64encode(array.tobytes()).decode("ascii")}
    if isinstance(x, tuple):
        return {"__tuple__": [to_json_value(v, depth + 1) for v in x]}
    if isinstance(x, list):
        return [to_json_value(v, depth + 1) for v in x]
    if isinstance(x, dict):
        return {"__dict__": [[to_json_value(k, depth + 1), to_json_value(v, depth + 1)] for k, v in x.items()]}
    raise TypeError(f"cannot record a value of type {type(x).__name__}")


def _as_numpy(x: Any) -> np.ndarray | None:
    if isinstance(x, np.ndarray):
        return x
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is always installed here
        return None
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy()
    return None


def encode(x: Any) -> str:
    """Serialise a result (student side) to a JSON string."""
    return json.dumps(to_json_value(x))


# --------------------------------------------------------------- decoding ---

class BadRecord(ValueError):
    """The recorded data is not in the expected form (tampered or corrupt)."""


def from_json_value(x: Any, depth: int = 0) -> Any:
    """The plain value a JSON-ready record stands for; BadRecord for anything else (the judge's side:
    nothing but plain values and arrays of `ALLOWED_DTYPES` is built)."""
    if depth > 40:
        raise BadRecord("nested too deeply")
    if x is None or type(x) in (bool, int, str):
        return x
    if type(x) is float:
        return x
    if type(x) is list:
        return [from_json_value(v, depth + 1) for v in x]
    if type(x) is not dict or len(x) == 0:
        raise BadRecord(f"unexpected value {type(x).__name__}")
    if "__float__" in x:
        return float(str(x["__float__"]))
    if "__raised__" in x:
        names = x["__raised__"]
        if type(names) is not list or not names or not all(type(n) is str for n in names):
            raise BadRecord("bad exception record")
        return Raised(tuple(names), str(x.get("message", ""))[:500])
    if "__tuple__" in x:
        return tuple(from_json_value(v, depth + 1) for v in _expect_list(x["__tuple__"]))
    if "__dict__" in x:
        out = {}
        for pair in _expect_list(x["__dict__"]):
            if type(pair) is not list or len(pair) != 2:
                raise BadRecord("bad dict record")
            key = from_json_value(pair[0], depth + 1)
            if not isinstance(key, (str, int, float, bool, tuple)) or _unhashable(key):
                raise BadRecord("bad dict key")
            out[key] = from_json_value(pair[1], depth + 1)
        return out
    if "__ndarray__" in x:
        return _decode_array(x)
    raise BadRecord("unknown record")


def _unhashable(key: Any) -> bool:
    try:
        hash(key)
        return False
    except TypeError:
        return True


def _expect_list(v: Any) -> list:
    if type(v) is not list:
        raise BadRecord("expected a list")
    return v


def _decode_array(x: dict) -> np.ndarray:
    dtype, shape, data = x.get("__ndarray__"), x.get("shape"), x.get("data")
    if dtype not in ALLOWED_DTYPES or type(shape) is not list or type(data) is not str:
        raise BadRecord("bad array record")
    if not all(type(d) is int and 0 <= d for d in shape) or len(shape) > 8:
        raise BadRecord("bad array shape")
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if size > MAX_ELEMENTS:
        raise BadRecord("array too large")
    raw = base64.b64decode(data, validate=True)
    if len(raw) != size * np.dtype(dtype).itemsize:
        raise BadRecord("array data does not match its shape")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def decode(text: str) -> Any:
    """Rebuild a recorded result (judge side) from its JSON string."""
    try:
        return from_json_value(json.loads(text))
    except (ValueError, TypeError, RecursionError) as err:
        if isinstance(err, BadRecord):
            raise
        raise BadRecord(str(err)) from None


def to_plain(x: Any) -> Any:
    """What `x` looks like after the trip through `encode` and `decode`."""
    return decode(encode(x))
