"""The instructor's report (`autograder.report`) on small hand-made classes: no grading needed."""

import csv
import json
from collections import Counter

import nbformat

from autograder.chapters import get_chapter
from autograder.feedback import exercise_titles
from autograder.judge import report_digest, verdicts_path
from autograder.report import (NO_RECORD, NOT_ATTEMPTED, NOT_REACHED, OTHER, Exercise, collect, failure_reason,
                               write_report)
from autograder.results import Row, write_csvs
from course.probing.verdicts import NO_RESULTS, STUB, CaseResult, record
from course.protocol import STATUS_DIR

CH = "04_attention"
HINT = "Did you skip subtracting the maximum?"
GENERAL = "Subtract the row's maximum before exponentiating."


def failing(*cases: CaseResult, name: str = "attention.softmax") -> dict:
    return record(name, False, [CaseResult("ok", None), *cases])


def test_reasons_carry_no_numbers_not_even_at_the_end_of_a_sentence():
    assert failure_reason([failing(CaseResult("x: (2, 3)", "expected 3 items, got 29.", GENERAL))]) == \
        "expected N items, got N"
    differ = "values differ in item 1: largest error 0.25 at index (0, 2) (expected 1.5, got 1.75)"
    assert failure_reason([failing(CaseResult("x", differ, GENERAL))]) == "values differ in item N"


def test_the_first_failed_check_decides_with_its_mistake_hint_never_the_general_one():
    passed = record("attention.scores", False, [CaseResult("ok", None)])
    general = failing(CaseResult("x", "expected dtype float64, got float32", GENERAL))
    mistake = failing(CaseResult("y", "values differ", HINT, mistake=True), CaseResult("x", "raised", GENERAL))
    assert failure_reason([passed]) is None
    assert failure_reason([passed, mistake, general]) == HINT
    assert failure_reason([general, mistake]) == "expected dtype float64, got float32"
    assert failure_reason([failing(CaseResult("x", STUB)), mistake]) == NOT_ATTEMPTED
    assert failure_reason([record("attention.softmax", True, category=NO_RESULTS, cases=4)]) == NOT_REACHED
    assert failure_reason([]) == OTHER  # a cell that calls no check


def test_a_real_mistake_ranks_before_a_plain_category_as_common():
    hint = "Did you skip subtracting the maximum?"
    ex = Exercise(CH, "test-softmax", 2.0, reasons=Counter({NOT_ATTEMPTED: 3, "raised ValueError": 1, hint: 3}))
    assert ex.common_reason() == (hint, 3)
    assert [r for r, _ in ex.ranked_reasons()] == [hint, NOT_ATTEMPTED, "raised ValueError"]


def test_students_who_handed_in_nothing_are_counted_apart(tmp_path):
    rows = [Row("1001", CH, 9.0, 9.0, "graded"), Row("1002", CH, 3.0, 9.0, "graded"),
            Row("1003", CH, 0.0, 9.0, "missing: nothing submitted"),
            Row("1004", CH, 0.0, 9.0, "missing notebook: expected 04_attention/04_attention.ipynb")]
    cells = [[s, CH, CH, "test-softmax", score, 9.0] for s, score in (("1001", 9.0), ("1002", 3.0))]
    write_csvs(tmp_path, rows, cells)
    totals, maxima, _ = collect(tmp_path)
    assert totals == {CH: [9.0, 3.0]} and maxima == {CH: 9.0}  # the histogram's and the mean's scores
    page = write_report(tmp_path).read_text()
    assert "2 students handed in a notebook: mean 6.00 of 9 after late penalties, full marks: 1. 2 handed in nothing" \
        in page
    assert "<th>mean (before late penalties)</th>" in page  # the exercises' scores are nbgrader's, before them


def graded_notebook(out, student: str, reports: dict[str, str]):
    """An autograded notebook whose test cells (grade id: report) show these reports."""
    cells = [nbformat.v4.new_code_cell("check(...)", outputs=[nbformat.v4.new_output("stream", name="stdout", text=t)],
                                       metadata={"nbgrader": {"grade": True, "solution": False, "points": 2.0,
                                                              "grade_id": gid, "locked": True, "schema_version": 3}})
             for gid, t in reports.items()]
    folder = out / "nbgrader" / "autograded" / student / CH
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / f"{CH}.ipynb")
    return cells


