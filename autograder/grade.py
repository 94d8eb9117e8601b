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

Every step is nbgrader's own: ``generate_assignment`` runs as a subprocess
(`nbgrader_commands`), ``autograde`` and ``generate_feedback`` one student at
a time through nbgrader's Python API in a pool of worker processes (`pool`,
``--workers N``, each paying nbgrader's start-up once). ``--shard I/N``
grades a deterministic share of the students (`shards`), and ``--db URL``
names the gradebook (`gradebook`: SQLite in OUT by default, or e.g. a
PostgreSQL database that the shards share); `shards.merge` makes one
grades.csv of the shards' OUT folders. This module
checks and repairs each notebook before nbgrader sees it (`intake`), lays
it out in the course folder (`course_folder`), and collects the results
(`results`). One student's broken or hostile notebook costs only that
student: the row's ``status`` says what happened, e.g. ``graded``,
``graded (notebook renamed: ...)``, ``graded (deleted cell ... restored)``,
``graded (kernel died ...)``, ``graded (output truncated)``,
``missing notebook: ...``, ``invalid notebook: ...``, ``not graded: ...``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import sys
from pathlib import Path

import nbformat

from course.protocol import SECRET_ENV

from . import feedback, sandbox
from .chapters import all_chapters
from .cleanup import remove_tree
from .collect import NAMES, add_names, read_names
from .course_folder import Course
from .fingerprint import folder_digest, judging_digest
from .gradebook import gradebook_url, open_gradebook, release_recorded, setup_lock
from .intake import STUDENT_ID, Intake, intake
from .late import format_timestamp, late_note, read_timestamp, reassess_penalties
from .limits import Limits, chapter_limits
from .nbconfig import nbgrader_config, write_config
from .nbgrader_commands import (
    NOTEBOOK_SECONDS,
    START_SECONDS,
    generate_assignment,
    run_nbgrader,
)
from .pool import Pool, Progress, Task
from .report import write_report
from .results import Row, read_results, write_csvs
from .schedule import Schedule, load_schedule
from .secret import course_secret
from .shards import Shard


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


def prepare_assignment(course: Course, db_url: str) -> str:
    """Put the chapter's instructor notebook in source/ and release it.

    The release is written to the gradebook only when the gradebook does not
    hold it already: another shard sharing the gradebook may have put it
    there, and may be grading (see `gradebook`). Returns a digest of the
    instructor's files: when they change, every submission of the chapter is
    graded again.
    """
    digest = folder_digest(course.ch.solution.parent)
    with setup_lock(db_url, f"transformer-course release {course.ch.id}"):  # shards take turns
        recorded = release_recorded(db_url, course.ch)
        if recorded and course.source_stamp.exists() and course.source_stamp.read_text() == digest:
            return digest
        course.put_source()
        if not recorded:
            generate_assignment(course)
    if recorded:  # this folder's release only
        proc = run_nbgrader(course.root, "generate_assignment", course.ch.id, "--force", "--no-db")
        if proc.returncode:
            raise SystemExit(f"nbgrader generate_assignment {course.ch.id} failed:\n{proc.stderr[-3000:]}")
    course.source_stamp.write_text(digest)
    return digest


def set_due_date(course: Course, db_url: str, schedule: Schedule, students: list[str], config) -> None:
    """Give nbgrader the chapter's due date and each student's extension (``schedule.yml``), and
    take every graded notebook's late penalty again (`late.reassess_penalties`): a notebook that is
    not run again gets the penalty of its lateness and score now (a new extension, a score given by
    hand); nbgrader's AssignLatePenalties does the same for those it autogrades."""
    from nbgrader.api import MissingEntry

    ch = course.ch.id
    due = schedule.due.get(ch)
    with open_gradebook(db_url) as gb, gb.db.no_autoflush:  # nbgrader's add_submission, else an SAWarning
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
    with open_gradebook(db_url) as gb:
        reassess_penalties(gb, ch, config, set(students))


