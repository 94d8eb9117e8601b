"""The judge's verdict on one test cell, as nbgrader scores it."""

from __future__ import annotations

import nbformat
import pytest
from nbgrader import utils

from autograder import judge
from course.protocol import cell_score, record_name

SOURCE = 'check("topic.a", f)\ncheck("topic.b", f)\n### BEGIN HIDDEN TESTS\ncheck("topic.a", f, hidden=True)\n'


@pytest.mark.parametrize("points,passed,total,score", [
    (3.0, 3, 3, 3.0), (3.0, 0, 3, 0.0), (3.0, 1, 3, 1.0), (2.0, 1, 3, 0.67), (2.0, 0, 0, 0.0), (1.5, 2, 2, 1.5)])
def test_cell_score_shares_points_equally_between_checks(points, passed, total, score):
    assert cell_score(points, passed, total) == score


def nbgrader_score(outputs: list, points: float) -> float:
    """The score nbgrader's own rule gives a test cell with these outputs."""
    cell = nbformat.v4.new_code_cell(SOURCE, outputs=outputs, metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "points": points, "grade_id": "t", "schema_version": 3}})
    return utils.determine_grade(cell)[0]


@pytest.mark.parametrize("passing,expected", [({"topic.a", "topic.b", "topic.a hidden"}, 3.0),
                                              ({"topic.a", "topic.b"}, 2.0), ({"topic.b"}, 1.0), (set(), 0.0)])
def test_cell_verdict_is_scored_by_nbgrader_as_the_judge_decided(tmp_path, monkeypatch, passing, expected):
    for name, hidden in judge.checks_in_source(SOURCE):
        (tmp_path / record_name(name, hidden)).write_text(f"{name}{' hidden' * hidden}")
    seen = []

    def judge_record(name, hidden, seed, text):
        seen.append((name, hidden, seed))
        return text in passing, f"{text}: {'ok' if text in passing else 'wrong'}"

    monkeypatch.setattr(judge.framework, "judge_record", judge_record)
    outputs = judge.cell_verdict(SOURCE, 3.0, tmp_path, seed=42)
    assert seen == [("topic.a", False, None), ("topic.b", False, None), ("topic.a", True, 42)]
    assert outputs[0].text.splitlines()[0] == f"topic.a: {'ok' if 'topic.a' in passing else 'wrong'}"
    assert nbgrader_score(outputs, 3.0) == expected


def test_cell_without_checks_earns_nothing(tmp_path):
    outputs = judge.cell_verdict("print('all tests passed')", 3.0, tmp_path, seed=1)
    assert "calls no check" in outputs[0].text and nbgrader_score(outputs, 3.0) == 0.0


def test_a_check_that_crashes_in_the_judge_fails_alone(tmp_path, monkeypatch):
    def judge_record(name, hidden, seed, text):
        if name == "topic.b":
            raise RuntimeError("bug in the course's check")
        return True, "ok"

    monkeypatch.setattr(judge.framework, "judge_record", judge_record)
    outputs = judge.cell_verdict(SOURCE, 3.0, tmp_path, seed=1)
    assert "could not evaluate" in outputs[0].text and nbgrader_score(outputs, 3.0) == 2.0