def test_reasons_are_read_from_the_judges_records_and_a_notebook_without_them_keeps_its_scores(tmp_path):
    """The report reads the verdicts file (`autograder.judge.JudgeChecks`), not the text the cells
    show; a notebook graded before the judge wrote one, or whose file is from another grading of
    it (the digest of a cell's report differs), counts its scores, its reason: `NO_RECORD`."""
    students = {"1001": HINT, "1002": None, "1003": "stale"}
    rows = [Row(s, CH, 1.0, 4.0, "graded") for s in students]
    cells = [[s, CH, CH, gid, 1.0 if gid == "test-softmax" else 0.0, 2.0]
             for s in students for gid in ("test-softmax", "test-scores")]
    write_csvs(tmp_path, rows, cells)
    for student, kind in students.items():
        shown = graded_notebook(tmp_path, student, {"test-softmax": "✗ a report that names no hint\n",
                                                    "test-scores": "✗ another\n"})
        if kind is None:
            continue  # graded by an older version: no verdicts file
        verdicts = {"test-softmax": [record("attention.softmax", False, [CaseResult("a", "wrong", HINT, True)])],
                    "test-scores": [record("attention.scores", False, [CaseResult("b", STUB)])]}
        digest = "another grading" if kind == "stale" else None
        data = {"format": 1, "student": student, "assignment": CH, "notebook": CH,
                "cells": {c.metadata.nbgrader["grade_id"]: {"digest": digest or report_digest(c.outputs),
                                                            "checks": verdicts[c.metadata.nbgrader["grade_id"]]}
                          for c in shown}}
        path = verdicts_path(tmp_path / "nbgrader" / STATUS_DIR, student, CH)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    _, _, exercises = collect(tmp_path)
    reasons = {ex.grade_id: ex.reasons for ex in exercises}
    assert reasons == {"test-softmax": Counter({HINT: 1, NO_RECORD: 2}),
                       "test-scores": Counter({NOT_ATTEMPTED: 1, NO_RECORD: 2})}
    assert {ex.grade_id: sorted(ex.scores) for ex in exercises} == {"test-softmax": [1.0] * 3,
                                                                    "test-scores": [0.0] * 3}


def test_cases_judged_on_a_students_own_earlier_pieces_are_attributed_to_those_pieces(tmp_path):
    """A cell whose cases passed on replay (the student's earlier piece differs from the answer, and is
    charged in its own exercise) is full marks; the report names the earlier pieces and how many
    students' answers were judged on them, under the later exercise."""
    pieces = "split_heads or merge_heads"
    replayed = CaseResult("x", None, f"your {pieces}", replayed=True)
    students = {"1001": [replayed, CaseResult("y", None)], "1002": [CaseResult("y", None)], "1003": [replayed]}
    write_csvs(tmp_path, [Row(s, CH, 2.0, 2.0, "graded") for s in students],
               [[s, CH, CH, "test-mha", 2.0, 2.0] for s in students])
    for student, results in students.items():
        (shown,) = graded_notebook(tmp_path, student, {"test-mha": "✓\n"})
        checks = [record("multi_head_attention.forward", True, results)]
        assert checks[0]["replayed_on"] == (pieces if replayed in results else "")
        data = {"format": 1, "student": student, "assignment": CH, "notebook": CH,
                "cells": {"test-mha": {"digest": report_digest(shown.outputs), "checks": checks}}}
        path = verdicts_path(tmp_path / "nbgrader" / STATUS_DIR, student, CH)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    (ex,) = collect(tmp_path)[2]
    assert ex.replayed_on == Counter({pieces: 2}) and ex.reasons == Counter()
    assert f"Judged on the student's own {pieces} (which differ" in write_report(tmp_path).read_text()
    assert "): 2 students</p>" in write_report(tmp_path).read_text()


def test_exercises_are_listed_in_the_notebooks_order(tmp_path):
    """exercises.csv lists the grade ids sorted by name; the report's table, its chart and its own
    exercises.csv follow the chapter's notebook (4.1, 4.2, 4.3), as the release in OUT holds it."""
    release = nbformat.read(get_chapter(CH).student, as_version=4)  # what grade copies into OUT
    folder = tmp_path / "nbgrader" / "release" / CH
    folder.mkdir(parents=True)
    nbformat.write(release, folder / f"{CH}.ipynb")
    order = list(exercise_titles(release))
    assert order != sorted(order)  # otherwise this test shows nothing
    write_csvs(tmp_path, [Row("1001", CH, 9.0, 9.0, "graded")],
               [["1001", CH, CH, gid, 1.0, 1.0] for gid in sorted(order)])
    page = write_report(tmp_path).read_text()
    assert sorted(order, key=page.index) == order
    with open(tmp_path / "report" / "exercises.csv", newline="") as f:
        assert [r["grade_id"] for r in csv.DictReader(f)] == order
