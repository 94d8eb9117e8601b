"""The nbgrader course folder (``OUT/nbgrader``) and what the grader keeps there.

nbgrader's own layout (``source/``, ``release/``, ``submitted/``,
``autograded/``, ``feedback/``, ``gradebook.db``), plus the grader's: the
kernelspec and the `course` package copy each chapter's sandbox sees, and
stamps that let a second run skip what it already graded. File names shared
with other processes are in `course.protocol`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from course.protocol import (JUPYTER_DIR, LIB_DIR, STATUS_DIR, kernel_name, source_stamp_name, stamp_name,
                             verdicts_name)

from .chapters import ROOT, Chapter, sandbox_files
from .cleanup import CleanupError, remove_tree
from .limits import Limits


def is_finished(notebook: Path) -> bool:
    """Whether nbgrader finished this autograded notebook: the judge gave
    every test cell an output (the copy nbgrader starts from has none, and
    nbgrader writes the graded notebook after the gradebook)."""
    try:
        nb = nbformat.read(notebook, as_version=4)
    except Exception:
        return False
    tests = [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]
    return bool(tests) and all(c.outputs for c in tests)


class Course:
    """One chapter's files in a grading run's OUT folder: in nbgrader's
    course folder (`root`, OUT/nbgrader), and the feedback given out."""

    def __init__(self, out: Path, ch: Chapter) -> None:
        self.out, self.root, self.ch = out, out / "nbgrader", ch

    @property
    def source(self) -> Path:
        return self.root / "source" / self.ch.id

    @property
    def source_stamp(self) -> Path:
        """Holds the digest of the instructor files last put in `source`."""
        return self.root / "source" / source_stamp_name(self.ch.id)

    @property
    def release(self) -> Path:
        """The released (student) notebook nbgrader generated."""
        return self.root / "release" / self.ch.id / f"{self.ch.id}.ipynb"

    def submitted(self, student: str) -> Path:
        return self.root / "submitted" / student / self.ch.id

    def autograded(self, student: str) -> Path:
        return self.root / "autograded" / student / self.ch.id

    def feedback(self, student: str) -> Path:
        """Where nbgrader writes the student's feedback."""
        return self.root / "feedback" / student / self.ch.id

    def published_feedback(self, student: str) -> Path:
        """Where the grader copies it: OUT/feedback/<student>/<chapter>/."""
        return self.out / "feedback" / student / self.ch.id

    def stamp(self, student: str) -> Path:
        return self.root / STATUS_DIR / stamp_name(student, self.ch.id)

    def verdicts(self, student: str) -> Path:
        """The judge's structured verdicts on the student's notebook (`judge.JudgeChecks`)."""
        return self.root / STATUS_DIR / verdicts_name(student, self.ch.id)

    def is_graded(self, student: str) -> bool:
        return is_finished(self.autograded(student) / f"{self.ch.id}.ipynb")

    def put_source(self) -> None:
        """Copy the chapter's instructor files into source/, for generate_assignment."""
        shutil.rmtree(self.source, ignore_errors=True)
        shutil.copytree(self.ch.solution.parent, self.source, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))

    def forget(self, student: str, quietly: bool = False) -> None:
        """Drop whatever an earlier run kept of this student's chapter (`quietly`: what cannot be
        removed is logged and left, for the next run to try again)."""
        for folder in (self.submitted(student), self.autograded(student), self.feedback(student),
                       self.published_feedback(student)):
            try:
                remove_tree(folder)
            except CleanupError as err:
                if not quietly:
                    raise
                print(f"warning: {student}: {err}", file=sys.stderr)
        self.stamp(student).unlink(missing_ok=True)
        self.verdicts(student).unlink(missing_ok=True)

    def stage(self, student: str, nb: NotebookNode, key: str, timestamp: str | None = None) -> bool:
        """Put the repaired notebook (and the time it was handed in, nbgrader's
        timestamp.txt) in submitted/; True if it needs grading.

        A notebook needs grading unless an earlier run finished grading these
        same inputs (the notebook, its timestamp, and `key`: everything else
        its grade depends on). The order of the steps makes a run stopped at
        any point safe to run again.
        """
        text = nbformat.writes(nb)
        key = hashlib.sha256(f"{key}\0{timestamp}\0{text}".encode()).hexdigest()
        stamp = self.stamp(student)
        if stamp.exists() and stamp.read_text() == key and self.is_graded(student):
            return False
        remove_tree(self.autograded(student))  # the kernel's leftovers too, whatever their shape
        remove_tree(self.submitted(student))
        self.submitted(student).mkdir(parents=True)
        (self.submitted(student) / f"{self.ch.id}.ipynb").write_text(text)
        if timestamp:
            (self.submitted(student) / "timestamp.txt").write_text(timestamp + "\n")
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(key)
        return True

    def write_lib(self, published: set[str]) -> Path:
        """The `course` package as the chapter's notebooks see it when the chapters `published`
        have their answers out (`chapters.sandbox_files`); returns the folder to put on their path."""
        lib = self.root / LIB_DIR / self.ch.id
        remove_tree(lib)
        for path, content in sandbox_files(self.ch, published).items():
            dest = lib / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(content)
        return lib

    def write_kernelspec(self, use_sandbox: bool, limits: Limits, published: set[str]) -> str:
        """The kernel nbgrader runs this chapter's notebooks in (with the answers of the chapters
        `published`, stand-ins for the others; see `write_lib`); returns its name."""
        lib = self.write_lib(published)
        name = kernel_name(self.ch.id)
        if use_sandbox:
            # -P: the launcher starts in the notebook's folder, and runs nothing from there
            argv = [sys.executable, "-P", "-m", "autograder.sandbox", "--lib", str(lib),
                    "--wall", str(limits.wall_seconds), "--memory", str(limits.memory_bytes), "{connection_file}"]
            env = {"PYTHONPATH": str(ROOT)}  # for the launcher itself, outside the sandbox
        else:
            argv = [sys.executable, "-P", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            env = {"PYTHONPATH": str(lib)}
        spec = {"argv": argv, "env": env, "display_name": f"grading {self.ch.id}", "language": "python",
                "interrupt_mode": "message"}
        folder = self.root / JUPYTER_DIR / "kernels" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "kernel.json").write_text(json.dumps(spec, indent=1))
        return name
