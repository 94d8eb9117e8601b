"""Scores and statuses read back from nbgrader's gradebook, and the CSV files
`grade` writes: ``grades.csv`` (one row per student and chapter) and
``exercises.csv`` (one row per student, chapter and test cell)."""

from __future__ import annotations

import csv
import json
from dataclasses import astuple, dataclass
from pathlib import Path

from course.protocol import STATUS_DIR

from .course_folder import Course
from .execute import status_path

GRADES_HEADER = ["student_id", "assignment", "score", "max_score", "status"]
EXERCISES_HEADER = ["student_id", "assignment", "notebook", "grade_id", "score", "max_score"]


@dataclass
class Row:
    """One row of grades.csv."""

    student_id: str
    assignment: str
    score: float
    max_score: float
    status: str


def run_notes(course: Course, student: str) -> list[str]:
    """What `GuardedExecute` noted while the student's notebook ran."""
    path = status_path(course.root / STATUS_DIR, student, course.ch.id)
    note = json.loads(path.read_text()) if path.exists() else {}
    notes = [note["problem"]] if note.get("problem") else []
    if note.get("timed_out_cells") and not notes:  # a killed kernel's cells time out too
        notes.append(f"{len(note['timed_out_cells'])} cell(s) stopped at the per-cell time limit")
    if note.get("dropped_messages"):
        notes.append(f"{note['dropped_messages']} kernel message(s) with an invalid signature dropped")
    if note.get("output_truncated"):
        notes.append("output truncated")
    if note.get("removed_entries"):
        notes.append(f"{note['removed_entries']} link(s) or special file(s) left by the kernel removed")
    return notes


def read_results(course: Course, students: list[str], status: dict[str, str],
                 notes: dict[str, list[str]]) -> tuple[list[Row], list[list]]:
    """Each student's row, and each graded test cell's row, from the gradebook.

    `status` holds the rows of students who were not graded (why not);
    `notes`, what intake repaired in the others' notebooks.
    """
    from nbgrader.api import Gradebook, MissingEntry

    ch = course.ch.id
    rows, cells = [], []
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        max_score = gb.find_assignment(ch).max_score
        for s in students:
            if s in status:
                rows.append(Row(s, ch, 0.0, max_score, status[s]))
                continue
            try:
                sub = gb.find_submission(ch, s)
            except MissingEntry:
                rows.append(Row(s, ch, 0.0, max_score, "not graded: no gradebook entry"))
                continue
            parts = notes.get(s, []) + run_notes(course, s)
            rows.append(Row(s, ch, round(sub.score, 2), sub.max_score,
                            "graded" + (f" ({'; '.join(parts)})" if parts else "")))
            for nb in sub.notebooks:
                for g in sorted(nb.grades, key=lambda g: g.name):
                    cells.append([s, ch, nb.name, g.name, round(g.score, 2), g.max_score])
    return rows, cells


def write_csvs(out: Path, rows: list[Row], cells: list[list]) -> None:
    """Write OUT/grades.csv and OUT/exercises.csv."""
    for name, header, lines in (("grades.csv", GRADES_HEADER, [list(astuple(r)) for r in rows]),
                                ("exercises.csv", EXERCISES_HEADER, cells)):
        with open(out / name, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(lines)
