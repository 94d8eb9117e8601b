"""Make submissions the way students would: the released notebook, with
each answer cell filled in (by the reference solution or a mutant)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.chapters import Chapter
from autograder.release import MARKERS


@dataclass(frozen=True)
class Mutant:
    """A realistic wrong answer: the reference solution of one answer cell
    with `edits` (old, new) applied. `loses` names the test cells (grade ids)
    that must lose points."""

    name: str
    cell: str
    edits: tuple[tuple[str, str], ...]
    loses: tuple[str, ...] = field(default=())


def solution_sources(ch: Chapter) -> dict[str, str]:
    """grade_id -> the reference answer, solution markers removed."""
    nb = nbformat.read(ch.solution, as_version=4)
    out = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            out[meta["grade_id"]] = "\n".join(
                ln for ln in cell.source.splitlines() if ln.strip() not in MARKERS)
    return out


def apply_edits(source: str, edits: tuple[tuple[str, str], ...], label: str) -> str:
    for old, new in edits:
        if source.count(old) != 1:
            raise AssertionError(f"{label}: {old!r} must occur exactly once in the reference answer")
        source = source.replace(old, new)
    return source


def student_notebook(ch: Chapter, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The released notebook with the given answer cells filled in."""
    nb = nbformat.read(ch.student, as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
    return nb


def solved(ch: Chapter) -> nbformat.NotebookNode:
    return student_notebook(ch, solution_sources(ch))


def mutated(ch: Chapter, m: Mutant) -> nbformat.NotebookNode:
    answers = solution_sources(ch)
    answers[m.cell] = apply_edits(answers[m.cell], m.edits, m.name)
    return student_notebook(ch, answers)


def write(nb: nbformat.NotebookNode, submissions: Path, student: str, ch: Chapter) -> Path:
    path = submissions / student / ch.id / f"{ch.id}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path
