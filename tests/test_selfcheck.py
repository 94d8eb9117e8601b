"""`python -m autograder check NOTEBOOK`, the student's self-check."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from autograder.chapters import all_chapters, get_chapter
from submissions import Mutant, mutated, solved

CHAPTERS = all_chapters()


def self_check(nb: nbformat.NotebookNode, tmp_path, name: str) -> subprocess.CompletedProcess:
    path = tmp_path / name
    nbformat.write(nb, path)
    return subprocess.run([sys.executable, "-m", "autograder", "check", str(path)],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("ch", CHAPTERS, ids=lambda c: c.id)
def test_solved_notebook_passes_every_visible_test(ch, tmp_path):
    proc = self_check(solved(ch), tmp_path, f"{ch.id}.ipynb")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout
    score = proc.stdout.strip().splitlines()[-1]
    got, total = score.removeprefix("Score so far: ").removesuffix(" points").split(" / ")
    assert got == total and float(total) > 0, score


@pytest.mark.slow
@pytest.mark.parametrize("ch", CHAPTERS, ids=lambda c: c.id)
def test_released_stub_fails_as_not_implemented(ch, tmp_path):
    proc = self_check(nbformat.read(ch.student, as_version=4), tmp_path, f"{ch.id}.ipynb")
    assert proc.returncode == 1
    assert "PASS" not in proc.stdout and "not implemented yet" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("Score so far: 0 / ")


@pytest.mark.slow
def test_wrong_answer_fails_with_a_hint(tmp_path):
    ch = get_chapter("00_introduction")
    wrong = Mutant("bias forgotten", "linear-rows", (("return x @ W + b", "return x @ W"),))
    proc = self_check(mutated(ch, wrong), tmp_path, f"{ch.id}.ipynb")
    assert proc.returncode == 1
    line = next(ln for ln in proc.stdout.splitlines() if "test-linear-rows" in ln)
    assert "FAIL" in line and "0/2" in line
    assert "Did you forget to add the bias b?" in line
