"""Make submissions the way students would: the released notebook, with
each answer cell filled in (by the reference solution or a mutant)."""

from __future__ import annotations

import ast
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from autograder.chapters import Chapter
from course.cells import (check_calls, exported_code, grade_id, is_answer_cell, is_test_cell,
                          without_solution_markers)
from course.checks import framework
from course.checks.framework import Check
from course.probing import runner
from course.probing import verdicts as verdicts_
from course.probing.cases import carried
from course.probing.plain import encode
from course.probing.verdicts import Verdict
from course.protocol import counted


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


def verdicts(calls: list[Call], answers: types.ModuleType, seed: int | None,
             bank: "Bank | None" = None) -> list[Verdict]:
    """The judge's verdict on each check a cell calls (``(passed, report)`` with its record), its cases
    drawn from `seed` as the grader draws them; `bank` keeps cases and answers for the next answer
    judged on the same draws."""
    bank = bank or Bank()
    return [judge_call(call, answers, seed, bank) for call in calls]


def grader_seeds(ch: Chapter, n: int) -> list[int]:
    """`n` seeds as the grader makes them (`framework.seed_for`: a secret, a student, the chapter, the
    notebook's code), from `n` different secrets: the draws a class of students meets."""
    return [framework.seed_for(f"secret {i}".encode(), f"student{i}", ch.id, f"code {i}") for i in range(n)]


class Bank:
    """Cases (as made, and after the trip to the kernel) and the oracle's answers, made once per
    ``(check, hidden, seed)`` for every answer judged on them: the tests judge hundreds of wrong
    answers on the same draws."""

    def __init__(self, hints: bool = True) -> None:
        self._cases: dict = {}
        self._answers: dict = {}
        self.hints = hints  # False: failures are judged without naming their mistake (faster)

    def cases(self, check: Check, hidden: bool, seed: int | None) -> tuple[list, list]:
        key = (check.qualified_name, hidden, seed)
        if key not in self._cases:
            made = check.make_cases(hidden, seed)
            self._cases[key] = made, carried(made)
        return self._cases[key]

    def answer(self, check: Check, hidden: bool, seed: int | None, i: int) -> Any:
        key = (check.qualified_name, hidden, seed, i)
        if key not in self._answers:
            self._answers[key] = framework.answer(check, self.cases(check, hidden, seed)[0][i])
        return self._answers[key]

    def wrongs(self, check: Check, hidden: bool, seed: int | None, i: int) -> list:
        """The known mistakes' (hint, output) on case i."""
        key = (check.qualified_name, hidden, seed, i, "mistakes")
        if not self.hints:
            return []
        if key not in self._answers:
            case = self.cases(check, hidden, seed)[0][i]
            self._answers[key] = [(m.hint, framework.mistake_output(m, case)) for m in check.mistakes]
        return self._answers[key]


def judge_call(call: Call, answers: types.ModuleType, seed: int | None, bank: Bank) -> Verdict:
    """One check's verdict on the object `call` names in `answers`, by the judge's own path: the
    kernel's raw entries as JSON text (`runner.run_student` on the cases after their trip), judged
    by `verdicts.judge_text` as `framework.judge_record` judges them."""
    check_ = call.check
    cases, sent = bank.cases(check_, call.hidden, seed)
    obj = getattr(answers, call.obj, None)
    text = None if obj is None else encode(runner.run_student(check_.probe, obj, sent))  # None: a NameError

    def judge(entries: list) -> list:
        return verdicts_.evaluate(framework.standard(check_), cases, entries,
                                  lambda i: bank.answer(check_, call.hidden, seed, i),
                                  lambda i: bank.wrongs(check_, call.hidden, seed, i),
                                  framework.replayer(check_, cases))
    return verdicts_.judge_text(check_.qualified_name, call.hidden, text, cases, judge, check_.guard)


def cell_fraction(judged: list[Verdict]) -> float:
    """The share of a test cell's points its verdicts earn (`course.protocol.counted`)."""
    counts = counted([(v.passed, v.record["guard"]) for v in judged])
    return sum(counts) / len(counts)