def grade_chapter(course: Course, folders: dict[str, Path | None], pool: Pool, use_sandbox: bool, limits: Limits,
                  secret: Path, schedule: Schedule | None = None, db: str | None = None,
                  now: dt.datetime | None = None) -> tuple[list[Row], list[list]]:
    """Grade every student's notebook for one chapter (None: nothing submitted)
    on the workers of `pool`, into the gradebook `db` (default: SQLite in the
    course folder; see `gradebook`). The sandbox holds the answers of the chapters
    the student edition publishes at `now` (default: the current time), and stand-ins
    of the others (`chapters.sandbox_files`)."""
    ch = course.ch
    schedule = schedule or Schedule()
    db_url = gradebook_url(course.root, db)
    published = schedule.published(now or dt.datetime.now(dt.timezone.utc))
    kernel = course.write_kernelspec(use_sandbox, limits, published)
    config = nbgrader_config(course.root, secret, kernel, limits, schedule.late_penalty, schedule.forbidden_calls)
    config.CourseDirectory.db_url = db_url
    write_config(course.root, config)
    secret_digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    judging = judging_digest(ch, limits, published)
    key = f"{prepare_assignment(course, db_url)}\0{judging}\0{use_sandbox}\0{secret_digest}"
    set_due_date(course, db_url, schedule, sorted(folders), config)
    key += f"\0{schedule.forbidden_calls}"  # lateness is not: it changes the penalty, never what runs
    release = nbformat.read(course.release, as_version=4)
    status: dict[str, str] = {}
    notes: dict[str, list[str]] = {}
    todo = []
    for s, folder in folders.items():
        try:
            got = intake(ch.id, folder, release) if folder else Intake(problem="missing: nothing submitted")
            if got.problem:
                status[s] = got.problem
                course.forget(s)
                continue
            timestamp, problem = read_timestamp(folder)
            staged = course.stage(s, got.notebook, key, timestamp)
        except Exception as err:  # one student's files (an upload, or what their kernel left) stop only them
            status[s] = f"not graded: could not stage the notebook ({type(err).__name__}: {err})"[:300]
            course.forget(s, quietly=True)
            continue
        notes[s] = got.notes + ([problem] if problem else [])
        if staged:
            todo.append(s)
    for stale in (course.root / "submitted").glob(f"*/{ch.id}"):  # nbgrader grades all of submitted/
        if stale.parent.name not in notes:
            course.forget(stale.parent.name, quietly=True)
    tasks = [Task(s, autograde=s in todo) for s in notes]
    outcomes = pool.run(course, tasks, START_SECONDS + limits.wall_seconds + NOTEBOOK_SECONDS,
                        Progress(f"grading {ch.id}", len(tasks)))
    for s, outcome in outcomes.items():
        if outcome.problem:
            status[s] = f"not graded: {outcome.problem}"
            continue
        try:
            published = outcome.feedback and publish_feedback(course, s)
        except Exception as err:  # the page is the student's: a failure here is theirs alone
            notes[s].append(f"no feedback: {type(err).__name__}: {err}"[:200])
            continue
        if not published:
            notes[s].append("no feedback: nbgrader generate_feedback failed")
    unchanged = len([s for s in notes if s not in status and s not in todo])
    print(f"graded {ch.id}: {len(todo)} notebook(s) run, {unchanged} unchanged")
    return read_results(course, db_url, sorted(folders), status, notes)


def publish_feedback(course: Course, student: str) -> bool:
    """Copy the student's feedback HTML to OUT/feedback, rendered for reading offline
    (`feedback.publish`), saying what made it late and what that cost (`late.late_note`);
    False if there is none."""
    html, dest = course.feedback(student) / f"{course.ch.id}.html", course.published_feedback(student)
    remove_tree(dest)
    if not html.is_file():
        return False
    dest.mkdir(parents=True)
    late = late_note(course.root, course.ch.id, student)
    feedback.publish(html, dest / html.name, course.out / "feedback", course.release, late)
    return True


def grade(submissions: Path, out: Path, use_sandbox: bool = True, secret: Path | None = None,
          cell_seconds: int | None = None, wall_seconds: int | None = None,
          schedule: Schedule | None = None, workers: int | None = None, shard: Shard | None = None,
          db: str | None = None) -> list[Row]:
    """Grade every submission under `submissions`; write the results to `out`.

    Student code runs in the sandbox (see `autograder.sandbox`); with
    `use_sandbox=False` it runs unconfined, as plain nbgrader would. Hidden
    cases are seeded from the `secret` file (default: the course's, see
    `autograder.secret`). `cell_seconds` and `wall_seconds`, when given,
    replace every chapter's own time limits (see `autograder.limits`).
    Due dates, extensions and the late penalty come from `schedule` (default:
    the course's ``schedule.yml``, see `autograder.schedule`).
    `workers` students are graded at a time (default: one per CPU core; see
    `autograder.pool`); `shard` grades only its share of the students (see
    `autograder.shards`), into the gradebook `db` (an SQLAlchemy URL; default:
    SQLite in OUT, see `autograder.gradebook`).
    """
    schedule = schedule or load_schedule()
    if use_sandbox:
        problem = sandbox.available()
        if problem:
            raise SystemExit(f"cannot grade safely: {problem}.\n"
                             "Fix that, or pass --unsafe-no-sandbox to run student code without isolation.")
    submissions, out = submissions.resolve(), out.resolve()  # nbgrader runs elsewhere: no relative paths
    source = "--secret" if secret else f"${SECRET_ENV}" if os.environ.get(SECRET_ENV) else "the default place"
    secret = course_secret(None if secret is None else secret.resolve())
    made = dt.datetime.fromtimestamp(secret.stat().st_mtime, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"grading secret: {secret} (from {source}, made {made}); every regrade of this class needs the same one")
    out.mkdir(parents=True, exist_ok=True)
    found, warnings = discover(submissions)
    add_names(out / NAMES, read_names(submissions / NAMES))  # for export: the names collect read
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    students = sorted({s for per in found.values() for s in per})
    if shard is not None:
        print(f"shard {shard}: {len([s for s in students if shard.holds(s)])} of {len(students)} students")
        students = [s for s in students if shard.holds(s)]
    rows: list[Row] = []
    cells: list[list] = []
    if students:
        with Pool(out / "nbgrader", min(workers or os.cpu_count() or 1, len(students))) as pool:
            for ch in all_chapters():
                if ch.id in found:
                    limits = chapter_limits(ch, cell_seconds, wall_seconds)
                    ch_rows, ch_cells = grade_chapter(Course(out, ch), {s: found[ch.id].get(s) for s in students},
                                                      pool, use_sandbox, limits, secret, schedule, db)
                    rows += ch_rows
                    cells += ch_cells
    write_csvs(out, rows, cells)
    if rows:
        write_report(out)
    return rows
