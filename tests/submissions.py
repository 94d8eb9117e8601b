"""Make submissions the way students would: the released notebook, with
each answer cell filled in (by the reference solution or a mutant)."""

from __future__ import annotations

import ast
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.chapters import Chapter
from autograder.release import MARKERS, exported_code
from course.checks import framework
from course.checks.framework import Check


@dataclass(frozen=True)
class Mutant:
    """A realistic wrong answer: the reference solution of one answer cell
    with `edits` (old, new) applied. `loses` names the test cells (grade ids)
    that must lose points; `hint` is (part of) the feedback that must name
    the mistake, in those cells, on every seed."""

    name: str
    cell: str
    edits: tuple[tuple[str, str], ...]
    loses: tuple[str, ...] = field(default=())
    hint: str = ""


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
    """The released notebook answered with the solution, but for the mutant's cell; without
    the chapter's demonstrations (`lean`): a mutant is graded only on what the tests see."""
    answers = solution_sources(ch)
    answers[m.cell] = apply_edits(answers[m.cell], m.edits, m.name)
    return lean(student_notebook(ch, answers))


def lean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """`nb` without the code cells that are neither nbgrader's (setup, answers, tests) nor
    imports only: figures and demonstrations, which take most of a notebook's run time."""
    def kept(cell: nbformat.NotebookNode) -> bool:
        if cell.cell_type != "code" or "nbgrader" in cell.metadata:
            return True
        try:
            body = ast.parse(cell.source).body
        except SyntaxError:
            return False
        return bool(body) and all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in body)

    nb.cells = [c for c in nb.cells if kept(c)]
    return nb


def write(nb: nbformat.NotebookNode, submissions: Path, student: str, ch: Chapter) -> Path:
    path = submissions / student / ch.id / f"{ch.id}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def as_module(nb: nbformat.NotebookNode, name: str) -> types.ModuleType:
    """A notebook's exported cells (its answers) run as a fresh module."""
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses and pickling look a class's module up
    exec(compile(exported_code(nb), f"<{name}>", "exec"), module.__dict__)
    return module


@dataclass(frozen=True)
class Call:
    """One ``check("topic.name", obj, hidden=...)`` in a test cell."""

    check: Check
    obj: str  # the name the cell passes, looked up in the answers' module
    hidden: bool


def cells_of(ch: Chapter) -> dict[str, list[Call]]:
    """{test cell grade id: the checks it calls}, from the solution notebook."""
    cells = {}
    for cell in nbformat.read(ch.solution, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade") or meta.get("solution"):
            continue
        calls = []
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check":
                hidden = any(k.arg == "hidden" and k.value.value is True for k in node.keywords)
                calls.append(Call(framework.get_check(node.args[0].value), node.args[1].id, hidden))
        cells[meta["grade_id"]] = calls
    return cells


def verdicts(calls: list[Call], answers: types.ModuleType, seed: int | None) -> list[tuple[bool, str]]:
    """(passed, report) of each check a cell calls, hidden ones on `seed`."""
    out = []
    for call in calls:
        cases = call.check.make_cases(call.hidden, seed if call.hidden else None)
        entries = framework.student_entries(call.check, getattr(answers, call.obj), cases)
        out.append(framework.summary(call.check, call.hidden, framework.evaluate(call.check, cases, entries)))
    return out
