"""`python -m autograder export OUT --lms canvas|moodle`: grades back to the LMS.

Reads ``OUT/grades.csv`` (what `grade` wrote, with any manual grading
done since in nbgrader's formgrader: see `results.refresh`) and writes the
LMS's own import format into ``OUT/lms/``:

* Canvas, ``canvas.csv``: the Gradebook import format (Grades > Import):
  ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per
  chapter, headed ``<name> (<assignment id>)`` when ``schedule.yml`` gives
  the chapter's ``canvas_id`` (else just the chapter id, and Canvas offers
  to create that assignment); the second row is ``Points Possible``.
  Canvas matches students by ``ID``, its user id, which is the student id
  `collect` takes from a Canvas submissions zip.
* Moodle, ``moodle/<chapter>.csv``, one per chapter: the assignment's
  offline grading worksheet (Assignment > View all submissions > Upload
  grading worksheet; enable the "Offline grading worksheet" feedback type):
  ``Identifier, Full name, Email address, Grade, Maximum Grade, Feedback
  comments``, with ``Identifier`` = ``Participant <id>``, the id `collect`
  takes from a Moodle submissions zip.

A roster (``--roster FILE``, a CSV with a ``student_id`` column and any of
``name``, ``email``, ``sis_user_id``, ``sis_login_id``, ``section``) fills
in the columns the grader cannot know; the LMS does not need them to match.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from .chapters import all_chapters
from .results import refresh
from .schedule import Schedule, load_schedule

CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_HEADER = ["Identifier", "Full name", "Email address", "Grade", "Maximum Grade", "Feedback comments"]
ROSTER_COLUMNS = ("name", "email", "sis_user_id", "sis_login_id", "section")


def number(x: str | float) -> str:
    """A score as the LMS reads it: 7, 7.5 (no trailing zeros, no exponent)."""
    return f"{round(float(x), 2):.2f}".rstrip("0").rstrip(".")


def read_grades(out: Path) -> list[dict[str, str]]:
    """OUT/grades.csv, refreshed from the gradebook first (manual grading) when there is one."""
    path = out / "grades.csv"
    if not path.is_file():
        raise SystemExit(f"no {path}: run `python -m autograder grade` first")
    if (out / "nbgrader" / "gradebook.db").is_file():
        refresh(out)
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_roster(path: Path | None) -> dict[str, dict[str, str]]:
    if path is None:
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and "student_id" not in rows[0]:
        raise SystemExit(f"{path}: needs a student_id column")
    return {r["student_id"]: {k: (r.get(k) or "") for k in ROSTER_COLUMNS} for r in rows}


def comment(row: dict[str, str]) -> str:
    """What the student is told beside the grade: anything unusual in the status
    (lateness, a repaired notebook, a missing one), not the grader's own bookkeeping."""
    status = row["status"]
    if not status.startswith("graded"):
        return status
    notes = status[len("graded ("):-1].split("; ") if status.startswith("graded (") else []
    return "; ".join(n for n in notes if n not in ("graded by hand", "awaits manual grading"))


def canvas_rows(grades: list[dict[str, str]], roster: dict[str, dict[str, str]],
                schedule: Schedule) -> list[list[str]]:
    order = [ch.id for ch in all_chapters()]
    chapters = sorted({g["assignment"] for g in grades}, key=order.index)
    header = CANVAS_HEADER + [f"{c} ({schedule.canvas_ids[c]})" if c in schedule.canvas_ids else c
                              for c in chapters]
    max_score = {g["assignment"]: g["max_score"] for g in grades}
    lines = [header, ["Points Possible", "", "", "", ""] + [number(max_score[c]) for c in chapters]]
    scores: dict[str, dict[str, str]] = {}
    for g in grades:
        scores.setdefault(g["student_id"], {})[g["assignment"]] = number(g["score"])
    for s in sorted(scores):
        who = roster.get(s, {})
        lines.append([who.get("name") or s, s, who.get("sis_user_id", ""), who.get("sis_login_id", ""),
                      who.get("section", "")] + [scores[s].get(c, "") for c in chapters])
    return lines


def moodle_rows(grades: list[dict[str, str]], chapter: str,
                roster: dict[str, dict[str, str]]) -> list[list[str]]:
    lines = [MOODLE_HEADER]
    for g in sorted((g for g in grades if g["assignment"] == chapter), key=lambda g: g["student_id"]):
        s = g["student_id"]
        if not s.isdigit():
            print(f"warning: {chapter}: {s!r} is not a Moodle participant number; left out", file=sys.stderr)
            continue
        who = roster.get(s, {})
        lines.append([f"Participant {s}", who.get("name", ""), who.get("email", ""), number(g["score"]),
                      number(g["max_score"]), comment(g)])
    return lines


def cell(value: str) -> str:
    """A text cell a spreadsheet will not run as a formula (names and notes can come from students)."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def write_csv(path: Path, lines: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([cell(v) for v in line] for line in lines)


def export(out: Path, lms: str, roster: Path | None = None, chapters: list[str] | None = None) -> list[Path]:
    """Write OUT/lms/... for `lms` ("canvas" or "moodle"); returns the files written."""
    grades = read_grades(out)
    if chapters:
        grades = [g for g in grades if g["assignment"] in chapters]
    waiting = [g for g in grades if "awaits manual grading" in g["status"]]
    if waiting:
        print(f"warning: {len(waiting)} row(s) await manual grading (python -m autograder formgrader {out}); "
              "their scores leave those points out", file=sys.stderr)
    people = read_roster(roster)
    if lms == "canvas":
        path = out / "lms" / "canvas.csv"
        write_csv(path, canvas_rows(grades, people, load_schedule()))
        return [path]
    written = []
    for ch in sorted({g["assignment"] for g in grades}):
        path = out / "lms" / "moodle" / f"{ch}.csv"
        write_csv(path, moodle_rows(grades, ch, people))
        written.append(path)
    return written
