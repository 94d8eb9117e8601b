"""Probes for chapter 3: the sinusoidal table, the offset matrix, the PositionalEncoding module.

The calls record raw outputs (the offset matrix itself; forward's output and the module's own
pe[:seq_len]); the probes' `observe` functions, run by the judge, make what the answers describe: the
rows PE(pos) @ M_k, from the rows PE(pos) the trusted side hands over in the case's `aid` (`PE_ROWS`),
and forward(x) - pe[:seq_len].
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..cases import Case
from ..kit import build, parameter_table, run_modes
from ..plain import dtype_name
from ..runner import Probe, register

#: exercise 3.3 builds its table with exercise 3.1's function
_ON_THE_TABLE = dict(builds_on=("sinusoidal_encoding",), answer="PositionalEncoding")
#: the table is written with sines and cosines, not complex numbers
_NO_COMPLEX = ("torch.polar", "torch.view_as_complex")

# Module cases (positional_encoding*): args are what forward() is called with (x); meta holds the
# constructor's arguments, {"d_model": d, "config": {"max_len": ..., "base": ...}} (keywords where set).


#: the key of the shift cases' `aid`: the float64 rows PE(pos) (len(positions), d_model) for the positions
#: the trusted side drew (also in `aid`; the kernel never sees them)
PE_ROWS = "pe rows"

#: the keys of the forward checks' facts (`_observe`), per mode
OUT, DTYPE, DIFF = "output shape", "output dtype", "forward(x) - pe[:seq_len]"


def _shift_observe(case: Case, raw: Any) -> np.ndarray:
    """PE(pos) @ M_k for the case's positions, with the rows PE(pos) of its `aid`; `raw` is the matrix
    returned."""
    return np.asarray(case.aid[PE_ROWS], dtype=np.float64) @ np.asarray(raw, dtype=np.float64)


def _observe(case: Case, raw: dict) -> dict:
    """What the forward checks compare, in each mode: the output's shape and dtype, and the output less
    the module's own pe[:seq_len] (when the output has x's shape). `raw` is the probe's record:
    {mode: {"output", "output dtype", "pe[:seq_len]"}}."""
    (x,) = case.args
    facts = {}
    for mode, seen in raw.items():
        out = np.asarray(seen["output"])
        fits = tuple(out.shape) == tuple(x.shape)
        facts[mode] = {OUT: list(out.shape), DTYPE: seen["output dtype"],
                       DIFF: out.astype(np.float64) - np.asarray(seen["pe[:seq_len]"], dtype=np.float64)
                       if fits else None}
    return facts


def build_module(cls: Callable[..., nn.Module], case: Case) -> nn.Module:
    """PositionalEncoding(meta['d_model'], **meta['config']), seeded."""
    return build(cls, case.meta["d_model"], **case.meta["config"])


def _long_rows(f: Callable, case: Case) -> Any:
    """The rows meta['rows'] of the (seq_len, d_model) table (a long table is not sent whole)."""
    return f(*case.args, **case.kwargs)[case.meta["rows"]]


def _forward_and_table(module: nn.Module, x: torch.Tensor) -> dict[str, Any]:
    """forward(x) (batch, seq, d_model), its dtype, and the module's own pe[:seq] (seq, d_model)."""
    out = module(x)
    return {"output": out, "output dtype": dtype_name(getattr(out, "dtype", None)),
            "pe[:seq_len]": module.pe[: x.shape[1]]}


def _call_forward(cls: Any, case: Case) -> dict[str, Any]:
    """`_forward_and_table` in training and in eval mode."""
    return run_modes(build_module(cls, case), _forward_and_table, *case.args)


def _call_buffers(cls: Any, case: Case) -> dict[str, Any]:
    """The freshly built module's buffers and parameters {name: (shape, dtype)} and pe's first 3 rows."""
    module = build_module(cls, case)
    pe = getattr(module, "pe", None)
    return {"buffers (name: shape, dtype)": {n: (tuple(b.shape), dtype_name(b.dtype))
                                             for n, b in module.named_buffers()},
            "parameters (name: shape, dtype)": parameter_table(module),
            "first rows of pe": pe[:3] if isinstance(pe, torch.Tensor) else None}


register(
    Probe("positional_encoding.sinusoidal_encoding_hand", forbid=_NO_COMPLEX),
    Probe("positional_encoding.sinusoidal_encoding", forbid=_NO_COMPLEX),
    Probe("positional_encoding.sinusoidal_encoding_long", call=_long_rows, forbid=_NO_COMPLEX),
    Probe("positional_encoding.sinusoidal_encoding_odd", forbid=_NO_COMPLEX),
    Probe("positional_encoding.offset_matrix"),
    Probe("positional_encoding.offset_matrix_far"),
    Probe("positional_encoding.offset_matrix_shift", observe=_shift_observe),
    Probe("positional_encoding.positional_encoding", call=_call_forward, observe=_observe, forbid=_NO_COMPLEX,
          **_ON_THE_TABLE),
    Probe("positional_encoding.positional_encoding_too_long", call=_call_forward, observe=_observe,
          forbid=_NO_COMPLEX, **_ON_THE_TABLE),
    Probe("positional_encoding.positional_encoding_buffer", call=_call_buffers, forbid=_NO_COMPLEX, **_ON_THE_TABLE),
)
