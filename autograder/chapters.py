"""Where things live: one nbgrader assignment per chapter.

A chapter id is the name of its folder in solutions/, e.g. ``04_attention``;
it is also the nbgrader assignment id and the notebook's name. Its number
orders the book; the rest, e.g. ``attention``, names its modules
`course.checks.attention` and `course.reference.attention`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import yaml

from course import standins
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


def sandbox_files(ch: Chapter, published: Collection[str] = ()) -> dict[Path, bytes]:
    """The `course` package a chapter's graded notebooks see, as {path relative to the repository:
    content}: the protocol, the probes, the helpers and the stand-ins (`course.standins`); the
    reference module of each earlier chapter whose answers are `published` (chapter ids: due, plus
    the longest extension, as the student edition publishes them), and for an earlier chapter whose
    answers are not, its stand-in's shim (`course.standins.shim`), where it has one. Never the
    oracles (`oracle_files`), nor the answers of this chapter or a later one."""
    references = {c.reference_module: c for c in all_chapters()}
    hidden = set(references) | set(oracle_files())
    files = {p.relative_to(ROOT): p.read_bytes() for p in sorted(COURSE.rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts and p not in hidden}
    for module, other in references.items():
        if other.number >= ch.number or not module.is_file():
            continue
        if other.id in published:
            files[module.relative_to(ROOT)] = module.read_bytes()
        elif other.topic in standins.topics():
            files[module.relative_to(ROOT)] = standins.shim(other.topic).encode()
    return files


def repository_url() -> str:
    """The course's one location setting: `repository.url` in _config.yml."""
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
