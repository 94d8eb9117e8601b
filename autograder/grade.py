"""`python -m autograder grade SUBMISSIONS --out OUT`: grade a whole class.

SUBMISSIONS holds nbgrader's submitted/ layout,
``SUBMISSIONS/<student_id>/<chapter_id>/<chapter_id>.ipynb``. OUT becomes:

- ``grades.csv``: one row per student and chapter (student_id, assignment,
  score, max_score, status);
- ``exercises.csv``: one row per student, chapter and test cell;
- ``feedback/<student_id>/<chapter_id>/<notebook>.html``, without hidden tests;
- ``nbgrader/``: the nbgrader course folder (gradebook.db, autograded/, ...)
  that nbgrader's own commands run in, kept so that a second run only grades
  what changed (a notebook, the instructor's files, the chapter's checks,
  the judge, the limits). Running grade twice changes nothing; stopping it
  half-way (even with SIGKILL) and running it again finishes the batch.

Every step is one of nbgrader's commands (generate_assignment, autograde,
generate_feedback) run as a subprocess; this module only lays out files,
checks and repairs each notebook before nbgrader sees it (`intake`), and
collects the results. One student's broken or hostile notebook costs only
that student: the row's ``status`` says what happened, e.g. ``graded``,
``graded (notebook renamed: ...)``, ``graded (deleted cell ... restored)``,
``graded (kernel died ...)``, ``graded (output truncated)``,
``missing notebook: ...``, ``invalid notebook: ...``, ``not graded: ...``.
"""

from __future__ import annotations

import copy
import csv
import ctypes
import hashlib
import json
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from . import sandbox
from .chapters import ROOT, Chapter, all_chapters
from .execute import status_path
from .judge import HIDDEN_BEGIN, HIDDEN_END, PROBE_DIRNAME

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024
GRADER_MEMORY_BYTES = 16 * 1024**3  # a backstop: floods are cut in GuardedExecute
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Limits:
    """Time limits for student code: per cell, and per notebook (the sandbox's)."""

    cell_seconds: int = sandbox.CELL_SECONDS
    wall_seconds: int = sandbox.WALL_SECONDS


@dataclass
class Row:
    student_id: str
    assignment: str
    score: float
    max_score: float
    status: str


@dataclass
class Intake:
    """One submission after `intake`: a repaired notebook, or why there is none."""

    notebook: NotebookNode | None = None
    problem: str | None = None
    notes: list[str] = field(default_factory=list)


