"""chapters/ and course/reference/ are exactly what `release` makes from solutions/."""

import json

import pytest

from autograder.chapters import all_chapters
from autograder.lint import lint_solution
from autograder.release import release

CHAPTERS = all_chapters()


@pytest.mark.parametrize("ch", CHAPTERS, ids=lambda c: c.id)
def test_solution_notebook_follows_the_rules(ch):
    assert lint_solution(ch) == []


@pytest.mark.parametrize("ch", CHAPTERS, ids=lambda c: c.id)
def test_released_files_are_up_to_date(ch, tmp_path):
    release([ch], out=tmp_path)
    fresh = tmp_path / "chapters" / ch.id
    committed = sorted(p.relative_to(ch.student.parent) for p in ch.student.parent.rglob("*") if p.is_file())
    assert committed == sorted(p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file())
    for rel in committed:
        a, b = (ch.student.parent / rel), (fresh / rel)
        if rel.suffix == ".ipynb":
            assert json.loads(a.read_text()) == json.loads(b.read_text()), \
                f"{a} is out of date: run `python -m autograder release {ch.id}`"
        else:
            assert a.read_bytes() == b.read_bytes(), f"{a} is out of date"
    assert ch.reference_module.read_text() == (tmp_path / "reference" / f"{ch.topic}.py").read_text(), \
        f"{ch.reference_module} is out of date: run `python -m autograder release {ch.id}`"


def test_student_notebooks_hold_no_solutions_or_hidden_tests():
    for ch in CHAPTERS:
        text = ch.student.read_text()
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "hidden=True"):
            assert marker not in text, f"{ch.student} contains {marker!r}"
