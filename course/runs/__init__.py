"""Results recorded from real training runs, for the chapter to show without re-running them.

One small JSON file per run (``<name>.json``: the config, the loss curve subsampled, a few samples,
the hardware, the seconds and the machine's load), written by ``python -m course.char_lm --json``
(or ``benchmarks/char_lm.py --json``). ``load("char_lm_cpu")`` returns one as a dict.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent


def names() -> list[str]:
    """The recorded runs."""
    return sorted(p.stem for p in HERE.glob("*.json"))


def load(name: str) -> dict:
    """The run `name` as a dict (see `course.char_lm.record` for its keys)."""
    path = HERE / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"no recorded run {name!r}; recorded: {', '.join(names()) or 'none'}")
    return json.loads(path.read_text())
