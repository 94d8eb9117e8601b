"""`python -m autograder grade SUBMISSIONS --out OUT`: grade a whole class.

SUBMISSIONS holds nbgrader's submitted/ layout,
``SUBMISSIONS/<student_id>/<chapter_id>/<chapter_id>.ipynb``. OUT becomes:

- ``grades.csv``: one row per student and chapter (student_id, assignment,
  score, max_score, status);
- ``exercises.csv``: one row per student, chapter and test cell;
- ``feedback/<student_id>/<chapter_id>/<notebook>.html``, without hidden tests;
- ``nbgrader/``: the nbgrader course folder (gradebook.db, autograded/, ...)
  that nbgrader's own commands run in, kept so that a second run only grades
  what changed. Running grade twice changes nothing; stopping it half-way and
  running it again finishes the batch.

Every step is one of nbgrader's commands (generate_assignment, autograde,
generate_feedback) run as a subprocess; this module only lays out files,
checks each notebook before nbgrader sees it, and collects the results.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import resource
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import sandbox
from .chapters import ROOT, Chapter, all_chapters
from .execute import status_path
from .judge import PROBE_DIRNAME

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024
CELL_TIMEOUT_S = 60
GRADER_MEMORY_BYTES = 16 * 1024**3  # a backstop: floods are cut in GuardedExecute


@dataclass
class Row:
    student_id: str
    assignment: str
    score: float
    max_score: float
    status: str


def _grader_limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (GRADER_MEMORY_BYTES, GRADER_MEMORY_BYTES))


def _nbgrader(course: Path, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # alembic
    env["COURSE_PROBE_DIR"] = PROBE_DIRNAME  # relative: the kernel runs in the notebook's folder
    env["JUPYTER_PATH"] = str(course / "jupyter")  # our kernelspecs
    env["JUPYTER_RUNTIME_DIR"] = str(course / "runtime")  # connection files, private to the grader
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"  # the judge's imports
    env.pop("COURSE_BOOK_BUILD", None)
    return subprocess.run([sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"],
                          cwd=course, env=env, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_grader_limits)


def course_lib(course: Path, ch: Chapter) -> Path:
    """A copy of the `course` package holding only earlier chapters' answers."""
    lib = course / "lib" / ch.id
    shutil.rmtree(lib, ignore_errors=True)
    shutil.copytree(ROOT / "course", lib / "course", ignore=shutil.ignore_patterns("__pycache__"))
    for later in all_chapters():
        if later.number >= ch.number:
            (lib / "course" / "reference" / f"{later.topic}.py").unlink(missing_ok=True)
    return lib


def write_kernelspec(course: Path, ch: Chapter, use_sandbox: bool) -> str:
    """The kernel nbgrader runs this chapter's notebooks in; returns its name."""
    lib = course_lib(course, ch)
    name = f"course-{ch.id}"
    if use_sandbox:
        argv = [sys.executable, "-m", "autograder.sandbox", "--lib", str(lib),
                "--wall", str(sandbox.WALL_SECONDS), "{connection_file}"]
        env = {"PYTHONPATH": str(ROOT)}  # for the launcher itself, outside the sandbox
    else:
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        env = {"PYTHONPATH": str(lib)}
    spec = {"argv": argv, "env": env, "display_name": f"grading {ch.id}", "language": "python",
            "interrupt_mode": "message"}
    folder = course / "jupyter" / "kernels" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.json").write_text(json.dumps(spec, indent=1))
    return name


