"""How long, and with how much memory, a chapter's notebooks may run when graded.

Five limits hold for every notebook: the per-cell timeout (nbgrader
interrupts a cell after it), a shorter one for the autograder's test cells
(their checks take seconds: a student's answer that loops forever should not
cost a minute per test cell), the notebook's time budget (no cell runs past
it, and the cells left when it is spent are not run), the wall clock (the
sandbox kills the kernel after it) and the address space of each sandboxed
process.

The budget is derived from the chapter's reference solution: its notebook's
run time when graded (recorded in `REFERENCE_SECONDS_FILE`, measured by CI
on a 2-core machine under the test suite's load, the slowest conditions a
notebook is graded in) times `BUDGET_MULTIPLE`, plus `BUDGET_START_SECONDS`
for the kernel's start. A notebook whose every function loops forever so
costs one to two minutes, whatever the chapter, instead of a cell limit per
cell that calls one; tests/test_grading.py checks that the graded reference stays well
within its budget, and grades such a notebook on the slowest chapter.

A kernel that has
not stopped a few seconds after the interrupt is killed
(`execute.GuardedExecute.interrupt_grace_seconds`). The defaults are
`autograder.sandbox`'s (60 s, 20 s, 600 s, 6 GiB); tests/test_grading.py
checks that every chapter's are a generous multiple of its reference
solution's measured cell times. A chapter that needs more, such as one that
trains a model, sets its own in its solution notebook's metadata (any of the
keys; values are whole numbers)::

    "metadata": {
      "course": {"grading": {"cell_seconds": 300, "test_cell_seconds": 60, "wall_seconds": 1800,
                             "memory_bytes": 12884901888}},
      ...
    }

``python -m autograder grade --cell-timeout S --wall-timeout S`` override the
time limits of every chapter (a test cell never gets more than any cell). The sandbox's CPU-time limit is the larger of
`sandbox.CPU_SECONDS` and the wall clock, so a longer wall clock is never cut
short by it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import sandbox
from .chapters import Chapter


@dataclass(frozen=True)
class Limits:
    """Limits for student code: per cell, per test cell, per notebook (wall clock), per process
    (address space)."""

    cell_seconds: int = sandbox.CELL_SECONDS
    wall_seconds: int = sandbox.WALL_SECONDS
    memory_bytes: int = sandbox.MEMORY_BYTES
    test_cell_seconds: int = sandbox.TEST_CELL_SECONDS
    notebook_seconds: int = 0  # 0: the budget derived from the reference (`notebook_budget`)


#: {chapter id: seconds its graded reference notebook ran}, measured (see the module's docstring)
REFERENCE_SECONDS_FILE = Path(__file__).with_name("reference_seconds.json")
BUDGET_MULTIPLE = 2
BUDGET_START_SECONDS = 20


def notebook_budget(ch: Chapter) -> int:
    """A chapter's notebook time budget: a generous multiple of its reference's recorded run time,
    plus the kernel's start; the wall clock for a chapter with no recorded time."""
    recorded = json.loads(REFERENCE_SECONDS_FILE.read_text()).get(ch.id)
    if recorded is None:
        return sandbox.WALL_SECONDS
    return BUDGET_START_SECONDS + math.ceil(BUDGET_MULTIPLE * recorded)


def limits_from_metadata(metadata: dict) -> Limits:
    """The limits a notebook's metadata asks for, defaults for the rest.

    Raises ValueError naming the problem when the setting is malformed.
    """
    course = metadata.get("course", {})
    grading = course.get("grading", {}) if isinstance(course, dict) else None
    if not isinstance(grading, dict):
        raise ValueError("notebook metadata course.grading must be a mapping")
    known = {f.name for f in dataclasses.fields(Limits)}
    unknown = sorted(set(grading) - known)
    if unknown:
        raise ValueError(f"unknown grading limit(s) {unknown}; known: {sorted(known)}")
    for key, value in grading.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"grading limit {key} must be a positive whole number, not {value!r}")
    return Limits(**grading)


def chapter_limits(ch: Chapter, cell_seconds: int | None = None, wall_seconds: int | None = None) -> Limits:
    """A chapter's limits: its solution notebook's, then the command line's time limits over them."""
    try:
        limits = limits_from_metadata(nbformat.read(ch.solution, as_version=4).metadata)
    except ValueError as err:
        raise SystemExit(f"{ch.solution}: {err}") from None
    overrides = {"cell_seconds": cell_seconds, "wall_seconds": wall_seconds}
    limits = dataclasses.replace(limits, **{k: v for k, v in overrides.items() if v is not None})
    budget = limits.notebook_seconds or notebook_budget(ch)
    return dataclasses.replace(limits, test_cell_seconds=min(limits.test_cell_seconds, limits.cell_seconds),
                               notebook_seconds=min(budget, limits.wall_seconds))
