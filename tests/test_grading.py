"""Every chapter through the real autograder: the reference solution gets full
marks, the released stub and three forgers (`hostile.forgeries`) get zero, and
the first mutant of each answer cell loses points where it should (every
mutant does in test_checks, in process, on many draws). One `grade` run per
chapter grades all of that chapter's notebooks."""

from __future__ import annotations

import csv
import fcntl
import html
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import nbformat
import pytest

from autograder.chapters import Chapter, all_chapters
from autograder.execute import GuardedExecute
from autograder.intake import STUDENT_ID
from autograder.limits import chapter_limits
from autograder.pool import LOG_FILE
from autograder.report import (NOT_ATTEMPTED, WRITTEN_EMPTY, WRITTEN_PENDING, collect, failure_reason, graded_cells,
                               write_report)
from autograder.secret import default_secret_path
from course.checks.framework import Raises, checks_of, seed_for, submission_code
from course.probing import runner
from course.probing.plain import encode
from course.protocol import STATUS_DIR, status_name
from hostile.forgeries import FORGERIES
from mutants import mutants_for
from submissions import (apply_edits, as_module, cells_of, lean, mutated, solution_sources, solved, student_notebook,
                         verdicts, write)

CHAPTERS = all_chapters()


def real_graded(topic: str) -> list:
    """The mutants of `topic` that the real autograder grades: the first declared for each answer
    cell, so every answer cell's test cells are graded with a wrong answer once; test_checks runs
    every mutant in process, on many draws."""
    first = {}
    for m in mutants_for(topic):
        first.setdefault(m.cell, m)
    return list(first.values())


MUTANTS = [(ch, m) for ch in CHAPTERS for m in real_graded(ch.topic)]
# With pytest-xdist (`make test` runs two workers), the tests of one chapter
# prefer one worker; `graded` makes sure each chapter is graded once anyway.
GRADED = [pytest.param(ch, marks=pytest.mark.xdist_group(ch.id), id=ch.id) for ch in CHAPTERS]
GRADED_MUTANTS = [pytest.param(ch, m, marks=pytest.mark.xdist_group(ch.id), id=f"{ch.id}-{m.name}")
                  for ch, m in MUTANTS]
_results: dict[str, "Graded"] = {}
STUB, SOLUTION = "stub", "solution"
#: a stub whose every function loops forever, graded with a chapter of a short budget and several
#: answer cells (what it costs is the budget plus a few seconds per check; every chapter's budget is
#: bounded in test_every_budget_is_at_most_two_and_a_half_minutes)
LOOPING, LOOPING_CH = "every-function-loops", next(ch for ch in CHAPTERS if ch.id == "06_add_norm")
MOST_BUDGET_SECONDS = 150
#: an honest notebook with a 15-minute training loop before its answers, graded with the last chapter
LONG_TRAINING, LONG_CELL = "long-training-cell", CHAPTERS[-1]
TRAINING_LOOP = """import time

try:  # a training run left in the notebook: it stops on an interrupt, as training code does
    for step in range(900):
        time.sleep(1)
except KeyboardInterrupt:
    print("training stopped at step", step)
"""


@dataclass(frozen=True)
class Graded:
    """One chapter's grading run: grades.csv rows by student, test-cell
    scores by (student, grade id), and the output folder."""

    rows: dict[str, dict]
    cells: dict[tuple[str, str], float]
    out: Path

    def feedback(self, ch: Chapter, student: str) -> str:
        return html.unescape((self.out / "feedback" / student / ch.id / f"{ch.id}.html").read_text())

    def failure_log(self, student: str) -> str:
        """What the grading workers logged when nbgrader could not grade `student`'s notebook (the
        exception that stopped it), or nothing."""
        log = self.out / "nbgrader" / LOG_FILE
        text = log.read_text(errors="replace") if log.is_file() else ""
        at = text.find(f" {student}: nbgrader autograde failed")
        return text[at:at + 6000] if at >= 0 else ""

    def verdicts(self, ch: Chapter, student: str) -> dict[str, str]:
        """{test cell grade id: the judge's report} in the autograded notebook."""
        nb = nbformat.read(self.out / "nbgrader" / "autograded" / student / ch.id / f"{ch.id}.ipynb", 4)
        return {c.metadata.nbgrader["grade_id"]: c.outputs[0].text for c in nb.cells
                if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
                and not c.metadata.nbgrader.get("solution")}