def write_config(course: Path) -> None:
    course.mkdir(parents=True, exist_ok=True)
    sockets = course / "sockets"
    sockets.mkdir(exist_ok=True)
    sockets.chmod(0o1777)  # the sandboxed kernel (user nobody) creates its IPC sockets here
    secret = course / ".grading-secret"
    if not secret.exists():
        secret.write_bytes(secrets.token_bytes(32))
        secret.chmod(0o600)
    (course / "nbgrader_config.py").write_text(f'''\
# Written by `python -m autograder grade`; nbgrader reads it from this folder.
c = get_config()  # noqa: F821
c.CourseDirectory.root = {str(course)!r}
c.CourseDirectory.course_id = "transformer-course"
c.Execute.timeout = {CELL_TIMEOUT_S}
c.KernelManager.transport = "ipc"  # the sandbox has no network, not even loopback TCP
c.KernelManager.ip = {str(course / "sockets" / "kernel")!r}  # socket paths: <ip>-<port>
c.GuardedExecute.status_dir = {str(course / "status")!r}
c.GuardedExecute.wall_seconds = {sandbox.WALL_SECONDS}
c.Autograde.autograde_preprocessors = [
    "autograder.judge.PrepareProbes",
    "autograder.execute.GuardedExecute",
    "autograder.judge.JudgeChecks",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
c.PrepareProbes.secret_file = {str(secret)!r}
c.JudgeChecks.secret_file = {str(secret)!r}
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "nbgrader.preprocessors.ClearHiddenTests",
]
''')


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(path.rglob("*")):
        if f.is_file() and ".ipynb_checkpoints" not in f.parts:
            h.update(str(f.relative_to(path)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def prepare_assignment(course: Path, ch: Chapter) -> None:
    """Put the chapter's instructor notebook in source/ and register it."""
    stamp = course / "source" / f".{ch.id}.sha256"
    digest = _digest(ch.solution.parent)
    if stamp.exists() and stamp.read_text() == digest:
        return
    src = course / "source" / ch.id
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(ch.solution.parent, src, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    proc = _nbgrader(course, "generate_assignment", ch.id, "--force")
    if proc.returncode:
        raise SystemExit(f"nbgrader generate_assignment {ch.id} failed:\n{proc.stderr[-3000:]}")
    stamp.write_text(digest)


def intake(course: Path, ch: Chapter, student: str, folder: Path) -> str | None:
    """Check one submitted folder and copy its notebook into submitted/.

    Returns a status when the submission cannot be graded, else None.
    """
    expected = folder / f"{ch.id}.ipynb"
    if not expected.is_file() or expected.is_symlink():
        return f"missing notebook: expected {ch.id}/{ch.id}.ipynb"
    if expected.stat().st_size > MAX_NOTEBOOK_BYTES:
        return "invalid notebook: file too large"
    raw = expected.read_bytes()
    try:
        nbformat.validate(nbformat.reads(raw.decode("utf-8"), as_version=4))
    except Exception as err:  # invalid JSON, wrong encoding, not a notebook
        return f"invalid notebook: {type(err).__name__}"
    dest = course / "submitted" / student / ch.id / expected.name
    if dest.exists() and dest.read_bytes() == raw:
        return None  # unchanged since the last run: keep its grade
    shutil.rmtree(course / "autograded" / student / ch.id, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(raw)
    return None


def autograde(course: Path, ch: Chapter, students: list[str], kernel: str) -> dict[str, str]:
    """Run nbgrader autograde for the chapter; isolate failures per student."""
    failed: dict[str, str] = {}
    if not students:
        return failed
    budget = 600 + (sandbox.WALL_SECONDS + 60) * len(students)
    kernel_arg = f"--GuardedExecute.kernel_name={kernel}"
    proc = _nbgrader(course, "autograde", ch.id, kernel_arg, timeout=budget)
    todo = [s for s in students if not (course / "autograded" / s / ch.id / f"{ch.id}.ipynb").exists()]
    if proc.returncode == 0 and not todo:
        return failed
    for s in todo:  # one at a time, so one broken submission cannot sink the rest
        one = _nbgrader(course, "autograde", ch.id, f"--student={s}", "--force", kernel_arg,
                        timeout=sandbox.WALL_SECONDS + 300)
        if one.returncode or not (course / "autograded" / s / ch.id / f"{ch.id}.ipynb").exists():
            lines = [ln for ln in (one.stderr or "").splitlines() if "ERROR" in ln or "Error" in ln]
            failed[s] = "not graded: " + (lines[-1].strip()[:200] if lines else "nbgrader autograde failed")
    return failed


def feedback(course: Path, ch: Chapter, out: Path, students: list[str]) -> None:
    if not students:
        return
    _nbgrader(course, "generate_feedback", ch.id, "--force", timeout=600)
    for s in students:
        src = course / "feedback" / s / ch.id
        if src.is_dir():
            dest = out / "feedback" / s / ch.id
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("timestamp.txt"))


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


def _run_status(course: Path, student: str, ch: Chapter) -> str:
    path = status_path(course / "status", student, ch.id)
    note = json.loads(path.read_text()) if path.exists() else {}
    parts = [p for p in (note.get("problem"), note.get("output_truncated") and "output truncated") if p]
    return "graded" + (f" ({'; '.join(parts)})" if parts else "")


def collect(course: Path, ch: Chapter, students: list[str], status: dict[str, str]) -> tuple[list[Row], list[list]]:
    """Read scores back from nbgrader's gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    rows, cells = [], []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        max_score = gb.find_assignment(ch.id).max_score
        for s in students:
            if s in status:
                rows.append(Row(s, ch.id, 0.0, max_score, status[s]))
                continue
            try:
                sub = gb.find_submission(ch.id, s)
            except MissingEntry:
                rows.append(Row(s, ch.id, 0.0, max_score, "not graded: no gradebook entry"))
                continue
            rows.append(Row(s, ch.id, round(sub.score, 2), sub.max_score, _run_status(course, s, ch)))
            for nb in sub.notebooks:
                for g in sorted(nb.grades, key=lambda g: g.name):
                    cells.append([s, ch.id, nb.name, g.name, round(g.score, 2), g.max_score])
    return rows, cells


def grade(submissions: Path, out: Path, use_sandbox: bool = True) -> list[Row]:
    """Grade every submission under `submissions`; write the results to `out`.

    Student code runs in the sandbox (see `autograder.sandbox`); with
    `use_sandbox=False` it runs unconfined, as plain nbgrader would.
    """
    if use_sandbox:
        problem = sandbox.available()
        if problem:
            raise SystemExit(f"cannot grade safely: {problem}.\n"
                             "Fix that, or pass --unsafe-no-sandbox to run student code without isolation.")
    out.mkdir(parents=True, exist_ok=True)
    course = out / "nbgrader"
    write_config(course)
    found, warnings = discover(submissions)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    students = sorted({s for per in found.values() for s in per})
    rows: list[Row] = []
    cells: list[list] = []
    for ch in all_chapters():
        if ch.id not in found:
            continue
        prepare_assignment(course, ch)
        kernel = write_kernelspec(course, ch, use_sandbox)
        status = {}
        for s in students:
            folder = found[ch.id].get(s)
            problem = intake(course, ch, s, folder) if folder else "missing: nothing submitted"
            if problem:
                status[s] = problem
        gradable = [s for s in students if s not in status]
        status.update(autograde(course, ch, gradable, kernel))
        feedback(course, ch, out, [s for s in gradable if s not in status])
        ch_rows, ch_cells = collect(course, ch, students, status)
        rows += ch_rows
        cells += ch_cells
        print(f"graded {ch.id}: {len(gradable)} notebook(s)")
    with open(out / "grades.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student_id", "assignment", "score", "max_score", "status"])
        w.writerows([[r.student_id, r.assignment, r.score, r.max_score, r.status] for r in rows])
    with open(out / "exercises.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student_id", "assignment", "notebook", "grade_id", "score", "max_score"])
        w.writerows(cells)
    return rows
