"""`python -m autograder grade SUBMISSIONS --out OUT`: grade a whole class.

SUBMISSIONS holds nbgrader's submitted/ layout,
``SUBMISSIONS/<student_id>/<chapter_id>/<chapter_id>.ipynb``. OUT becomes:

- ``grades.csv``: one row per student and chapter (student_id, assignment,
  score, max_score, status, then the late-work columns: late_penalty,
  timestamp, duedate, seconds_late; see `autograder.late`);
- ``exercises.csv``: one row per student, chapter and test cell;
- ``feedback/<student_id>/<chapter_id>/<notebook>.html``, without hidden tests;
- ``report/``: the instructor's report (`report`): per exercise the mean, the
  share of full marks and the most common reason for lost points, with a
  score histogram and a pass-rate chart per chapter (``report/index.html``);
- ``nbgrader/``: the nbgrader course folder (gradebook.db, autograded/, ...)
  that nbgrader's own commands run in, kept so that a second run only grades
  what changed (a notebook, the instructor's files, the course package, the
  judge, the limits, the secret; see `fingerprint`). Running grade twice
  changes nothing; stopping it half-way (even with SIGKILL) and running it
  again finishes the batch.

Hidden test cases are seeded from the course's grading secret (`secret`,
``--secret FILE``), not from anything in OUT: grading the same class into
another OUT gives the same grades. Each chapter runs under its own limits
(`limits`: its solution notebook's ``metadata.course.grading``, or the
defaults; ``--cell-timeout``/``--wall-timeout`` override them).

Every step is one of nbgrader's commands (generate_assignment, autograde,
generate_feedback) run as a subprocess (`nbgrader_commands`); this module
checks and repairs each notebook before nbgrader sees it (`intake`), lays
it out in the course folder (`course_folder`), and collects the results
(`results`). One student's broken or hostile notebook costs only that
student: the row's ``status`` says what happened, e.g. ``graded``,
``graded (notebook renamed: ...)``, ``graded (deleted cell ... restored)``,
``graded (kernel died ...)``, ``graded (output truncated)``,
``missing notebook: ...``, ``invalid notebook: ...``, ``not graded: ...``.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import nbformat

from . import sandbox
from .chapters import all_chapters
from .course_folder import Course
from .fingerprint import folder_digest, judging_digest
from .intake import STUDENT_ID, Intake, intake
from .late import format_timestamp, read_timestamp
from .limits import Limits, chapter_limits
from .nbconfig import nbgrader_config, write_config
from .nbgrader_commands import autograde, generate_assignment, generate_feedback
from .report import write_report
from .results import Row, read_results, write_csvs
from .schedule import Schedule, load_schedule
from .secret import course_secret


def discover(submissions: Path) -> tuple[dict[str, dict[str, Path]], list[str]]:
    """{chapter_id: {student_id: folder}} and warnings about what was skipped."""
    known = {ch.id for ch in all_chapters()}
    found: dict[str, dict[str, Path]] = {}
    warnings = []
    for sdir in sorted(submissions.iterdir()):
        if not sdir.is_dir() or sdir.is_symlink():
            continue
        if not STUDENT_ID.match(sdir.name):
            warnings.append(f"skipped folder {sdir.name!r}: not a valid student id")
            continue
        for cdir in sorted(sdir.iterdir()):
            if cdir.is_dir() and not cdir.is_symlink() and cdir.name in known:
                found.setdefault(cdir.name, {})[sdir.name] = cdir
            elif cdir.is_dir():
                warnings.append(f"skipped {sdir.name}/{cdir.name}: not a chapter of this course")
    return found, warnings


def prepare_assignment(course: Course) -> str:
    """Put the chapter's instructor notebook in source/ and release it.

    Returns a digest of the instructor's files: when they change, every
    submission of the chapter is graded again.
    """
    digest = folder_digest(course.ch.solution.parent)
    if course.source_stamp.exists() and course.source_stamp.read_text() == digest:
        return digest
    course.put_source()
    generate_assignment(course)
    course.source_stamp.write_text(digest)
    return digest


def set_due_date(course: Course, schedule: Schedule, students: list[str]) -> None:
    """Give nbgrader the chapter's due date and each student's extension
    (``schedule.yml``); nbgrader's AssignLatePenalties does the rest."""
    from nbgrader.api import Gradebook, MissingEntry

    ch = course.ch.id
    due = schedule.due.get(ch)
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment(ch, duedate=due and format_timestamp(due))
        for s in students:
            extension = schedule.extensions.get((s, ch))
            try:
                if gb.find_submission(ch, s).extension == extension:
                    continue
            except MissingEntry:
                if extension is None:
                    continue
            gb.update_or_create_student(s)
            gb.update_or_create_submission(ch, s, extension=extension)


