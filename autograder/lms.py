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

A grade is written only where there is one:

* a chapter is exported once its due date (``schedule.yml``) has passed; one
  not yet due, or without a due date, is left out (no Canvas column, no Moodle
  worksheet), and `export` says so, unless the instructor names it
  (``--chapter CH``);
* a student who handed in nothing (status ``missing: ...`` or ``missing
  notebook: ...``) gets a blank grade, which the LMS reads as no grade, and is
  listed on the terminal; with ``--missing-as-zero`` they get 0 instead, but
  only once the chapter's due date plus that student's extension has passed;
* a notebook the grader could not grade (``invalid notebook: ...``, ``not
  graded: ...``) gets a blank grade and is listed, for the instructor to look at.

Moodle's ``Feedback comments`` (`comment`) tell the student, in at most
`COMMENT_LIMIT` characters, what they can use beside the grade: lateness and
the penalty, that their notebook was renamed or repaired before grading (in
one sentence), that grading stopped early, or why there is no grade.

A roster (``--roster FILE``, a CSV with a ``student_id`` column and any of
``name``, ``email``, ``sis_user_id``, ``sis_login_id``, ``section``) fills
in the columns the grader cannot know; the LMS does not need them to match.
"""

from __future__ import annotations

import csv
import datetime as dt
import re
import sys
from pathlib import Path

from .chapters import all_chapters
from .collect import NAMES, read_names
from .late import describe_policy
from .results import refresh
from .schedule import Schedule, load_schedule

CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_HEADER = ["Identifier", "Full name", "Email address", "Grade", "Maximum Grade", "Feedback comments"]
ROSTER_COLUMNS = ("name", "email", "sis_user_id", "sis_login_id", "section")
MISSING = ("missing: ", "missing notebook: ")  # the statuses of a student who handed in no notebook (grade, intake)
COMMENT_LIMIT = 300  # characters of a Moodle feedback comment


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


def with_names(roster: dict[str, dict[str, str]], names: dict[str, str]) -> dict[str, dict[str, str]]:
    """The roster, each student without a name there given the one the LMS wrote in its download
    (`collect.NAMES`, which `grade` keeps in OUT): an export without --roster still names students."""
    people = {s: dict(who) for s, who in roster.items()}
    for s, name in names.items():
        who = people.setdefault(s, dict.fromkeys(ROSTER_COLUMNS, ""))
        who["name"] = who.get("name") or name
    return people


def comment(row: dict[str, str], policy: str | None = None) -> str:
    """What the student is told beside the grade, in at most COMMENT_LIMIT characters: lateness and
    the penalty (with the late `policy`, `late.describe_policy`, when given), that their notebook
    was renamed or repaired before grading, that grading stopped early, or why there is no grade.
    The grader's own bookkeeping is left out (the feedback page has the details)."""
    status = row["status"]
    if not status.startswith("graded"):
        return fit([no_grade(status)])
    notes = status[len("graded ("):-1].split("; ") if status.startswith("graded (") else []
    return fit([s for s in (lateness(notes, policy), renamed(notes), repaired(notes), *stopped(notes)) if s])


def fit(sentences: list[str]) -> str:
    """The sentences, most important first, as many as fit in COMMENT_LIMIT characters."""
    text = ""
    for sentence in sentences:
        longer = f"{text} {sentence}".strip()
        if len(longer) > COMMENT_LIMIT:
            return text or sentence[:COMMENT_LIMIT - 1] + "\u2026"
        text = longer
    return text


def no_grade(status: str) -> str:
    """Why a student has no grade (or 0, with --missing-as-zero), from the status `grade` gave the row."""
    if status.startswith("missing notebook: expected "):
        name = status[len("missing notebook: expected "):].split(";")[0].split("/")[-1]
        return f"No notebook named {name} was found in what you handed in."
    if status.startswith("missing"):
        return "Nothing was handed in."
    if status.startswith("invalid notebook: larger than"):
        return f"No grade: your notebook is {status[len('invalid notebook: '):]}."
    if status.startswith("invalid notebook"):
        return "No grade: your file could not be read as a Jupyter notebook."
    return "No grade yet: your notebook could not be graded automatically; your instructor will look at it."


def lateness(notes: list[str], policy: str | None = None) -> str | None:
    """'late by 2 h: 5 points less a penalty of 0.5' (results.graded_row), for the student, with the
    late policy that took it."""
    for note in notes:
        if m := re.fullmatch(r"late by (.+?)(?:: (\S+) points less a penalty of (\S+))?", note):
            late, raw, penalty = m.groups()
            rule = f" ({policy})" if policy else ""
            return (f"Handed in {late} late: a late penalty of {penalty} of the {raw} points earned{rule}."
                    if penalty else f"Handed in {late} late.")
    return None


