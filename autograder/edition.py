"""`python -m autograder edition DEST`: the student edition of the course.

What an instructor publishes for a graded cohort (a folder, or with
``--git`` a repository whose history holds only editions): the chapters,
the book, the checks, the self-check, a README for students, the Binder
set-up, and the reference answers of the chapters whose due date (``schedule.yml``, plus
the longest extension granted) has passed, and of no other. It holds no
``solutions/``, no tests (hidden-test sources, mutants), no generated
outputs but the pre-rendered figures of the book, no caches.

What a chapter needs of an earlier one not yet due (chapter 11 builds on chapter 5's heads, say)
is there as that chapter's stand-in (`course.standins`): ``course/reference/<topic>.py`` imports
a module of the same names built on PyTorch's own functions, which holds no answer.

Figures of chapters not yet due: the reference they would fall back on is
absent, so the notebook carries the outputs of the instructor's last book
build (``_build/jupyter_execute``, made by ``make book``) and the edition's
book shows those instead of executing the notebook (``execute.exclude_patterns``).
Run ``make book`` before ``edition`` to include them.

Before it finishes, `audit` searches every file of the edition (and, with
``--git``, every commit) for the answers of every chapter not yet due; the
edition is refused if one is found.

Before it writes anything, it lists the chapters whose answers it holds
(with their due dates) and, when some of them were not in the edition DEST
held before, asks `confirm` (the command line asks on a terminal, and
refuses elsewhere unless given ``--yes``): a schedule with dates in the
past would otherwise publish every answer at once.
"""

from __future__ import annotations

import ast
import datetime as dt
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import nbformat
import yaml

from course import standins
from course.cells import SOLUTION_BEGIN, imports, is_answer_cell, is_exported, without_solution_markers
from course.parts import PIECES
from course.protocol import HIDDEN_BEGIN

from .chapters import REFERENCE, ROOT, Chapter, all_chapters, oracle_files
from .release import INSTALL_URL
from .schedule import Schedule, load_schedule

MARK = ".student-edition"
EXECUTED = ROOT / "_build" / "jupyter_execute"
# What the edition holds, by top-level name: anything else (solutions/, tests/, benchmarks/, ...) stays out.
PUBLISHED = [".ci/book-assets", ".ci/fetch-book-assets", ".github/workflows/book.yml", ".gitignore",
             "Makefile", "README.md", "_config.yml", "_toc.yml", "bibliography.md", "objectives.md",
             "pyproject.toml", "references.bib", "requirements.txt", "binder", "chapters", "course",
             "autograder"]
#: the sections of README.md a student's copy keeps (the others are the instructor's: the term, the
#: grader, a layout that names solutions/ and tests/), after its introduction and `STUDENT_SETUP`
STUDENT_SECTIONS = ("Chapters", "For readers", "For students", "Citations")
STUDENT_SETUP = """## Set-up

This is your course's student edition: the chapters, the book and the self-check. Open a chapter from
the book's launch button (Colab, Binder or your JupyterHub), or on your own machine, with Python 3.10+
and `make`:

```bash
make SYSTEM_PACKAGES= book   # installs the course in .venv/, builds the book, serves it on http://localhost:8000
```

Your instructor adds each chapter's answers once it is due: `git pull` to get them.

"""
NEVER = ("__pycache__", ".ipynb_checkpoints", ".pyc", ".egg-info")
MIN_ANSWER_LINE = 12  # shorter lines ("return x") are not evidence of an answer


def _tracked() -> set[Path] | None:
    """Files git knows (tracked or not ignored), or None outside a git checkout."""
    try:
        proc = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                              cwd=ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return {ROOT / p for p in proc.stdout.decode().split("\0") if p}