def grade_cells(ch: Chapter) -> dict[str, tuple[float, bool]]:
    """{grade id: (points, graded by hand)} of the chapter's graded cells: its test cells, and its
    written answers (nbgrader's manually graded answers), which the autograder leaves to a person."""
    return {c.metadata.nbgrader["grade_id"]:
            (float(c.metadata.nbgrader["points"]), bool(c.metadata.nbgrader.get("solution")))
            for c in nbformat.read(ch.solution, 4).cells if c.metadata.get("nbgrader", {}).get("grade")}


def answered_status(ch: Chapter) -> str:
    """The status of a notebook whose written answers are filled in (the solution, mutants): they
    await manual grading. An unanswered one (the stub's) gets 0 from nbgrader and needs no one."""
    by_hand = any(manual for _, manual in grade_cells(ch).values())
    return "graded (awaits manual grading)" if by_hand else "graded"


def slug(name: str) -> str:
    return "m-" + "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


def graded(ch, tmp_path_factory) -> Graded:
    """Grade the chapter's solution, stub and mutants once.

    Under pytest-xdist the first worker to need a chapter grades it, in a
    folder all workers share, while the others wait on a lock."""
    if ch.id not in _results:
        shared = tmp_path_factory.getbasetemp()
        if os.environ.get("PYTEST_XDIST_WORKER"):
            shared = shared.parent  # this session's folder, common to all workers
        base = shared / f"graded-{ch.id}"
        with open(shared / f"graded-{ch.id}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (base / "out" / "exercises.csv").exists():
                _grade_chapter(ch, base)
        with open(base / "out" / "grades.csv") as f:
            rows = {r["student_id"]: r for r in csv.DictReader(f)}
        with open(base / "out" / "exercises.csv") as f:
            cells = {(r["student_id"], r["grade_id"]): float(r["score"]) for r in csv.DictReader(f)}
        _results[ch.id] = Graded(rows, cells, base / "out")
    return _results[ch.id]


def _grade_chapter(ch, base: Path) -> None:
    subs = base / "submitted"
    write(solved(ch), subs, SOLUTION, ch)
    write(nbformat.read(ch.student, as_version=4), subs, STUB, ch)
    importer = {gid: f"from course.reference.{ch.topic} import *" for gid in solution_sources(ch)}
    write(lean(student_notebook(ch, importer)), subs, "imports-reference", ch)
    if ch.id == LOOPING_CH.id:
        write(looping_stub(ch), subs, LOOPING, ch)
    if ch.id == LONG_CELL.id:
        write(with_long_training(solved(ch)), subs, LONG_TRAINING, ch)
    for m in real_graded(ch.topic):
        write(mutated(ch, m), subs, slug(m.name), ch)
    for name in FORGERIES:
        write(forged(ch, name), subs, f"forge-{name}", ch)
    subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(base / "out")],
                   check=True)


def forged(ch: Chapter, name: str) -> nbformat.NotebookNode:
    """The released notebook (stubs unsolved, `lean`) with one of `hostile.forgeries`' cells: the
    ``oracle-check`` forger right after the cell that imports ``check``, the others at the end."""
    nb = lean(nbformat.read(ch.student, as_version=4))
    source = FORGERIES[name]
    if name == "contract-facts":
        facts = {}
        for check_ in checks_of(ch.topic).values():
            answers = [check_.expected(c) for c in check_.make_cases(False)]
            answers = [a for a in answers if not isinstance(a, Raises)]
            if answers:
                facts[check_.qualified_name] = encode(answers[0])
        source = source.format(facts=json.dumps(facts))
    cell = nbformat.v4.new_code_cell(source)
    if name == "oracle-check":
        at = next(i for i, c in enumerate(nb.cells) if "from course.checks import check" in c.source) + 1
        nb.cells.insert(at, cell)
    else:
        nb.cells.append(cell)
    return nb


