"""The instructor's own copy of the repository: README's paths for student work are never committed."""

import subprocess

import pytest

from autograder.chapters import ROOT

# The paths README's "One term, step by step" puts students' work and names in.
STUDENT_DATA = ["submitted/1001/04_attention/04_attention.ipynb", "grading/grades.csv",
                "grading/feedback/1001/04_attention/04_attention.html", "submissions.zip", "roster.csv"]


def test_student_data_is_git_ignored():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    proc = subprocess.run(["git", "check-ignore", "--no-index", *STUDENT_DATA], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.stdout.split() == STUDENT_DATA, proc.stderr
