"""Digests of what a grade depends on, so that a second run regrades exactly
what changed.

A notebook's grade depends on the notebook itself, the instructor's files
(`folder_digest` of the chapter's solutions/ folder), and `judging_digest`:
the code and settings that run and judge it. When any of them changes,
`course_folder.Course.stage` sends the notebook to be graded again.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .chapters import ROOT, Chapter, oracle_files, sandbox_files
from .limits import Limits

#: the grader's code that runs a notebook and decides its verdict
GRADER_FILES = [Path(__file__).with_name(name) for name in ("judge.py", "execute.py", "sandbox.py")]


def _digest(files: list[Path], base: Path, salt: str = "") -> str:
    h = hashlib.sha256(salt.encode())
    for f in files:
        h.update(f"\0{f.relative_to(base)}\0".encode() + f.read_bytes())
    return h.hexdigest()


def folder_digest(path: Path) -> str:
    """A digest of every file under `path` (names and contents)."""
    return _digest(sorted(f for f in path.rglob("*") if f.is_file() and ".ipynb_checkpoints" not in f.parts), path)


def judging_digest(ch: Chapter, limits: Limits, published: set[str] | frozenset[str] = frozenset()) -> str:
    """A digest of what a chapter's verdicts depend on besides the notebook
    and the instructor's files: every file of the `course` package its
    kernels see (course/protocol.py, the probes, the helpers, earlier
    chapters' reference modules or stand-ins, as `published` makes them;
    `chapters.sandbox_files`), the checks' trusted side
    (`chapters.oracle_files`), the grader's judge, kernel runner and
    sandbox, and the limits."""
    h = hashlib.sha256(_digest(oracle_files() + GRADER_FILES, ROOT, repr(limits)).encode())
    for path, content in sorted(sandbox_files(ch, published).items()):
        h.update(f"\0{path}\0".encode() + content)
    return h.hexdigest()
