"""Grading beyond one machine: shards of a class, and merging their results.

``grade --shard I/N`` (I from 0 to N-1, as a Kubernetes Indexed Job's
``JOB_COMPLETION_INDEX`` or a Slurm array's ``SLURM_ARRAY_TASK_ID`` count)
grades only the students whose id hashes to I modulo N: a share that does
not depend on who else submitted, so a student stays in the same shard when
the class changes, and running a shard again regrades only what changed.
Each shard writes its own OUT folder; the shards may share one gradebook
(``--db``, see `gradebook`). ``python -m autograder merge OUT SHARD_OUT...``
then writes one grades.csv and exercises.csv, the feedback folders and the
instructor's report into OUT, as one ``grade`` run over the whole class would.
"""

from __future__ import annotations

import csv
import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from course.protocol import STATUS_DIR, verdicts_name

from .chapters import all_chapters
from .feedback import install_mathjax
from .report import write_report
from .results import Row, read_rows, refresh, write_csvs


@dataclass(frozen=True)
class Shard:
    """Share `index` of `count` of a class."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``I/N`` with 0 <= I < N; ValueError otherwise."""
        m = re.fullmatch(r"(\d+)/(\d+)", text.strip())
        if not m or not int(m.group(1)) < int(m.group(2)):
            raise ValueError(f"a shard is I/N with 0 <= I < N, not {text!r}")
        return cls(int(m.group(1)), int(m.group(2)))

    def holds(self, student: str) -> bool:
        """Whether the student is graded in this shard."""
        return int.from_bytes(hashlib.sha256(student.encode()).digest()[:8], "big") % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def _copy_files(src: Path, dest: Path, pattern: str) -> None:
    """Replace `dest` by the files in `src` matching `pattern` (none: no `dest`)."""
    shutil.rmtree(dest, ignore_errors=True)
    for f in sorted(src.glob(pattern)) if src.is_dir() else []:
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest / f.name)


def merge(out: Path, shards: list[Path], db_url: str | None = None) -> list[Row]:
    """Write OUT/grades.csv, OUT/exercises.csv, OUT/feedback/ and OUT/report/ from
    the shards' OUT folders. With `db_url`, the shards' shared gradebook, the
    scores are read from it again (manual grades included, see `results.refresh`).
    Raises SystemExit if a student and chapter is in two shards."""
    order = {ch.id: i for i, ch in enumerate(all_chapters())}
    rows: list[Row] = []
    cells: list[list[str]] = []
    origin: dict[tuple[str, str], Path] = {}
    for shard in shards:
        for row in read_rows(shard / "grades.csv"):
            key = (row.student_id, row.assignment)
            if key in origin:
                raise SystemExit(f"{row.student_id} ({row.assignment}) is in both {origin[key]} and {shard}: "
                                 "merge the shards of one run (the same N)")
            origin[key] = shard
            rows.append(row)
        with open(shard / "exercises.csv", newline="") as f:
            cells += list(csv.reader(f))[1:]
    rows.sort(key=lambda r: (order.get(r.assignment, len(order)), r.assignment, r.student_id))
    cells.sort(key=lambda c: (order.get(c[1], len(order)), c[1], c[0]))  # stable: a notebook's cells keep their order
    out.mkdir(parents=True, exist_ok=True)
    for (student, chapter), shard in origin.items():
        _copy_files(shard / "feedback" / student / chapter, out / "feedback" / student / chapter, "*.html")
        _copy_files(shard / "nbgrader" / "autograded" / student / chapter,  # the report's failure reasons
                    out / "nbgrader" / "autograded" / student / chapter, "*.ipynb")
        verdicts = shard / "nbgrader" / STATUS_DIR / verdicts_name(student, chapter)  # ... as the judge recorded them
        if verdicts.is_file():
            (out / "nbgrader" / STATUS_DIR).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(verdicts, out / "nbgrader" / STATUS_DIR / verdicts.name)
    if origin:
        install_mathjax(out / "feedback")  # the pages load it by a relative path
    write_csvs(out, rows, cells)
    if db_url:
        rows = refresh(out, db_url)
    if rows:
        write_report(out)
    return rows