@pytest.mark.slow
@pytest.mark.parametrize("ch", GRADED)
def test_forgers_score_zero(ch, tmp_path_factory):
    """Records written from whatever the sandbox holds earn nothing: the sandbox holds no oracle, and
    the judge draws every case, visible ones too, from the grading secret (`hostile.forgeries`)."""
    result = graded(ch, tmp_path_factory)
    for name in FORGERIES:
        row = result.rows[f"forge-{name}"]
        assert row["status"] == "graded" and float(row["score"]) == 0.0, \
            f"{name}: {row}\n{result.failure_log(f'forge-{name}')}"


@pytest.mark.slow
@pytest.mark.parametrize("ch", GRADED)
def test_solution_gets_full_marks_and_stub_gets_zero(ch, tmp_path_factory):
    result = graded(ch, tmp_path_factory)
    sol, stub = result.rows[SOLUTION], result.rows[STUB]
    automatic = sum(points for points, by_hand in grade_cells(ch).values() if not by_hand)
    assert float(sol["max_score"]) == sum(points for points, _ in grade_cells(ch).values()) and automatic > 0
    assert sol["status"] == answered_status(ch), f"{sol}\n{result.failure_log(SOLUTION)}"
    assert float(sol["score"]) == automatic, sol  # every autograded point; written answers await a person
    assert stub["status"] == "graded" and float(stub["score"]) == 0.0, f"{stub}\n{result.failure_log(STUB)}"


@pytest.mark.slow
@pytest.mark.parametrize("ch", GRADED)
def test_importing_the_chapters_own_reference_earns_nothing(ch, tmp_path_factory):
    result = graded(ch, tmp_path_factory)
    row = result.rows["imports-reference"]
    assert row["status"] == answered_status(ch) and float(row["score"]) == 0.0, \
        f"{row}\n{result.failure_log('imports-reference')}"


@pytest.mark.slow
@pytest.mark.parametrize("ch,mutant", GRADED_MUTANTS)
def test_mutant_loses_points_and_feedback_names_the_mistake(ch, mutant, tmp_path_factory):
    result = graded(ch, tmp_path_factory)
    student = slug(mutant.name)
    row = result.rows[student]
    assert row["status"] == answered_status(ch), f"{row}\n{result.failure_log(student)}"
    assert float(row["score"]) < float(row["max_score"]), f"mutant '{mutant.name}' kept full marks"
    full = {gid: s for (stu, gid), s in result.cells.items() if stu == SOLUTION}
    for gid in mutant.loses:
        assert result.cells[(student, gid)] < full[gid], f"mutant '{mutant.name}' kept {gid}'s points"
    assert mutant.hint and mutant.hint in result.feedback(ch, student), (
        f"the feedback of mutant '{mutant.name}' does not show {mutant.hint!r}")


_VERDICT = re.compile(r"^([✓✗]) (\S+): .*\bvisible\b", re.M)


@pytest.mark.slow
@pytest.mark.parametrize("ch", GRADED)
def test_notebook_verdicts_equal_the_graders_visible_verdicts(ch, tmp_path_factory):
    """What the test cells show in Jupyter, on the visible cases the grader drew for the notebook
    (`seed_for` of its secret and code: the same shapes as the student's own, other numbers), is the
    grader's verdict on the visible checks, cell by cell, for the solution, the stub and every
    mutant graded."""
    result = graded(ch, tmp_path_factory)
    secret = default_secret_path().read_bytes()
    answers = solution_sources(ch)
    notebooks = {SOLUTION: answers, STUB: None}
    for m in real_graded(ch.topic):
        notebooks[slug(m.name)] = {**answers, m.cell: apply_edits(answers[m.cell], m.edits, m.name)}
    for student, variant in notebooks.items():
        nb = nbformat.read(ch.student, 4) if variant is None else student_notebook(ch, variant)
        module = as_module(nb, f"graded_{ch.topic}")
        graded_nb = nbformat.read(result.out / "nbgrader" / "autograded" / student / ch.id / f"{ch.id}.ipynb", 4)
        seed = seed_for(secret, student, ch.id, submission_code(graded_nb.cells))
        for gid, report in result.verdicts(ch, student).items():
            judged = _VERDICT.findall(report)
            shown = [ok for ok, _ in verdicts([c for c in cells_of(ch)[gid] if not c.hidden], module, seed)]
            assert [ok == "✓" for ok, _ in judged] == shown, f"{student}, {gid}:\n{report}"


