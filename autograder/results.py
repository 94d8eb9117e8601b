"""Scores and statuses read back from nbgrader's gradebook, and the CSV files
`grade` writes: ``grades.csv`` (one row per student and chapter) and
``exercises.csv`` (one row per student, chapter and test cell)."""

from __future__ import annotations

import csv
import json
from dataclasses import astuple, dataclass
from pathlib import Path

from course.protocol import CONFIG_FILE, STATUS_DIR

from .course_folder import Course
from .execute import status_path
from .gradebook import gradebook_url, open_gradebook
from .late import describe_lateness, reassess_penalties

GRADES_HEADER = ["student_id", "assignment", "score", "max_score", "status",
                 "late_penalty", "timestamp", "duedate", "seconds_late"]
EXERCISES_HEADER = ["student_id", "assignment", "notebook", "grade_id", "score", "max_score"]


@dataclass
class Row:
    """One row of grades.csv. `score` is what the student gets: the tests'
    points (and any manual grades) less nbgrader's `late_penalty` (which
    nbgrader caps at those points, so they are score + late_penalty).
    `timestamp` (when it was handed in) and `duedate` (with the student's
    extension) are nbgrader's, in UTC; empty when unknown."""

    student_id: str
    assignment: str
    score: float
    max_score: float
    status: str
    late_penalty: float = 0.0
    timestamp: str = ""
    duedate: str = ""
    seconds_late: float = 0.0


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
        notes.append(f"{note['removed_entries']} link(s), special file(s) or over-deep folder(s) left by the kernel "
                     "removed")
    if note.get("leftover"):
        notes.append(f"the kernel's scratch folder was not removed whole ({note['leftover']})")
    return notes


def read_results(course: Course, db_url: str, students: list[str], status: dict[str, str],
                 notes: dict[str, list[str]]) -> tuple[list[Row], list[list]]:
    """Each student's row, and each graded test cell's row, from the gradebook `db_url`.

    `status` holds the rows of students who were not graded (why not);
    `notes`, what intake repaired in the others' notebooks.
    """
    from nbgrader.api import MissingEntry

    ch = course.ch.id
    rows, cells = [], []
    with open_gradebook(db_url) as gb:
        assignment = gb.find_assignment(ch)
        max_score, due = assignment.max_score, assignment.duedate
        for s in students:
            if s in status:
                rows.append(Row(s, ch, 0.0, max_score, status[s], duedate=_when(due)))
                continue
            try:
                sub = gb.find_submission(ch, s)
            except MissingEntry:
                rows.append(Row(s, ch, 0.0, max_score, "not graded: no gradebook entry", duedate=_when(due)))
                continue
            parts = notes.get(s, []) + run_notes(course, s)
            rows.append(graded_row(sub, parts))
            for nb in sub.notebooks:
                for g in sorted(nb.grades, key=lambda g: g.name):
                    cells.append([s, ch, nb.name, g.name, round(g.score, 2), g.max_score])
    return rows, cells


def _when(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else ""


GRADEBOOK_NOTES = ("late by ", "graded by hand", "awaits manual grading")  # remade from the gradebook


def graded_row(sub, notes: list[str]) -> Row:
    """The grades.csv row of nbgrader's SubmittedAssignment `sub`: its score
    with any manual grades and extra credit (formgrader), less the late penalty.
    nbgrader's formgrader shows the score before the penalty (it never applies
    one): a late row's status names both, "late by 1 day 6 h: 9 points less a
    penalty of 1.8"."""
    raw, penalty = round(sub.score, 2), round(sub.late_submission_penalty or 0.0, 2)
    late = sub.total_seconds_late
    grades = [g for nb in sub.notebooks for g in nb.grades]
    if any(g.manual_score is not None or g.extra_credit for g in grades):
        notes = [*notes, "graded by hand"]
    if sub.needs_manual_grade:
        notes = [*notes, "awaits manual grading"]
    if late > 0:  # the points before the penalty are what nbgrader's formgrader shows
        notes = [*notes, f"late by {describe_lateness(late)}" + (f": {raw:g} points less a penalty of {penalty:g}"
                                                                 if penalty else "")]
    return Row(sub.student.id, sub.assignment.name, round(max(0.0, raw - penalty), 2), sub.max_score,
               "graded" + (f" ({'; '.join(notes)})" if notes else ""), penalty, _when(sub.timestamp),
               _when(sub.duedate), round(late))


def _number(text: str) -> float:
    """A number as grades.csv wrote it (an int stays an int, so it is written back the same)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def read_rows(path: Path) -> list[Row]:
    """The rows of a grades.csv file."""
    with open(path, newline="") as f:
        old = list(csv.DictReader(f))
    rows = []
    for r in old:
        row = Row(**{k: r.get(k, "") for k in GRADES_HEADER[:5]})
        for k in ("score", "max_score", "late_penalty", "seconds_late"):
            setattr(row, k, _number(r.get(k) or "0.0"))
        row.timestamp, row.duedate = r.get("timestamp", ""), r.get("duedate", "")
        rows.append(row)
    return rows


def refresh(out: Path, db_url: str | None = None) -> list[Row]:
    """Read the scores of OUT/grades.csv's graded rows (and OUT/exercises.csv)
    again from the gradebook (`db_url`, default: OUT's own SQLite one), so that
    what was graded or adjusted by hand in nbgrader's formgrader since `grade`
    ran is included, late penalties taken from those scores; rewrite both files."""
    from nbgrader.api import MissingEntry
    from traitlets.config.loader import JSONFileConfigLoader

    rows, cells, written = [], [], read_rows(out / "grades.csv")
    config_path = out / "nbgrader" / CONFIG_FILE
    with open_gradebook(gradebook_url(out / "nbgrader", db_url)) as gb:
        if config_path.is_file():  # scores given by hand since `grade` ran change what a penalty takes
            config = JSONFileConfigLoader(CONFIG_FILE, path=str(config_path.parent)).load_config()
            for chapter in sorted({r.assignment for r in written if r.status.startswith("graded")}):
                reassess_penalties(gb, chapter, config, {r.student_id for r in written if r.assignment == chapter})
        for row in written:
            if row.status.startswith("graded"):
                try:
                    sub = gb.find_submission(row.assignment, row.student_id)
                except MissingEntry:
                    pass
                else:
                    inner = row.status[len("graded ("):-1] if row.status.startswith("graded (") else ""
                    notes = [n for n in inner.split("; ") if n and not n.startswith(GRADEBOOK_NOTES)]
                    row = graded_row(sub, notes)
                    for nb in sub.notebooks:
                        for g in sorted(nb.grades, key=lambda g: g.name):
                            cells.append([row.student_id, row.assignment, nb.name, g.name, round(g.score, 2),
                                          g.max_score])
            rows.append(row)
    write_csvs(out, rows, cells)
    return rows


def write_csvs(out: Path, rows: list[Row], cells: list[list]) -> None:
    """Write OUT/grades.csv and OUT/exercises.csv."""
    for name, header, lines in (("grades.csv", GRADES_HEADER, [list(astuple(r)) for r in rows]),
                                ("exercises.csv", EXERCISES_HEADER, cells)):
        with open(out / name, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(lines)