def _grader_limits() -> None:
    """Cap nbgrader's memory, and end it (and so its kernel) if grade dies."""
    resource.setrlimit(resource.RLIMIT_AS, (GRADER_MEMORY_BYTES, GRADER_MEMORY_BYTES))
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _nbgrader(course: Path, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # alembic
    env["COURSE_PROBE_DIR"] = PROBE_DIRNAME  # relative: the kernel runs in the notebook's folder
    env["JUPYTER_PATH"] = str(course / "jupyter")  # our kernelspecs
    env["JUPYTER_RUNTIME_DIR"] = str(course / "runtime")  # connection files, private to the grader
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"  # the judge's imports
    env.pop("COURSE_BOOK_BUILD", None)
    command = [sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"]
    try:
        return subprocess.run(command, cwd=course, env=env, capture_output=True, text=True,
                              timeout=timeout, preexec_fn=_grader_limits)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, -signal.SIGKILL, "", f"ERROR: timed out after {timeout} s")


def course_lib(course: Path, ch: Chapter) -> Path:
    """A copy of the `course` package holding only earlier chapters' answers."""
    lib = course / "lib" / ch.id
    shutil.rmtree(lib, ignore_errors=True)
    shutil.copytree(ROOT / "course", lib / "course", ignore=shutil.ignore_patterns("__pycache__"))
    for later in all_chapters():
        if later.number >= ch.number:
            (lib / "course" / "reference" / f"{later.topic}.py").unlink(missing_ok=True)
    return lib


def write_kernelspec(course: Path, ch: Chapter, use_sandbox: bool, limits: Limits) -> str:
    """The kernel nbgrader runs this chapter's notebooks in; returns its name."""
    lib = course_lib(course, ch)
    name = f"course-{ch.id}"
    if use_sandbox:
        argv = [sys.executable, "-m", "autograder.sandbox", "--lib", str(lib),
                "--wall", str(limits.wall_seconds), "{connection_file}"]
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


def write_config(course: Path, limits: Limits) -> None:
    course.mkdir(parents=True, exist_ok=True)
    secret = course / ".grading-secret"
    if not secret.exists():
        secret.write_bytes(secrets.token_bytes(32))
        secret.chmod(0o600)
    (course / "nbgrader_config.py").write_text(f'''\
# Written by `python -m autograder grade`; nbgrader reads it from this folder.
c = get_config()  # noqa: F821
c.CourseDirectory.root = {str(course)!r}
c.CourseDirectory.course_id = "transformer-course"
c.Execute.timeout = {limits.cell_seconds}
c.KernelManager.transport = "ipc"  # the sandbox has no network, not even loopback TCP
c.GuardedExecute.status_dir = {str(course / "status")!r}
c.GuardedExecute.socket_dir = {str(course / "sockets")!r}
c.GuardedExecute.wall_seconds = {limits.wall_seconds}
c.GuardedExecute.shutdown_kernel = "immediate"  # nothing in the kernel is worth waiting for
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


def judging_digest(ch: Chapter) -> str:
    """A digest of the code a chapter's verdicts depend on, besides the
    notebook and the instructor's files: the check harness, the chapter's
    checks, earlier chapters' reference modules, and the judge."""
    checks = ROOT / "course" / "checks"
    files = [checks / f"{name}.py" for name in ("__init__", "framework", "plain", ch.topic)]
    files += [c.reference_module for c in all_chapters() if c.number < ch.number]
    files.append(Path(__file__).with_name("judge.py"))
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.relative_to(ROOT)}\0".encode() + (f.read_bytes() if f.exists() else b""))
    return h.hexdigest()


def prepare_assignment(course: Path, ch: Chapter) -> str:
    """Put the chapter's instructor notebook in source/ and register it.

    Returns a digest of the instructor's files: when they change, every
    submission of the chapter is graded again.
    """
    stamp = course / "source" / f".{ch.id}.sha256"
    digest = _digest(ch.solution.parent)
    if stamp.exists() and stamp.read_text() == digest:
        return digest
    src = course / "source" / ch.id
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(ch.solution.parent, src, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    proc = _nbgrader(course, "generate_assignment", ch.id, "--force")
    if proc.returncode:
        raise SystemExit(f"nbgrader generate_assignment {ch.id} failed:\n{proc.stderr[-3000:]}")
    stamp.write_text(digest)
    return digest


# ----------------------------------------------------------------- intake ---

def _names(names: list[str]) -> str:
    shown = ", ".join(n[:60] for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def intake(ch: Chapter, folder: Path, release: NotebookNode) -> Intake:
    """Find one student's notebook for `ch`, check it, and repair it.

    A notebook under another name is graded if it is the only one; extra
    notebooks are ignored. Links are never followed. The repaired notebook
    has the release's notebook metadata and, for every cell the release
    tracks (answer, test and locked cells), the release's cell type and
    grading metadata; see `repair`.
    """
    expected = f"{ch.id}.ipynb"
    found = sorted(p.name for p in folder.iterdir()
                   if p.suffix == ".ipynb" and p.is_file() and not p.is_symlink())
    notes = []
    if expected in found:
        name = expected
        extra = [n for n in found if n != expected]
        if extra:
            notes.append(f"ignored extra notebook(s): {_names(extra)}")
    elif len(found) == 1:
        name = found[0]
        notes.append(f"notebook renamed: graded {_names(found)} as {expected}")
    else:
        others = f"; found {_names(found)}" if found else ""
        return Intake(problem=f"missing notebook: expected {ch.id}/{expected}{others}")
    path = folder / name
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        return Intake(problem="invalid notebook: larger than 20 MB")
    try:
        raw = nbformat.convert(nbformat.reader.reads(path.read_bytes().decode("utf-8")), 4)
        nb = nbformat.v4.new_notebook(metadata=copy.deepcopy(release.metadata),
                                      cells=[_plain_cell(c) for c in raw.cells])
        notes += repair(nb, release)
        nbformat.validate(nb)
    except Exception as err:  # not JSON, not a notebook, not even after repair
        return Intake(problem=f"invalid notebook: {type(err).__name__}")
    return Intake(nb, None, notes)


def _plain_cell(cell: dict) -> NotebookNode:
    """A well-formed cell with the student's type, source, id and tags.

    Outputs are dropped (nbgrader clears them anyway), and so is metadata
    other than tags and nbgrader's (which `repair` checks).
    """
    make = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
            "raw": nbformat.v4.new_raw_cell}[cell["cell_type"]]
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else source
    if not isinstance(source, str):
        raise TypeError("cell source is not text")
    meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
    keep = {}
    tags = meta.get("tags")
    if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
        keep["tags"] = list(dict.fromkeys(tags))
    if "nbgrader" in meta:
        keep["nbgrader"] = meta["nbgrader"]
    new = make(source=source, metadata=keep)
    new["id"] = cell.get("id") if isinstance(cell.get("id"), str) else ""
    return new


def _grade_id(cell: NotebookNode) -> str | None:
    meta = cell.metadata.get("nbgrader")
    gid = meta.get("grade_id") if isinstance(meta, dict) else None
    return gid if isinstance(gid, str) else None


def repair(nb: NotebookNode, release: NotebookNode) -> list[str]:
    """Make `nb`'s grading structure the release's; return what was changed.

    For each grade_id of the release, the last cell carrying it (as
    nbgrader's DeduplicateIds decides) gets the release's cell type and
    metadata back (points, schema_version, locked, ...); earlier cells
    carrying it, and cells with unknown grading metadata, become ordinary
    cells; a deleted one is put back (with the release's source) after the
    tracked cell that precedes it. Test cells' sources are restored later by
    nbgrader (OverwriteCells). Hidden-test markers in the student's own cells
    are disabled (nbgrader's feedback step rejects them there). Cell ids are
    made unique, deterministically.
    """
    tracked = {_grade_id(c): c for c in release.cells if _grade_id(c)}
    keep = {_grade_id(c): i for i, c in enumerate(nb.cells) if _grade_id(c) in tracked}
    notes = []
    for i, cell in enumerate(nb.cells):
        gid = _grade_id(cell)
        if keep.get(gid) != i:
            if "nbgrader" in cell.metadata:
                kind = "duplicate" if gid in keep else "unknown"
                notes.append(f"grading metadata removed from a cell with {kind} grade_id {_short(gid)}")
                del cell.metadata["nbgrader"]
            continue
        want = tracked[gid]
        if cell.cell_type != want.cell_type:
            notes.append(f"cell {gid} turned back into a {want.cell_type} cell")
            cell = nb.cells[i] = _plain_cell({**cell, "cell_type": want.cell_type})
        if cell.metadata.get("nbgrader") != want.metadata.nbgrader:
            notes.append(f"grading metadata of cell {gid} restored")
        cell.metadata = copy.deepcopy(want.metadata)
    order = list(tracked)
    for k, gid in enumerate(order):
        if gid not in keep:
            at = 0 if k == 0 else 1 + next(i for i, c in enumerate(nb.cells) if _grade_id(c) == order[k - 1])
            nb.cells.insert(at, copy.deepcopy(tracked[gid]))
            notes.append(f"deleted cell {gid} restored")
    for cell in nb.cells:
        if not cell.metadata.get("nbgrader", {}).get("locked") and HIDDEN_BEGIN in cell.source:
            for marker in (HIDDEN_BEGIN, HIDDEN_END):
                cell.source = cell.source.replace(marker, marker.replace(" ", "-"))
            notes.append("hidden-test markers in a student cell disabled")
    used: set[str] = set()
    for i, cell in enumerate(nb.cells):
        if not CELL_ID.match(cell.get("id", "")) or cell.id in used:
            cell.id = next(f"cell-{i}-{n}" for n in range(len(nb.cells) + 1) if f"cell-{i}-{n}" not in used)
        used.add(cell.id)
    return list(dict.fromkeys(notes))


# -------------------------------------------------------------- grading ---

def is_finished(notebook: Path) -> bool:
    """Whether nbgrader finished this autograded notebook: the judge gave
    every test cell an output (the copy nbgrader starts from has none, and
    nbgrader writes the graded notebook after the gradebook)."""
    try:
        nb = nbformat.read(notebook, as_version=4)
    except Exception:
        return False
    tests = [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]
    return bool(tests) and all(c.outputs for c in tests)


class Course:
    """Paths in the nbgrader course folder for one chapter."""

    def __init__(self, root: Path, ch: Chapter) -> None:
        self.root, self.ch = root, ch

    def submitted(self, student: str) -> Path:
        return self.root / "submitted" / student / self.ch.id

    def autograded(self, student: str) -> Path:
        return self.root / "autograded" / student / self.ch.id

    def stamp(self, student: str) -> Path:
        return self.root / "status" / f"{student}--{self.ch.id}.input"

    def forget(self, student: str, out: Path) -> None:
        """Drop whatever an earlier run kept of this student's chapter."""
        feedback = [root / "feedback" / student / self.ch.id for root in (self.root, out)]
        for folder in (self.submitted(student), self.autograded(student), *feedback):
            shutil.rmtree(folder, ignore_errors=True)
        self.stamp(student).unlink(missing_ok=True)

    def stage(self, student: str, nb: NotebookNode, key: str) -> bool:
        """Put the repaired notebook in submitted/; True if it needs grading.

        A notebook needs grading unless an earlier run finished grading these
        same inputs (notebook, instructor files, limits). The order of the
        steps makes a run stopped at any point safe to run again.
        """
        text = nbformat.writes(nb)
        key = hashlib.sha256(f"{key}\0{text}".encode()).hexdigest()
        stamp, graded = self.stamp(student), self.autograded(student) / f"{self.ch.id}.ipynb"
        if stamp.exists() and stamp.read_text() == key and is_finished(graded):
            return False
        shutil.rmtree(self.autograded(student), ignore_errors=True)
        shutil.rmtree(self.submitted(student), ignore_errors=True)
        self.submitted(student).mkdir(parents=True)
        (self.submitted(student) / f"{self.ch.id}.ipynb").write_text(text)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(key)
        return True


def autograde(course: Course, students: list[str], kernel: str, limits: Limits) -> dict[str, str]:
    """Run nbgrader autograde for `students`; isolate failures per student.

    Returns {student: status} for those nbgrader could not grade.
    """
    failed: dict[str, str] = {}
    if not students:
        return failed
    ch = course.ch.id
    per_notebook = limits.wall_seconds + 120
    kernel_arg = f"--GuardedExecute.kernel_name={kernel}"
    proc = _nbgrader(course.root, "autograde", ch, kernel_arg, timeout=300 + per_notebook * len(students))
    todo = [s for s in students if not is_finished(course.autograded(s) / f"{ch}.ipynb")]
    if proc.returncode == 0 and not todo:
        return failed
    for s in todo:  # one at a time, so one broken submission cannot sink the rest
        one = _nbgrader(course.root, "autograde", ch, f"--student={s}", "--force", kernel_arg,
                        timeout=300 + per_notebook)
        if not is_finished(course.autograded(s) / f"{ch}.ipynb"):
            lines = [ln for ln in (one.stderr or "").splitlines() if "ERROR" in ln or "Error" in ln]
            failed[s] = "not graded: " + (lines[-1].strip()[:200] if lines else "nbgrader autograde failed")
            shutil.rmtree(course.autograded(s), ignore_errors=True)
    return failed


def feedback(course: Course, out: Path, students: list[str]) -> list[str]:
    """Write feedback HTML for `students` into OUT; returns those left without."""
    if not students:
        return []
    ch = course.ch.id
    _nbgrader(course.root, "generate_feedback", ch, "--force", timeout=600)
    missing = []
    for s in students:
        src = course.root / "feedback" / s / ch
        dest = out / "feedback" / s / ch
        shutil.rmtree(dest, ignore_errors=True)
        if (src / f"{ch}.html").is_file():
            dest.mkdir(parents=True)
            shutil.copy(src / f"{ch}.html", dest / f"{ch}.html")
        else:
            missing.append(s)
    return missing


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


def _run_notes(course: Course, student: str) -> list[str]:
    """What `GuardedExecute` noted while the student's notebook ran."""
    path = status_path(course.root / "status", student, course.ch.id)
    note = json.loads(path.read_text()) if path.exists() else {}
    notes = [note["problem"]] if note.get("problem") else []
    if note.get("timed_out_cells") and not notes:  # a killed kernel's cells time out too
        notes.append(f"{len(note['timed_out_cells'])} cell(s) stopped at the per-cell time limit")
    if note.get("output_truncated"):
        notes.append("output truncated")
    if note.get("removed_entries"):
        notes.append(f"{note['removed_entries']} link(s) or special file(s) left by the kernel removed")
    return notes


def collect(course: Course, students: list[str], status: dict[str, str],
            notes: dict[str, list[str]]) -> tuple[list[Row], list[list]]:
    """Read scores back from nbgrader's gradebook."""
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
            parts = notes.get(s, []) + _run_notes(course, s)
            rows.append(Row(s, ch, round(sub.score, 2), sub.max_score,
                            "graded" + (f" ({'; '.join(parts)})" if parts else "")))
            for nb in sub.notebooks:
                for g in sorted(nb.grades, key=lambda g: g.name):
                    cells.append([s, ch, nb.name, g.name, round(g.score, 2), g.max_score])
    return rows, cells


def grade_chapter(root: Path, ch: Chapter, folders: dict[str, Path | None], out: Path,
                  use_sandbox: bool, limits: Limits) -> tuple[list[Row], list[list]]:
    """Grade every student's notebook for one chapter (None: nothing submitted)."""
    course = Course(root, ch)
    key = f"{prepare_assignment(root, ch)}\0{judging_digest(ch)}\0{use_sandbox}\0{limits}"
    kernel = write_kernelspec(root, ch, use_sandbox, limits)
    release = nbformat.read(root / "release" / ch.id / f"{ch.id}.ipynb", as_version=4)
    status: dict[str, str] = {}
    notes: dict[str, list[str]] = {}
    todo = []
    for s, folder in folders.items():
        got = intake(ch, folder, release) if folder else Intake(problem="missing: nothing submitted")
        if got.problem:
            status[s] = got.problem
            course.forget(s, out)
            continue
        notes[s] = got.notes
        if course.stage(s, got.notebook, key):
            todo.append(s)
    for stale in (root / "submitted").glob(f"*/{ch.id}"):  # nbgrader grades all of submitted/
        if stale.parent.name not in notes:
            course.forget(stale.parent.name, out)
    status.update(autograde(course, todo, kernel, limits))
    graded = [s for s in notes if s not in status]
    for s in feedback(course, out, graded):
        notes[s].append("no feedback: nbgrader generate_feedback failed")
    unchanged = len([s for s in graded if s not in todo])
    print(f"graded {ch.id}: {len(todo)} notebook(s) run, {unchanged} unchanged")
    return collect(course, sorted(folders), status, notes)


def grade(submissions: Path, out: Path, use_sandbox: bool = True, limits: Limits = Limits()) -> list[Row]:
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
    root = out / "nbgrader"
    write_config(root, limits)
    found, warnings = discover(submissions)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    students = sorted({s for per in found.values() for s in per})
    rows: list[Row] = []
    cells: list[list] = []
    for ch in all_chapters():
        if ch.id in found:
            ch_rows, ch_cells = grade_chapter(root, ch, {s: found[ch.id].get(s) for s in students},
                                              out, use_sandbox, limits)
            rows += ch_rows
            cells += ch_cells
    with open(out / "grades.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student_id", "assignment", "score", "max_score", "status"])
        w.writerows([[r.student_id, r.assignment, r.score, r.max_score, r.status] for r in rows])
    with open(out / "exercises.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student_id", "assignment", "notebook", "grade_id", "score", "max_score"])
        w.writerows(cells)
    return rows
