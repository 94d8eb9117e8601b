"""chapters/, course/reference/ and course/visible/ are what `release` makes from solutions/."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from course.probing.plain import from_json_value

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
    fresh = json.loads((tmp_path / "visible" / f"{ch.topic}.json").read_text())
    problem = _differs(json.loads(ch.visible_answers.read_text()), fresh, "")
    assert problem is None, \
        f"{ch.visible_answers} is out of date ({problem}): run `python -m autograder release {ch.id}`"


def _differs(old, new, where: str) -> str | None:
    """Where two visible-answer files differ, or None. Arrays and floats may differ in their last
    bits (another machine's BLAS made them): they are compared as numbers, everything else exactly."""
    if isinstance(old, dict) and ("__ndarray__" in old or "__float__" in old):
        if not isinstance(new, dict) or old.keys() != new.keys():
            return where
        a, b = from_json_value(old), from_json_value(new)
        if isinstance(a, float):
            same = math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6) or (math.isnan(a) and math.isnan(b))
            return None if same else where
        same = a.shape == b.shape and a.dtype == b.dtype and np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
        return None if same else where
    if isinstance(old, dict):
        if not isinstance(new, dict) or old.keys() != new.keys():
            return f"{where}: keys"
        return next((p for k in old if (p := _differs(old[k], new[k], f"{where}/{k}"))), None)
    if isinstance(old, list):
        if not isinstance(new, list) or len(old) != len(new):
            return f"{where}: length"
        return next((p for i, (a, b) in enumerate(zip(old, new)) if (p := _differs(a, b, f"{where}/{i}"))), None)
    return None if old == new else where


def test_student_notebooks_hold_no_solutions_or_hidden_tests():
    for ch in CHAPTERS:
        text = ch.student.read_text()
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "hidden=True"):
            assert marker not in text, f"{ch.student} contains {marker!r}"


FINGERPRINT = """
import hashlib, torch
from autograder.chapters import all_chapters
from course.checks.framework import checks_of
from course.probing.plain import encode
torch.set_num_threads(1)
digest = hashlib.sha256()
for ch in all_chapters():
    for name, check in sorted(checks_of(ch.topic).items()):
        for hidden, seed in ((False, 1), (True, 1), (True, 2), (True, 3)):
            for case in check.make_cases(hidden, seed):
                try:
                    answer = encode(check.expected(case))
                except Exception as err:  # a case whose answer is an error
                    answer = type(err).__name__
                digest.update(repr((check.qualified_name, case.label, answer)).encode())
print(digest.hexdigest())
"""


def test_every_case_is_the_same_in_every_process():
    """A seed draws the same cases and answers whatever Python's string hashing (PYTHONHASHSEED,
    random per process): the grader, a regrade and the release agree. A set of strings iterated
    into a case (its order is the hash's) drew other hidden cases of chapter 1 in each process."""
    runs = [subprocess.run([sys.executable, "-c", FINGERPRINT], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONHASHSEED": seed}) for seed in ("1", "2")]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-2000:] + runs[1].stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout
