"""`python -m autograder release`: solutions/ -> chapters/, course/reference/ and course/visible/.

The student notebook is made by nbgrader's own ``generate_assignment`` (it
strips solutions and hidden tests, locks test cells and adds checksums); the
reference module is the solution notebook's cells tagged ``export``, with the
solution markers removed; the visible answers are the checks' visible cases
with the oracle's answers and the known mistakes' outputs on them
(`course.checks.framework.visible_data`), which a student's own run judges
against, so that the package a student installs needs no oracle.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from course.cells import exported_code
from course.checks.framework import visible_data

from .chapters import Chapter, all_chapters, repository_url
from .lint import lint_solution

INSTALL_URL = re.compile(r"git\+https?://[^\"\s]+")


def sync_setup_cell(ch: Chapter) -> None:
    """Point the notebook's Colab install line at `repository_url()`.

    The first code cell installs the course package from the repository when
    it is missing (as on Colab); it must follow the launch buttons' setting.
    """
    nb = nbformat.read(ch.solution, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code")
    new = INSTALL_URL.sub(f"git+{repository_url()}", cell.source)
    if new != cell.source:
        cell.source = new
        nbformat.write(nb, ch.solution)


def reference_source(ch: Chapter) -> str:
    """The generated `course.reference.<topic>` module for a chapter."""
    header = (f'"""Reference solutions of chapter {ch.id}.\n\n'
              f"Generated from solutions/{ch.id}/{ch.id}.ipynb (cells tagged 'export') by\n"
              '`python -m autograder release`. Do not edit: edit the solution notebook.\n"""\n')
    return header + exported_code(nbformat.read(ch.solution, as_version=4))


def generate_student_version(ch: Chapter, dest: Path) -> None:
    """Run nbgrader generate_assignment for one chapter into dest/."""
    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        (course / "nbgrader_config.py").write_text("c = get_config()  # noqa: F821\n")
        shutil.copytree(ch.solution.parent, course / "source" / ch.id,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        subprocess.run(
            [sys.executable, "-m", "nbgrader", "generate_assignment", ch.id, "--no-db", "--force",
             f"--CourseDirectory.root={course}", "--log-level=WARN"],
            check=True, cwd=course)
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(course / "release" / ch.id, dest)


def _one_line_per_check(data: dict) -> str:
    """The visible answers as compact JSON, one check per line (a change shows as the lines of its checks)."""
    lines = [f"{json.dumps(name)}:{json.dumps(check, separators=(',', ':'))}" for name, check in data["checks"].items()]
    return '{"checks":{\n' + ",\n".join(lines) + "\n}}\n"


def release(chapters: list[Chapter] | None = None, out: Path | None = None) -> None:
    """Regenerate the student notebooks, reference modules and visible answers.

    With `out`, write into out/chapters, out/reference and out/visible
    instead (used by the test that proves the committed files are up to date).
    """
    for ch in chapters or all_chapters():
        if out is None:
            sync_setup_cell(ch)
        problems = lint_solution(ch)
        if problems:
            raise SystemExit(f"{ch.solution}:\n  " + "\n  ".join(problems))
        student_dir = (out / "chapters" / ch.id) if out else ch.student.parent
        ref_file = (out / "reference" / f"{ch.topic}.py") if out else ch.reference_module
        generate_student_version(ch, student_dir)
        ref_file.parent.mkdir(parents=True, exist_ok=True)
        ref_file.write_text(reference_source(ch))
        answers = (out / "visible" / f"{ch.topic}.json") if out else ch.visible_answers
        answers.parent.mkdir(parents=True, exist_ok=True)
        answers.write_text(_one_line_per_check(visible_data(ch.topic)))
        print(f"released {ch.id}")