def grade_chapter(course: Course, folders: dict[str, Path | None], use_sandbox: bool, limits: Limits,
                  secret: Path, schedule: Schedule | None = None) -> tuple[list[Row], list[list]]:
    """Grade every student's notebook for one chapter (None: nothing submitted)."""
    ch = course.ch
    schedule = schedule or Schedule()
    kernel = course.write_kernelspec(use_sandbox, limits)
    write_config(course.root, nbgrader_config(course.root, secret, kernel, limits, schedule.late_penalty))
    secret_digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    key = f"{prepare_assignment(course)}\0{judging_digest(ch, limits)}\0{use_sandbox}\0{secret_digest}"
    set_due_date(course, schedule, sorted(folders))
    key += f"\0{schedule.due.get(ch.id)}\0{schedule.late_penalty}"
    release = nbformat.read(course.release, as_version=4)
    status: dict[str, str] = {}
    notes: dict[str, list[str]] = {}
    todo = []
    for s, folder in folders.items():
        got = intake(ch.id, folder, release) if folder else Intake(problem="missing: nothing submitted")
        if got.problem:
            status[s] = got.problem
            course.forget(s)
            continue
        notes[s] = got.notes
        timestamp, problem = read_timestamp(folder)
        if problem:
            notes[s].append(problem)
        if course.stage(s, got.notebook, f"{key}\0{schedule.extensions.get((s, ch.id))}", timestamp):
            todo.append(s)
    for stale in (course.root / "submitted").glob(f"*/{ch.id}"):  # nbgrader grades all of submitted/
        if stale.parent.name not in notes:
            course.forget(stale.parent.name)
    status.update(autograde(course, todo, limits))
    graded = [s for s in notes if s not in status]
    for s in generate_feedback(course, graded):
        notes[s].append("no feedback: nbgrader generate_feedback failed")
    unchanged = len([s for s in graded if s not in todo])
    print(f"graded {ch.id}: {len(todo)} notebook(s) run, {unchanged} unchanged")
    return read_results(course, sorted(folders), status, notes)


def grade(submissions: Path, out: Path, use_sandbox: bool = True, secret: Path | None = None,
          cell_seconds: int | None = None, wall_seconds: int | None = None,
          schedule: Schedule | None = None) -> list[Row]:
    """Grade every submission under `submissions`; write the results to `out`.

    Student code runs in the sandbox (see `autograder.sandbox`); with
    `use_sandbox=False` it runs unconfined, as plain nbgrader would. Hidden
    cases are seeded from the `secret` file (default: the course's, see
    `autograder.secret`). `cell_seconds` and `wall_seconds`, when given,
    replace every chapter's own time limits (see `autograder.limits`).
    Due dates, extensions and the late penalty come from `schedule` (default:
    the course's ``schedule.yml``, see `autograder.schedule`).
    """
    schedule = schedule or load_schedule()
    if use_sandbox:
        problem = sandbox.available()
        if problem:
            raise SystemExit(f"cannot grade safely: {problem}.\n"
                             "Fix that, or pass --unsafe-no-sandbox to run student code without isolation.")
    submissions, out = submissions.resolve(), out.resolve()  # nbgrader runs elsewhere: no relative paths
    secret = course_secret(None if secret is None else secret.resolve())
    out.mkdir(parents=True, exist_ok=True)
    found, warnings = discover(submissions)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    students = sorted({s for per in found.values() for s in per})
    rows: list[Row] = []
    cells: list[list] = []
    for ch in all_chapters():
        if ch.id in found:
            limits = chapter_limits(ch, cell_seconds, wall_seconds)
            ch_rows, ch_cells = grade_chapter(Course(out, ch), {s: found[ch.id].get(s) for s in students},
                                              use_sandbox, limits, secret, schedule)
            rows += ch_rows
            cells += ch_cells
    write_csvs(out, rows, cells)
    if rows:
        write_report(out)
    return rows