def renamed(notes: list[str]) -> str | None:
    """intake's notes on a notebook handed in under another name, or beside others."""
    for note in notes:
        if m := re.fullmatch(r"notebook renamed: graded .* as (\S+)", note):
            return f"Your notebook was renamed to {m.group(1)} for grading."
    if any(n.startswith("ignored extra notebook(s)") for n in notes):
        return "Other notebooks you handed in were ignored."
    return None


REPAIRS = [  # (intake.repair's note, what it did, in the plural and the singular)
    (re.compile(r"grading metadata of cell .* restored|cell .* turned back into a \w+ cell"),
     "{n} cells' grading metadata restored", "1 cell's grading metadata restored"),
    (re.compile(r"deleted cell .* restored"), "{n} deleted cells put back", "1 deleted cell put back"),
    (re.compile(r"grading metadata removed from a cell with .*"),
     "{n} copied or unknown graded cells made ordinary", "1 copied or unknown graded cell made ordinary"),
    (re.compile(r"hidden-test markers in a student cell disabled"), "hidden-test markers disabled",
     "hidden-test markers disabled"),
]


def repaired(notes: list[str]) -> str | None:
    """One sentence for everything intake repaired: 'Your notebook was repaired before grading:
    3 cells' grading metadata restored, 1 deleted cell put back.'"""
    done = []
    for pattern, many, one in REPAIRS:
        n = sum(1 for note in notes if pattern.fullmatch(note))
        if n:
            done.append(one if n == 1 else many.format(n=n))
    return f"Your notebook was repaired before grading: {', '.join(done)}." if done else None


STOPPED = [  # (the grader's note on a run, what the student is told)
    (re.compile(r"kernel killed at the (\d+) s time limit"),
     "Grading stopped at the notebook's time limit of {0} s; later cells were not run."),
    (re.compile(r"kernel killed: .*"),
     "Grading stopped: a cell did not stop when interrupted; later cells were not run."),
    (re.compile(r"kernel died .*"), "Grading stopped: the notebook's kernel died; later cells were not run."),
    (re.compile(r"the time budget of (\d+) s for the notebook's own cells ran out.*"),
     "The notebook's time budget of {0} s ran out; its last cells were not run."),
    (re.compile(r"(\d+) cell\(s\) stopped at the per-cell time limit"), "{0} cell(s) hit the per-cell time limit."),
]


def stopped(notes: list[str]) -> list[str]:
    """What the student should know of how their notebook's run ended (results.run_notes)."""
    told = []
    for pattern, sentence in STOPPED:
        for note in notes:
            if m := pattern.fullmatch(note):
                told.append(sentence.format(*m.groups()))
                break
    return told


def chapters_to_export(grades: list[dict[str, str]], schedule: Schedule, named: list[str] | None,
                       now: dt.datetime) -> list[str]:
    """The chapters of `grades` to export, in book order: those past their due date, or, when the
    instructor `named` chapters (--chapter), those, due or not. Says which were left out, and why."""
    order = [ch.id for ch in all_chapters()]
    present = sorted({g["assignment"] for g in grades}, key=order.index)
    if named:
        for ch in sorted(set(named) - set(present)):
            print(f"warning: {ch}: no rows in grades.csv; nothing to export", file=sys.stderr)
        return [ch for ch in present if ch in named]
    chosen = []
    for ch in present:
        due = schedule.due.get(ch)
        if due is None:
            print(f"left out {ch}: no due date in schedule.yml (pass --chapter {ch} to export it)", file=sys.stderr)
        elif due > now:
            print(f"left out {ch}: not due until {due:%Y-%m-%d %H:%M} UTC (pass --chapter {ch} to export it now)",
                  file=sys.stderr)
        else:
            chosen.append(ch)
    return chosen


