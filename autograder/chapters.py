"""Where things live: one nbgrader assignment per chapter.

A chapter id is the name of its folder in solutions/, e.g. ``04_attention``;
it is also the nbgrader assignment id and the notebook's name. Its number
orders the book; the rest, e.g. ``attention``, names its modules
`course.checks.attention` and `course.reference.attention`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from course.cells import CHAPTER_ID

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
CHAPTERS = ROOT / "chapters"
COURSE = ROOT / "course"
REFERENCE = COURSE / "reference"


@dataclass(frozen=True)
class Chapter:
    id: str

    @property
    def number(self) -> int:
        return int(self.id[:2])

    @property
    def topic(self) -> str:
        return self.id[3:]

    @property
    def solution(self) -> Path:
        return SOLUTIONS / self.id / f"{self.id}.ipynb"

    @property
    def student(self) -> Path:
        return CHAPTERS / self.id / f"{self.id}.ipynb"

    @property
    def reference_module(self) -> Path:
        return REFERENCE / f"{self.topic}.py"

    @property
    def visible_answers(self) -> Path:
        """The answers a student's own run judges the visible checks against (`course.probing.practice`)."""
        return COURSE / "visible" / f"{self.topic}.json"


def all_chapters() -> list[Chapter]:
    """Every chapter in solutions/, in book order."""
    return [Chapter(p.name) for p in sorted(SOLUTIONS.iterdir())
            if p.is_dir() and CHAPTER_ID.match(p.name)]


def get_chapter(chapter_id: str) -> Chapter:
    for ch in all_chapters():
        if ch.id == chapter_id:
            return ch
    known = ", ".join(c.id for c in all_chapters())
    raise SystemExit(f"unknown chapter {chapter_id!r} (known: {known})")


def oracle_files() -> list[Path]:
    """The trusted side of the checks: every file of `course.checks` but its
    ``__init__.py`` (the ``check`` a notebook imports). Cases, oracles and
    mistakes live there; no sandboxed kernel sees them."""
    checks = COURSE / "checks"
    return sorted(p for p in checks.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p != checks / "__init__.py")


def course_files(ch: Chapter) -> list[Path]:
    """The files of the `course` package that a chapter's graded notebooks
    see: the protocol, the probes and helpers, earlier chapters' reference
    modules; neither the oracles (`oracle_files`) nor the reference modules
    of this chapter and later ones."""
    hidden = {c.reference_module for c in all_chapters() if c.number >= ch.number} | set(oracle_files())
    return sorted(p for p in COURSE.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p not in hidden)


def repository_url() -> str:
    """The course's one location setting: `repository.url` in _config.yml."""
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
