"""Every chapter through the real autograder: the reference solution gets full
marks, the released stub gets zero, and every mutant loses points where it
should. One `grade` run per chapter grades all of that chapter's notebooks."""

from __future__ import annotations

import csv
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.chapters import all_chapters
from mutants import mutants_for
from submissions import mutated, solution_sources, solved, student_notebook, write

CHAPTERS = all_chapters()
MUTANTS = [(ch, m) for ch in CHAPTERS for m in mutants_for(ch.topic)]
# With pytest-xdist (`make test` runs two workers), the tests of one chapter
# prefer one worker; `graded` makes sure each chapter is graded once anyway.
GRADED = [pytest.param(ch, marks=pytest.mark.xdist_group(ch.id), id=ch.id) for ch in CHAPTERS]
GRADED_MUTANTS = [pytest.param(ch, m, marks=pytest.mark.xdist_group(ch.id), id=f"{ch.id}-{m.name}")
                  for ch, m in MUTANTS]
_results: dict[str, tuple[dict, dict]] = {}


def _slug(name: str) -> str:
    return "m-" + "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


def graded(ch, tmp_path_factory) -> tuple[dict, dict]:
    """Grade the chapter's solution, stub and mutants once; return
    ({student: grades.csv row}, {(student, grade_id): score}).

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
        _results[ch.id] = rows, cells
    return _results[ch.id]


def _grade_chapter(ch, base: Path) -> None:
    subs = base / "submitted"
    write(solved(ch), subs, "solution", ch)
    write(nbformat.read(ch.student, as_version=4), subs, "stub", ch)
    importer = {gid: f"from course.reference.{ch.topic} import *" for gid in solution_sources(ch)}
    write(student_notebook(ch, importer), subs, "imports-reference", ch)
    for m in mutants_for(ch.topic):
        write(mutated(ch, m), subs, _slug(m.name), ch)
    subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(base / "out")],
                   check=True)


@pytest.mark.slow
@pytest.mark.parametrize("ch", GRADED)
def test_solution_gets_full_marks_and_stub_gets_zero(ch, tmp_path_factory):
    rows, _ = graded(ch, tmp_path_factory)
    sol, stub = rows["solution"], rows["stub"]
    assert sol["status"] == "graded" and float(sol["max_score"]) > 0
    assert float(sol["score"]) == float(sol["max_score"]), sol
    assert stub["status"] == "graded" and float(stub["score"]) == 0.0, stub


@pytest.mark.slow
@pytest.mark.parametrize("ch", GRADED)
def test_importing_the_chapters_own_reference_earns_nothing(ch, tmp_path_factory):
    rows, _ = graded(ch, tmp_path_factory)
    row = rows["imports-reference"]
    assert row["status"] == "graded" and float(row["score"]) == 0.0, row


@pytest.mark.slow
@pytest.mark.parametrize("ch,mutant", GRADED_MUTANTS)
def test_mutant_loses_points(ch, mutant, tmp_path_factory):
    rows, cells = graded(ch, tmp_path_factory)
    row = rows[_slug(mutant.name)]
    assert row["status"] == "graded", row
    assert float(row["score"]) < float(row["max_score"]), f"mutant '{mutant.name}' kept full marks"
    full = {gid: s for (stu, gid), s in cells.items() if stu == "solution"}
    for gid in mutant.loses:
        assert cells[(_slug(mutant.name), gid)] < full[gid], f"mutant '{mutant.name}' kept {gid}'s points"


@pytest.mark.parametrize("ch", CHAPTERS, ids=lambda c: c.id)
def test_every_answer_cell_has_three_mutants(ch):
    counts = {gid: 0 for gid in solution_sources(ch)}
    for m in mutants_for(ch.topic):
        assert m.cell in counts, f"mutant '{m.name}' edits unknown cell {m.cell!r}"
        assert m.loses, f"mutant '{m.name}' names no test cell that must lose points"
        counts[m.cell] += 1
    thin = {gid: n for gid, n in counts.items() if n < 3}
    assert not thin, f"answer cells with fewer than three mutants: {thin}"