def marks(grades: list[dict[str, str]], schedule: Schedule, missing_as_zero: bool,
          now: dt.datetime) -> dict[tuple[str, str], str]:
    """{(student, chapter): the grade to write}: the score where the student was graded, else
    blank; 0 for a student who handed in no notebook when `missing_as_zero` and the chapter's due
    date plus their extension has passed. Lists the blanks and zeros on the terminal."""
    cells, told = {}, {}
    for g in grades:
        s, ch, status = g["student_id"], g["assignment"], g["status"]
        due = schedule.due.get(ch)
        if due is not None:
            due += schedule.extensions.get((s, ch), dt.timedelta(0))
        if status.startswith("graded"):
            cells[(s, ch)] = number(g["score"])
            continue
        if not status.startswith(MISSING):
            why = "left blank for {n} student(s) whose notebook could not be graded (see grades.csv's status)"
        elif not missing_as_zero:
            why = ("left blank for {n} student(s) who handed in no notebook "
                   "(--missing-as-zero gives them 0 after the due date)")
        elif due is None:
            why = ("left blank for {n} student(s) who handed in no notebook "
                   "(no due date in schedule.yml: no 0 without one)")
        elif due <= now:
            why = "0 for {n} student(s) who handed in no notebook"
        else:
            why = ("left blank for {n} student(s) who handed in no notebook, not yet past the due date "
                   "(with their extension)")
        cells[(s, ch)] = "0" if why.startswith("0") else ""
        told.setdefault((ch, why), []).append(s)
    for (ch, why), students in told.items():
        print(f"{ch}: {why.format(n=len(students))}: {', '.join(sorted(students))}", file=sys.stderr)
    return cells


def canvas_rows(grades: list[dict[str, str]], chapters: list[str], cells: dict[tuple[str, str], str],
                roster: dict[str, dict[str, str]], schedule: Schedule) -> list[list[str]]:
    header = CANVAS_HEADER + [f"{c} ({schedule.canvas_ids[c]})" if c in schedule.canvas_ids else c
                              for c in chapters]
    max_score = {g["assignment"]: g["max_score"] for g in grades}
    lines = [header, ["Points Possible", "", "", "", ""] + [number(max_score[c]) for c in chapters]]
    for s in sorted({g["student_id"] for g in grades}):
        who = roster.get(s, {})
        lines.append([who.get("name") or s, s, who.get("sis_user_id", ""), who.get("sis_login_id", ""),
                      who.get("section", "")] + [cells.get((s, c), "") for c in chapters])
    return lines


def moodle_rows(grades: list[dict[str, str]], chapter: str, cells: dict[tuple[str, str], str],
                roster: dict[str, dict[str, str]], policy: str | None = None) -> list[list[str]]:
    lines = [MOODLE_HEADER]
    for g in sorted((g for g in grades if g["assignment"] == chapter), key=lambda g: g["student_id"]):
        s = g["student_id"]
        if not s.isdigit():
            print(f"warning: {chapter}: {s!r} is not a Moodle participant number; left out", file=sys.stderr)
            continue
        who = roster.get(s, {})
        lines.append([f"Participant {s}", who.get("name", ""), who.get("email", ""), cells[(s, chapter)],
                      number(g["max_score"]), comment(g, policy)])
    return lines


def cell(value: str) -> str:
    """A text cell a spreadsheet will not run as a formula (names and notes can come from students)."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def write_csv(path: Path, lines: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([cell(v) for v in line] for line in lines)


def export(out: Path, lms: str, roster: Path | None = None, chapters: list[str] | None = None,
           missing_as_zero: bool = False, now: dt.datetime | None = None) -> list[Path]:
    """Write OUT/lms/... for `lms` ("canvas" or "moodle"); returns the files written.
    Exports the chapters past their due date, or those named in `chapters`, due or not; a student
    without a submission gets a blank grade, or 0 with `missing_as_zero` once it is due for them
    (`now`: default the current time). Refuses (SystemExit) when no chapter is left to export."""
    now = now or dt.datetime.now(dt.timezone.utc)
    schedule = load_schedule()
    grades = read_grades(out)
    chosen = chapters_to_export(grades, schedule, chapters, now)
    if not chosen:
        raise SystemExit("no chapter to export: none in grades.csv is past its due date in schedule.yml "
                         "(name one with --chapter CH to export it anyway)")
    grades = [g for g in grades if g["assignment"] in chosen]
    waiting = [g for g in grades if "awaits manual grading" in g["status"]]
    if waiting:
        print(f"warning: {len(waiting)} row(s) await manual grading (python -m autograder formgrader {out}); "
              "their scores leave those points out", file=sys.stderr)
    cells = marks(grades, schedule, missing_as_zero, now)
    people = with_names(read_roster(roster), read_names(out / NAMES))
    if lms == "canvas":
        path = out / "lms" / "canvas.csv"
        write_csv(path, canvas_rows(grades, chosen, cells, people, schedule))
        return [path]
    written = []
    for ch in sorted(chosen):
        path = out / "lms" / "moodle" / f"{ch}.csv"
        write_csv(path, moodle_rows(grades, ch, cells, people, describe_policy(schedule.late_penalty)))
        written.append(path)
    return written