#: a chapter's cell limits are at least this many times its reference solution's slowest such cell
GENEROUS = 5


def _seconds(cell) -> float:
    timing = cell.metadata.get("execution", {})
    start, end = timing["iopub.execute_input"], timing["shell.execute_reply"]
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def looping_stub(ch: Chapter) -> nbformat.NotebookNode:
    """The released notebook with every stub's ``raise NotImplementedError()`` an endless loop."""
    nb = nbformat.read(ch.student, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = re.sub(r"^(\s*)raise NotImplementedError\(\)", r"\1while True:\n\1    pass",
                                 cell.source, flags=re.M)
            assert "while True" in cell.source, cell.source
    return nb


def with_long_training(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """`nb` with `TRAINING_LOOP` in a cell before its first answer cell."""
    first = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution"))
    nb.cells.insert(first, nbformat.v4.new_code_cell(TRAINING_LOOP))
    return nb


@pytest.mark.parametrize("ch", CHAPTERS, ids=[ch.id for ch in CHAPTERS])
def test_every_budget_is_at_most_two_and_a_half_minutes(ch):
    """What a notebook whose every function loops costs is its chapter's budget plus a few seconds per
    check (the next test): no chapter's budget may pass MOST_BUDGET_SECONDS."""
    assert chapter_limits(ch).notebook_seconds <= MOST_BUDGET_SECONDS, ch.id


@pytest.mark.slow
@pytest.mark.xdist_group(LOOPING_CH.id)
def test_a_notebook_whose_every_function_loops_costs_its_budget_not_a_cell_limit_per_cell(tmp_path_factory):
    """A notebook whose every function loops forever costs the budget of its own cells (plus a
    kernel's grace after an interrupt), and a few seconds per check (`runner.CASE_SECONDS`: the kernel
    gives up on a looping call, and on that check's later cases): its test cells all ran, and it
    scores 0."""
    ch = LOOPING_CH
    result = graded(ch, tmp_path_factory)
    note = json.loads((result.out / "nbgrader" / STATUS_DIR / status_name(LOOPING, ch.id)).read_text())
    budget = chapter_limits(ch).notebook_seconds
    checks = {c.check.qualified_name for calls in cells_of(ch).values() for c in calls}
    # a looping case stops after CASE_SECONDS of processor time: twice that on the clock, sharing a core
    assert note["seconds"] <= budget + GuardedExecute.interrupt_grace_seconds.default_value + 10 \
        + len(checks) * 2 * runner.CASE_SECONDS, note
    assert note["cells_not_run"], note
    row = result.rows[LOOPING]
    assert float(row["score"]) == 0 and "time budget" in row["status"], row
    for gid, report in result.verdicts(ch, LOOPING).items():
        assert "does it loop forever?" in report, (gid, report)


@pytest.mark.slow
@pytest.mark.xdist_group(LONG_CELL.id)
def test_a_long_training_cell_costs_time_not_the_grade(tmp_path_factory):
    """An honest notebook that leaves a 15-minute training loop in an early cell (catching
    KeyboardInterrupt, as notebook training code does) is interrupted when the budget of its own cells
    is spent; the answers after it still run, and so do the test cells: full marks."""
    result = graded(LONG_CELL, tmp_path_factory)
    row = result.rows[LONG_TRAINING]
    assert float(row["score"]) == float(result.rows[SOLUTION]["score"]) > 0, row
    note = json.loads((result.out / "nbgrader" / STATUS_DIR / status_name(LONG_TRAINING, LONG_CELL.id)).read_text())
    assert note["seconds"] <= chapter_limits(LONG_CELL).notebook_seconds + 60, note


@pytest.mark.slow
@pytest.mark.parametrize("ch", GRADED)
def test_cell_limits_are_a_generous_multiple_of_the_reference_cells_times(ch, tmp_path_factory):
    """The per-cell limits are short (a looping answer costs seconds per test cell, not a
    minute) yet generous: measured on the graded reference solution, under the suite's load."""
    out = graded(ch, tmp_path_factory).out
    nb = nbformat.read(out / "nbgrader" / "autograded" / SOLUTION / ch.id / f"{ch.id}.ipynb", 4)
    slowest = {"test": 0.0, "any": 0.0}
    for cell in nb.cells:
        if cell.cell_type == "code":
            grading = cell.metadata.get("nbgrader", {})
            kind = "test" if grading.get("grade") and not grading.get("solution") else "any"
            slowest[kind] = max(slowest[kind], _seconds(cell))
    limits = chapter_limits(ch)
    assert limits.test_cell_seconds >= GENEROUS * slowest["test"], (limits, slowest)
    assert limits.cell_seconds >= GENEROUS * max(slowest.values()), (limits, slowest)
    whole = json.loads((out / "nbgrader" / STATUS_DIR / status_name(SOLUTION, ch.id)).read_text())["seconds"]
    assert whole <= limits.notebook_seconds / 1.5, \
        f"the reference ran {whole} s of its {limits.notebook_seconds} s budget"
    print(f"{ch.id}: slowest test cell {slowest['test']:.1f} s (limit {limits.test_cell_seconds} s), "
          f"slowest other cell {slowest['any']:.1f} s (limit {limits.cell_seconds} s)")


@pytest.mark.slow
@pytest.mark.parametrize("ch", GRADED)
def test_instructor_report_names_why_points_were_lost(ch, tmp_path_factory):
    """The report's exercise table agrees with exercises.csv, and its failure reasons, read from
    the judge's verdicts as data (every test cell has them), are right: none for the solution,
    'not attempted' for the stub, a known hint for mutants whose hint is a specific mistake's; a
    written answer is 'not given' (the stub, the forgers) or 'awaits grading by hand' (the solution)."""
    out = graded(ch, tmp_path_factory).out
    page = write_report(out)
    _, _, exercises = collect(out)
    result = graded(ch, tmp_path_factory)
    for ex in exercises:
        scores = [s for (_, gid), s in result.cells.items() if gid == ex.grade_id]
        assert sorted(ex.scores) == sorted(scores)
        if grade_cells(ch)[ex.grade_id][1]:
            empty = 1 + len(FORGERIES)  # the stub's and the forgers' (the released notebook's text)
            assert ex.reasons[WRITTEN_EMPTY] == empty and ex.reasons[WRITTEN_PENDING] >= 1, (ex.grade_id, ex.reasons)
        else:
            assert ex.reasons[NOT_ATTEMPTED] >= 1, f"{ex.grade_id}: the stub's cell is not 'not attempted'"

    def checks(student: str) -> dict[str, list[dict]]:
        """{test cell grade id: the judge's verdict on each check it calls, as data}"""
        cells = graded_cells(out, student, ch.id)
        found = {gid: cells[gid] for gid in result.verdicts(ch, student)}
        assert all(isinstance(c, list) and c for c in found.values()), f"{student}: no verdict records"
        return found

    assert all(failure_reason(c) is None for c in checks(SOLUTION).values())
    assert all(failure_reason(c) == NOT_ATTEMPTED for c in checks(STUB).values())
    named, mutants = 0, real_graded(ch.topic)  # those graded
    for m in mutants:
        for gid in m.loses:
            reason = failure_reason(checks(slug(m.name))[gid])
            assert reason is not None, (m.name, gid)
            named += m.hint in reason
    assert named >= len(mutants) // 2, "most mutants' hints should be the reason the report gives"
    text = page.read_text()
    assert all(ex.grade_id in text for ex in exercises)
    for png in (f"{ch.id}-scores.png", f"{ch.id}-pass-rate.png"):
        assert (page.parent / png).stat().st_size > 1000 and png in text


@pytest.mark.parametrize("ch,mutant", [(ch, m) for ch, m in MUTANTS], ids=[f"{ch.id}-{m.name}" for ch, m in MUTANTS])
def test_each_mutant_grades_as_a_valid_student(ch, mutant):
    """The grader skips (with a warning) a folder whose name is not a valid student id."""
    assert STUDENT_ID.match(slug(mutant.name)), f"mutant name too long or odd for a student id: {mutant.name!r}"
    assert sum(slug(m.name) == slug(mutant.name) for m in mutants_for(ch.topic)) == 1, "two mutants, one student id"