def waiting(chapters: list[Chapter], not_due: list[Chapter]) -> dict[str, str]:
    """{chapter id: the pieces (`course.parts.PIECES`) of earlier chapters not yet due, with no stand-in, that the
    `course` modules its notebook imports ask `parts` for, by chapter}: the cells that wait for those due dates."""
    by_topic = {ch.topic: ch for ch in not_due}
    stood_in = {topic: set(importlib.import_module(f"course.standins.{topic}").__all__) for topic in standins.topics()}
    out = {}
    for ch in chapters:
        if not ch.student.is_file():
            continue
        modules = {m for cell in nbformat.read(ch.student, as_version=4).cells if cell.cell_type == "code"
                   for m, _ in imports(cell.source) if m.startswith("course.")}
        used = set()
        for module in modules:
            spec = importlib.util.find_spec(module)
            if spec is not None and spec.origin and spec.origin.endswith(".py"):
                used |= set(re.findall(r"\bparts\.(\w+)", Path(spec.origin).read_text()))
        missing: dict[str, list[str]] = {}
        for piece in sorted(used & set(PIECES)):
            topic = PIECES[piece]
            if topic in by_topic and by_topic[topic].number < ch.number and piece not in stood_in.get(topic, ()):
                missing.setdefault(by_topic[topic].id, []).append(piece)
        if missing:
            out[ch.id] = "; ".join(f"{', '.join(names)} ({chapter})" for chapter, names in sorted(missing.items()))
    return out


def published_files(due: set[str]) -> list[Path]:
    """The repository files the edition holds when the chapters `due` are due."""
    tracked = _tracked()
    topics = {ch.topic for ch in all_chapters() if ch.id in due}
    oracles = set(oracle_files())
    files = []
    for name in PUBLISHED:
        top = ROOT / name
        for f in sorted([top] if top.is_file() else top.rglob("*") if top.is_dir() else []):
            if not f.is_file() or f.is_symlink() or any(n in str(f.relative_to(ROOT)) for n in NEVER):
                continue
            if tracked is not None and f not in tracked:
                continue
            if f.parent == REFERENCE and f.name != "__init__.py" and f.stem not in topics:
                continue  # the answers of a chapter not yet due (or of one without a solution yet)
            if f in oracles:
                continue  # the checks' trusted side: a student's own run judges against course/visible/
            files.append(f)
    return files


def _prerender(nb: nbformat.NotebookNode, ch: Chapter) -> bool:
    """Give `nb` the outputs of the last book build, cell by cell where the
    source is unchanged; False if there is no build of this chapter."""
    built = EXECUTED / "chapters" / ch.id / f"{ch.id}.ipynb"
    if not built.is_file():
        return False
    done = nbformat.read(built, as_version=4)
    by_id = {c.get("id"): c for c in done.cells if c.cell_type == "code"}
    for cell in nb.cells:
        old = by_id.get(cell.get("id"))
        if cell.cell_type == "code" and old is not None and old.source == cell.source:
            cell.outputs = old.outputs
            cell.execution_count = old.execution_count
    if "widgets" in done.metadata:
        nb.metadata["widgets"] = done.metadata["widgets"]
    return True


def _config(text: str, url: str | None, not_due: list[Chapter]) -> str:
    config = yaml.safe_load(text)
    if url:
        config["repository"]["url"] = url
    config.setdefault("execute", {})["exclude_patterns"] = [f"chapters/{ch.id}/*" for ch in not_due]
    return ("# The student edition, built by `python -m autograder edition`. Chapters not yet due are not\n"
            "# executed: they show the figures pre-rendered from the instructor's build.\n"
            + yaml.safe_dump(config, sort_keys=False))


