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
from course.cells import (check_calls, exported_code, grade_id, is_answer_cell, is_test_cell,
                          without_solution_markers)
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
    return {grade_id(cell): without_solution_markers(cell.source) for cell in nb.cells if is_answer_cell(cell)}


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
        if grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)]
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
    """One ``check("topic.name", obj, hidden=...)`` in a test cell (`course.cells.check_calls`)."""

    check: Check
    obj: str  # the name the cell passes, looked up in the answers' module
    hidden: bool


def cells_of(ch: Chapter) -> dict[str, list[Call]]:
    """{test cell grade id: the checks it calls}, from the solution notebook."""
    cells = {}
    for cell in nbformat.read(ch.solution, as_version=4).cells:
        if not is_test_cell(cell):
            continue
        calls = check_calls(cell.source)
        if any(call.obj is None for call in calls):
            raise ValueError(f"{ch.id}, cell {grade_id(cell)}: give every check(...) its object by name")
        cells[grade_id(cell)] = [Call(framework.get_check(call.name), call.obj, call.hidden) for call in calls]
    return cells


def verdicts(calls: list[Call], answers: types.ModuleType, seed: int | None) -> list[tuple[bool, str]]:
    """(passed, report) of each check a cell calls, its cases drawn from `seed` as the grader draws them."""
    out = []
    for call in calls:
        cases = call.check.make_cases(call.hidden, seed)
        entries = framework.student_entries(call.check, getattr(answers, call.obj), cases)
        out.append(framework.summary(call.check, call.hidden, framework.evaluate(call.check, cases, entries)))
    return out
