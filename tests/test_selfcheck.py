"""`python -m autograder check NOTEBOOK`, the student's self-check: its
per-exercise scores equal the grader's verdicts on the visible checks."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import nbformat
import pytest

from autograder.chapters import get_chapter
from course.protocol import STATUS_DIR, cell_score, counted, verdicts_name
from mutants import mutants_for
from submissions import Mutant, lean, mutated, solved
from test_grading import GRADED, SOLUTION, STUB, grade_cells, graded, slug

_SCORE = re.compile(r"^  (PASS|FAIL|WAIT)  (\S+) +([\d.]+)/([\d.]+)$", re.M)


def self_check(nb: nbformat.NotebookNode, folder, name: str) -> subprocess.CompletedProcess:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    nbformat.write(nb, path)
    return subprocess.run([sys.executable, "-m", "autograder", "check", str(path)],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("ch", GRADED)
def test_self_check_scores_equal_the_graders_visible_verdicts(ch, tmp_path, tmp_path_factory):
    result = graded(ch, tmp_path_factory)
    points = {gid: p for gid, (p, by_hand) in grade_cells(ch).items() if not by_hand}
    written = {gid: p for gid, (p, by_hand) in grade_cells(ch).items() if by_hand}
    first = mutants_for(ch.topic)[0]
    # without the demonstrations (`lean`), as the mutant is: the grader ran the whole solution
    notebooks = {SOLUTION: lean(solved(ch)), STUB: lean(nbformat.read(ch.student, 4)),
                 slug(first.name): mutated(ch, first)}
    for student, nb in notebooks.items():
        proc = self_check(nb, tmp_path / student, f"{ch.id}.ipynb")
        shown = {gid: float(score) for _, gid, score, _ in _SCORE.findall(proc.stdout)}
        records = json.loads((result.out / "nbgrader" / STATUS_DIR / verdicts_name(student, ch.id)).read_text())
        judged = {}
        for gid, cell in records["cells"].items():
            # a student's own run cannot replay a later exercise on its earlier pieces (no answers to do it with)
            visible = [(r["passed"] and not r["replayed"], r["guard"]) for r in cell["checks"] if not r["hidden"]]
            judged[gid] = cell_score(points[gid], sum(counted(visible)), len(visible))
        assert shown == judged, f"{student}:\n{proc.stdout}{proc.stderr}"
        total = sum(points.values())
        last = proc.stdout.strip().splitlines()[-1]
        by_hand = f"; written answers ({sum(written.values()):g} more) are graded by hand" if written else ""
        if student == SOLUTION:
            assert proc.returncode == 0 and last == f"Score so far: {total:g} / {total:g} points{by_hand}", proc.stdout
            assert all(re.search(rf"^  HAND  {gid} +\?/{p:g}  answered", proc.stdout, re.M)
                       for gid, p in written.items())
        elif student == STUB:
            assert proc.returncode == 1 and "PASS" not in proc.stdout, proc.stdout
            assert "not implemented yet" in proc.stdout and last == f"Score so far: 0 / {total:g} points{by_hand}"
            assert all(re.search(rf"^  TODO  {gid} +\?/{p:g}  a written answer, not answered yet", proc.stdout, re.M)
                       for gid, p in written.items())


@pytest.mark.slow
def test_wrong_answer_shows_every_failed_case_with_its_hint(tmp_path):
    ch = get_chapter("00_introduction")
    wrong = Mutant("bias forgotten", "linear-rows", (("return x @ W + b", "return x @ W"),))
    proc = self_check(mutated(ch, wrong), tmp_path, f"{ch.id}.ipynb")
    assert proc.returncode == 1
    assert re.search(r"^  FAIL  test-linear-rows +0/2$", proc.stdout, re.M), proc.stdout
    after = proc.stdout.split("test-linear-rows", 1)[1]
    assert after.count("Did you forget to add the bias b?") == 2, proc.stdout  # both visible cases


@pytest.mark.slow
def test_an_exercise_that_fails_on_an_earlier_failing_piece_waits(tmp_path):
    """Chapter 4's softmax normalised over the whole tensor: the softmax exercise FAILs with its
    hint; SDPA, which runs the student's softmax, WAITs (the grader judges it on what it adds) and
    says to fix the softmax first; SDPA's own mistake below a passing softmax is a FAIL."""
    ch = get_chapter("04_attention")
    by_name = {m.name: m for m in mutants_for(ch.topic)}
    wrong = by_name["softmax normalised over the whole tensor"]
    proc = self_check(mutated(ch, wrong), tmp_path / "a", f"{ch.id}.ipynb")
    status = {gid: s for s, gid, _, _ in _SCORE.findall(proc.stdout)}
    assert status["test-softmax"] == "FAIL" and status["test-sdpa"] == "WAIT", proc.stdout
    assert "an exercise above fails: fix that one first" in proc.stdout.split("test-sdpa", 1)[1]
    assert re.search(r"of the points missing wait on an exercise above \(WAIT\)$", proc.stdout.strip()), proc.stdout
    proc = self_check(mutated(ch, by_name["mask added after the softmax"]), tmp_path / "b", f"{ch.id}.ipynb")
    status = {gid: s for s, gid, _, _ in _SCORE.findall(proc.stdout)}
    assert status["test-softmax"] == "PASS" and status["test-sdpa"] == "FAIL", proc.stdout
    assert "WAIT" not in proc.stdout


@pytest.mark.slow
def test_cells_outside_the_tests_that_raise_are_listed(tmp_path):
    """A demonstration that fails (an import the student's copy lacks) is named before the score; an
    unfinished exercise's NotImplementedError is not."""
    ch = get_chapter("00_introduction")
    nb = lean(solved(ch))
    nb.cells.insert(2, nbformat.v4.new_code_cell("import course.no_such_module  # a demonstration imports it"))
    nb.cells.insert(3, nbformat.v4.new_code_cell("raise NotImplementedError()"))
    proc = self_check(nb, tmp_path, f"{ch.id}.ipynb")
    listed = proc.stdout.split("Cells outside the tests that raised", 1)[1].split("Score so far")[0]
    assert "'import course.no_such_module  # a demonstration imports it': ModuleNotFoundError" in listed, proc.stdout
    assert "NotImplementedError" not in listed and proc.returncode == 0, proc.stdout


def test_self_check_of_a_folder_asks_for_the_notebook(tmp_path):
    (tmp_path / "04_attention.ipynb").write_text("{}")
    proc = subprocess.run([sys.executable, "-m", "autograder", "check", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode != 0, proc.stderr
    assert f"{tmp_path} is a folder: give the notebook's path, e.g. " in proc.stderr, proc.stderr