def _public_schedule(schedule: Schedule) -> str:
    """Due dates only (extensions name students: they stay private)."""
    due = {ch: {"due": when.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S+00:00")}
           for ch, when in sorted(schedule.due.items())}
    return ("# Due dates of this course (UTC).\n"
            + yaml.safe_dump({"timezone": "UTC", "late_penalty": schedule.late_penalty, "chapters": due},
                             sort_keys=False))


def _empty(dest: Path) -> None:
    """Empty a previous edition (keeping its .git); refuse any other non-empty folder."""
    if dest.exists() and any(dest.iterdir()):
        if not (dest / MARK).is_file():
            raise SystemExit(f"{dest} is not empty and holds no earlier edition: refusing to overwrite it")
        for entry in dest.iterdir():
            if entry.name != ".git":
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    dest.mkdir(parents=True, exist_ok=True)


def _mark(dest: Path) -> dict:
    """The edition mark in `dest` ({} when there is none, or it cannot be read)."""
    try:
        mark = json.loads((dest / MARK).read_text())
    except (OSError, ValueError):
        return {}
    return mark if isinstance(mark, dict) else {}


def published_before(dest: Path) -> set[str]:
    """The chapters whose answers the edition already in `dest` holds (none if there is none)."""
    answers = _mark(dest).get("answers_of", [])
    return set(answers) if isinstance(answers, list) else set()


def announce(due: list[str], before: set[str], schedule: Schedule) -> list[str]:
    """Print the chapters whose answers the edition holds, with their due dates; return the new ones."""
    if not due:
        print("the edition holds no chapter's answers (none is due yet)")
    for ch in due:
        when, out = (t.astimezone(dt.timezone.utc) for t in (schedule.due[ch], schedule.publication(ch)))
        extended = f", published after the longest extension, {out:%Y-%m-%d %H:%M} UTC" if out > when else ""
        print(f"  answers of {ch} (due {when:%Y-%m-%d %H:%M} UTC{extended}){'' if ch in before else ': NEW'}")
    return [ch for ch in due if ch not in before]


def build_edition(dest: Path, now: dt.datetime | None = None, url: str | None = None, git: bool = False,
                  schedule: Schedule | None = None,
                  confirm: Callable[[list[str]], bool] | None = None) -> list[str]:
    """Write the student edition into `dest` as of `now`; returns the chapters whose answers it holds.
    When it would publish answers that `dest`'s earlier edition did not hold, `confirm` (if given) is
    asked with those chapters first, and nothing is written unless it says yes."""
    dest = dest.resolve()
    if dest == ROOT or ROOT in dest.parents:
        raise SystemExit("the edition must be written outside the repository")
    now = now or dt.datetime.now(dt.timezone.utc)
    schedule = schedule or load_schedule()
    chapters = all_chapters()
    due = {ch.id for ch in chapters if schedule.is_due(ch.id, now)}
    not_due = [ch for ch in chapters if ch.id not in due]
    new = announce(sorted(due), published_before(dest), schedule)
    if new and confirm is not None and not confirm(new):
        raise SystemExit("nothing written: the answers were not confirmed")
    before = _mark(dest)
    built = before["built"] if before.get("answers_of") == sorted(due) and "built" in before else now.isoformat()
    _empty(dest)
    for f in published_files(due):
        target = dest / f.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    shims = [ch for ch in not_due if ch.topic in standins.topics()]
    for ch in shims:  # what later chapters import of a chapter not yet due: its stand-in
        (dest / ch.reference_module.relative_to(ROOT)).write_text(standins.shim(ch.topic))
    if shims:
        print(f"stand-ins (no answers, on PyTorch's own functions) for {', '.join(ch.id for ch in shims)}")
    for ch, pieces in waiting(chapters, not_due).items():
        print(f"{ch}: its notebook's library uses {pieces}, which this edition does not hold (no stand-in): until "
              "those chapters are due, those cells say so, and run with the student's own pieces (course.learner)")
    (dest / "README.md").write_text(student_readme((ROOT / "README.md").read_text()))
    (dest / "_config.yml").write_text(_config((ROOT / "_config.yml").read_text(), url, not_due))
    (dest / "schedule.yml").write_text(_public_schedule(schedule))
    missing = []
    for ch in chapters:
        path = dest / ch.student.relative_to(ROOT)
        if not path.is_file():  # a chapter still being written: nothing released yet
            continue
        nb = nbformat.read(path, as_version=4)
        if url:
            setup = next(c for c in nb.cells if c.cell_type == "code")
            setup.source = INSTALL_URL.sub(f"git+{url}", setup.source)
        if ch.id not in due and not _prerender(nb, ch):
            missing.append(ch.id)
        nbformat.write(nb, path)
    if missing:
        print(f"warning: no book build of {', '.join(missing)} (run `make book` first): the edition's book shows "
              "them without figures, and in Jupyter a figure raises the unsolved exercise's NotImplementedError")
    # built: when these answers were first published, so that a run that publishes nothing new (a daily
    # cron) changes no file and makes no commit
    (dest / MARK).write_text(json.dumps({"built": built, "answers_of": sorted(due)}, indent=1) + "\n")
    for ask_git in ((False, True) if git else (False,)):  # the files, then (committed) the history too
        if ask_git:
            _commit(dest, now)
        problems = audit(dest, not_due)
        if problems:
            raise SystemExit("the edition holds answers of chapters not yet due:\n  " + "\n  ".join(problems[:20]))
    return sorted(due)


def student_readme(readme: str) -> str:
    """The edition's README.md: `readme`'s introduction, `STUDENT_SETUP`, then its `STUDENT_SECTIONS`."""
    intro, *sections = re.split(r"(?m)^(?=## )", readme)
    kept = [s for s in sections if s.partition("\n")[0].removeprefix("## ").strip() in STUDENT_SECTIONS]
    return intro + STUDENT_SETUP + "".join(kept)


def _git(dest: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Course edition", "GIT_AUTHOR_EMAIL": "edition@localhost",
           "GIT_COMMITTER_NAME": "Course edition", "GIT_COMMITTER_EMAIL": "edition@localhost"}
    return subprocess.run(["git", *args], cwd=dest, env=env, capture_output=True, text=True, check=True)


def _commit(dest: Path, now: dt.datetime) -> None:
    """Commit the edition in its own repository (made on first use): its history holds editions only."""
    if not (dest / ".git").is_dir():
        _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A")
    if _git(dest, "status", "--porcelain").stdout.strip():
        _git(dest, "commit", "-q", "-m", f"Student edition as of {now:%Y-%m-%d %H:%M} UTC")


# ------------------------------------------------------------------ audit ---

def answer_lines(ch: Chapter) -> list[tuple[set[str], int]]:
    """Distinctive lines of each of a chapter's answers (its solution cells,
    which `release` also exports into its reference module; or, for a chapter
    still being written, its reference module), minus what its student
    notebook shows anyway (the contract often quotes a line)."""
    given = ("\n".join(c.source for c in nbformat.read(ch.student, as_version=4).cells)
             if ch.student.is_file() else "")
    blocks = []
    cells = nbformat.read(ch.solution, as_version=4).cells if ch.solution.is_file() else []
    for cell in cells:
        if is_answer_cell(cell) or is_exported(cell):
            blocks.append(cell.source)
    if not blocks and ch.reference_module.is_file():
        blocks += _function_bodies(ch.reference_module.read_text())
    answers = []
    for block in blocks:
        code = {ln.strip() for ln in without_solution_markers(block).splitlines()} - {""}
        code = {ln for ln in code if not ln.startswith("#") and ln not in given}
        lines = {ln for ln in code if len(ln) >= MIN_ANSWER_LINE}
        if lines:  # evidence: the whole of a one-line answer, two lines of a longer one
            answers.append((lines, 1 if len(code) == 1 else 2))
    return answers


def _function_bodies(source: str) -> list[str]:
    """The bodies of a module's functions and methods, docstrings left out:
    the answers, where there is no student notebook yet to tell them from
    what it would show (signatures, docstrings)."""
    lines = source.splitlines()
    bodies = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            if body:
                bodies.append("\n".join(lines[body[0].lineno - 1:body[-1].end_lineno]))
    return bodies


def published_lines(lines: set[str]) -> set[str]:
    """The answer lines the course publishes by design, not counted as a leak: those the checks'
    hints quote (a student reads them as feedback; `course/visible/`) and those of the course's
    own helpers (``course/*.py`` and `course.probing`, e.g. `course.reversal`'s toy model, which
    stacks chapter 7's layers the usual way). Never the oracles (`course/checks/`, unpublished) or
    the reference answers."""
    hints = []
    for path in (ROOT / "course" / "visible").glob("*.json"):
        for check in json.loads(path.read_text())["checks"].values():
            hints += [check["standard"]["hint"], *(m["hint"] for m in check["mistakes"])]
    helpers = [*(ROOT / "course").glob("*.py"), *(ROOT / "course" / "probing").rglob("*.py")]
    published = "\n".join(hints + [p.read_text() for p in helpers])
    return {ln for ln in lines if ln in published}


def _texts(path: Path) -> list[str]:
    """The text a file holds, notebooks' cells and outputs decoded."""
    try:
        raw = path.read_text()
    except (UnicodeDecodeError, OSError):
        return []
    if path.suffix != ".ipynb":
        return [raw]
    out = [raw]
    for cell in json.loads(raw).get("cells", []):
        out.append("".join(cell.get("source", "")))
        for o in cell.get("outputs", []):
            out.append("".join(o.get("text", "")))
            out += ["".join(v) if isinstance(v, list) else str(v) for v in o.get("data", {}).values()]
    return out


def audit(dest: Path, not_due: list[Chapter]) -> list[str]:
    """Every place in `dest` where an answer of a chapter in `not_due` shows; [] if none."""
    problems = []
    secrets = {}
    known = {ch.topic for ch in all_chapters()}
    orphans = [Chapter(f"99_{p.stem}") for p in REFERENCE.glob("*.py")  # answers of chapters being written
               if p.stem not in known and p.name != "__init__.py"]
    for ch in not_due + orphans:
        answers = [(lines - published_lines(lines), need) for lines, need in answer_lines(ch)]
        secrets[ch.id] = [(lines, need) for lines, need in answers if len(lines) >= need]
    for ch in not_due:
        module = dest / "course" / "reference" / f"{ch.topic}.py"
        if module.exists() and module.read_text() != standins.shim(ch.topic):
            problems.append(f"course/reference/{ch.topic}.py: the reference answers of {ch.id}")
    texts: list[tuple[str, str]] = []
    for path in sorted(dest.rglob("*")):
        rel = path.relative_to(dest)
        if rel.parts[0] == ".git" or not path.is_file():
            continue
        if rel.parts[0] in ("solutions", "tests") or path.suffix == ".pyc":
            problems.append(f"{rel}: must not be published")
        if rel.parts[:2] == ("course", "checks") and rel.name != "__init__.py":
            problems.append(f"{rel}: the checks' oracles must not be published")
        texts += [(str(rel), t) for t in _texts(path)]
    if (dest / ".git").is_dir():  # every version ever committed, not just the last
        log = _git(dest, "log", "--all", "-p", "--format=commit %H").stdout
        for chunk in log.split("\ndiff --git a/")[1:]:
            texts.append((f"git history of {chunk.split(' b/', 1)[0]}", chunk))
    for where, text in texts:
        for marker in (HIDDEN_BEGIN, SOLUTION_BEGIN):  # the grader's own code names them; a notebook must not
            if marker in text and where.endswith(".ipynb"):
                problems.append(f"{where}: holds {marker!r}")
        for chapter, answers in secrets.items():
            for lines, need in answers:
                hits = sorted(ln for ln in lines if ln in text)
                if len(hits) >= need:
                    problems.append(f"{where}: {len(hits)} line(s) of an answer of {chapter}, e.g. {hits[0][:60]!r}")
    return list(dict.fromkeys(problems))


def parse_when(value: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(value)
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


__all__ = ["answer_lines", "audit", "build_edition", "parse_when", "published_lines"]
