"""`python -m autograder edition`: the student edition holds no answer of a
chapter that is not yet due, wherever an answer could hide, and still works."""

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from submissions import lean, solution_sources, solved, write

from autograder import edition
from autograder.chapters import ROOT, all_chapters, get_chapter
from autograder.release import exported_code
from autograder.schedule import Schedule
from course import standins
from course.cells import imports

UTC = dt.timezone.utc
ANSWER = re.compile(r"### BEGIN SOLUTION\n(.*?)\n[ \t]*### END SOLUTION", re.DOTALL)
CHAPTERS = [ch for ch in all_chapters() if ch.student.is_file()]
WEEK = dt.timedelta(days=7)
START = dt.datetime(2026, 9, 21, 23, 59, tzinfo=UTC)
SCHEDULE = Schedule(due={ch.id: START + i * WEEK for i, ch in enumerate(CHAPTERS)},
                    extensions={("1001", CHAPTERS[2].id): dt.timedelta(days=2)})
NOW = START + 2 * WEEK + dt.timedelta(days=3)  # chapters 0, 1 due; 2 due but extended for 1001 until +2 days


def files(root):
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)


#: one worker runs this module, so its module fixture is made once (`make test` runs two)
pytestmark = pytest.mark.xdist_group("edition")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    dest = tmp_path_factory.mktemp("edition") / "student-edition"
    due = edition.build_edition(dest, NOW, url="https://example.org/class/edition", git=True, schedule=SCHEDULE)
    return dest, due


def test_answers_only_of_the_chapters_already_due(built):
    """The reference modules of the chapters due; for a later chapter with a stand-in, its shim."""
    dest, due = built
    assert due == [ch.id for ch in CHAPTERS[:3]]
    stood_in = [ch for ch in CHAPTERS[3:] if ch.topic in standins.topics()]
    refs = sorted(p.name for p in (dest / "course" / "reference").glob("*.py"))
    assert refs == sorted(["__init__.py"] + [f"{ch.topic}.py" for ch in CHAPTERS[:3] + stood_in])
    for ch in CHAPTERS[:3]:
        assert (dest / "course" / "reference" / f"{ch.topic}.py").read_text() == ch.reference_module.read_text()
    for ch in stood_in:
        assert (dest / "course" / "reference" / f"{ch.topic}.py").read_text() == standins.shim(ch.topic)


def test_no_answer_of_a_chapter_not_yet_due_anywhere(built):
    dest, _ = built
    assert edition.audit(dest, CHAPTERS[3:]) == []
    tops = {p.parts[0] for p in files(dest)}
    assert not tops & {"solutions", "tests", "benchmarks", "_build"}, tops
    assert not [p for p in files(dest) if p.suffix == ".pyc" or "__pycache__" in p.parts]
    # No oracle is published: of the checks only the `check` a notebook imports; a student's own run
    # judges against the visible answers (course/visible/), which are data.
    assert [p for p in files(dest) if p.parts[:2] == ("course", "checks")] == [Path("course/checks/__init__.py")]
    assert {p.name for p in (dest / "course" / "visible").iterdir()} == {f"{c.topic}.json" for c in CHAPTERS}
    everything = "\n".join((dest / p).read_text(errors="ignore") for p in files(dest))
    history = subprocess.run(["git", "log", "--all", "-p"], cwd=dest, capture_output=True, text=True,
                             check=True).stdout
    for ch in CHAPTERS[3:]:  # independently of the audit: no answer (between the markers) anywhere
        for cell in nbformat.read(ch.solution, as_version=4).cells:
            for block in ANSWER.findall(cell.source):
                body = textwrap.dedent(block).strip()
                assert body not in everything and body not in history, (ch.id, body[:80])
        code = exported_code(nbformat.read(ch.solution, as_version=4)).strip()
        assert code not in everything
    for nb in (dest / "chapters").rglob("*.ipynb"):
        assert "BEGIN HIDDEN TESTS" not in nb.read_text() and "BEGIN SOLUTION" not in nb.read_text()


def test_published_schedule_and_settings(built):
    dest, _ = built
    schedule = (dest / "schedule.yml").read_text()
    assert "1001" not in schedule and "extensions" not in schedule  # extensions name students
    assert CHAPTERS[0].id in schedule
    config = (dest / "_config.yml").read_text()
    assert "https://example.org/class/edition" in config
    assert all(f"chapters/{ch.id}/*" in config for ch in CHAPTERS[3:])
    setup = nbformat.read(dest / CHAPTERS[0].student.relative_to(ROOT), as_version=4).cells[0].source
    assert "git+https://example.org/class/edition" in setup


def test_the_editions_readme_is_for_students(built):
    """README's instructor sections (the term, the grader, a layout naming solutions/ and tests/) stay out."""
    dest, _ = built
    readme = (dest / "README.md").read_text()
    assert re.findall(r"(?m)^## (.*)", readme) == ["Set-up", "Chapters", "For readers", "For students", "Citations"]
    assert "python -m autograder check" in readme and "make SYSTEM_PACKAGES= book" in readme
    assert not any(w in readme for w in ("For instructors", "grading secret", "solutions/", "make test"))


def test_the_editions_package_holds_no_oracle_and_checks_a_student_all_the_same(built, tmp_path):
    """In the edition's own `course` package, importing the checks' trusted side fails, and a test
    cell's visible checks still judge a student's answer (against the released visible answers)."""
    dest, _ = built
    script = textwrap.dedent("""\
        import importlib
        from course.checks import check
        from course.reference.introduction import linear_rows
        for name in ("course.checks.framework", "course.checks.attention", "course.checks.tokenizing._oracles"):
            try:
                importlib.import_module(name)
            except ImportError:
                print("no", name)
        check("introduction.linear_rows", linear_rows)
        try:
            check("introduction.linear_rows", lambda x, W, b: x @ W)
        except AssertionError:
            print("wrong answer caught")
        """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(dest)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("no course.checks.") == 3, proc.stdout
    assert "✓ introduction.linear_rows" in proc.stdout and "Did you forget to add the bias b?" in proc.stdout
    assert "wrong answer caught" in proc.stdout


@pytest.mark.parametrize(("plant", "found"), [("solution", "notes/"), ("reference", "course/reference/"),
                                              ("mutant", "course/helpers.py"), ("output", "chapters/"),
                                              ("history", "git history of leak.py"), ("pyc", ".pyc"),
                                              ("oracle", "course/checks/tokenizing/_oracles.py")])
def test_the_audit_finds_a_planted_answer(built, tmp_path, plant, found):
    """The audit is what `edition` runs before it finishes: it must find each kind of leak."""
    src, _ = built
    dest = tmp_path / "copy"
    shutil.copytree(src, dest, symlinks=True)
    ch = CHAPTERS[4]
    answers = solution_sources(ch)
    answer = max(answers.values(), key=len)
    if plant == "solution":
        shutil.copytree(ch.solution.parent, dest / "notes")
    elif plant == "reference":
        shutil.copy(ch.reference_module, dest / "course" / "reference")
    elif plant == "mutant":  # an answer with one line changed, hidden in a helper
        lines = answer.splitlines()
        lines[-1] = lines[-1] + "  # off by one"
        (dest / "course" / "helpers.py").write_text("\n".join(lines) + "\n")
    elif plant == "output":
        nb_path = dest / ch.student.relative_to(ROOT)
        nb = nbformat.read(nb_path, as_version=4)
        code = next(c for c in nb.cells if c.cell_type == "code")
        code.outputs = [nbformat.v4.new_output("stream", name="stdout", text=answer)]
        nbformat.write(nb, nb_path)
    elif plant == "history":  # committed once, deleted since: still in the branch's history
        leak = dest / "leak.py"
        leak.write_text(answer)
        for step in (["add", "leak.py"], ["commit", "-qm", "leak"], ["rm", "-q", "leak.py"], ["commit", "-qm", "gone"]):
            subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *step], cwd=dest, check=True)
    elif plant == "oracle":  # the checks' own answers (chapter 1's BPE oracles, say)
        shutil.copytree(ROOT / "course" / "checks" / "tokenizing", dest / "course" / "checks" / "tokenizing")
    elif plant == "pyc":
        (dest / "course" / "__pycache__").mkdir()
        (dest / "course" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    problems = edition.audit(dest, CHAPTERS[3:])
    assert any(p.startswith(found) or found in p.split(":")[0] for p in problems), problems


def no_answers(dest: Path, topic: str) -> bool:
    """Whether the edition in `dest` holds no answers of `topic`: no reference module, or its stand-in."""
    module = dest / "course" / "reference" / f"{topic}.py"
    return not module.exists() or module.read_text() == standins.shim(topic)


def test_extension_delays_the_answers(tmp_path):
    ch = CHAPTERS[2].id
    assert not SCHEDULE.is_due(ch, SCHEDULE.due[ch] + dt.timedelta(days=1))
    assert SCHEDULE.is_due(ch, SCHEDULE.due[ch] + dt.timedelta(days=2))
    due = edition.build_edition(tmp_path / "e", SCHEDULE.due[ch] + dt.timedelta(days=1), schedule=SCHEDULE)
    assert ch not in due and no_answers(tmp_path / "e", CHAPTERS[2].topic)


def test_next_edition_is_a_new_commit_with_the_next_answers(built, tmp_path):
    src, _ = built
    dest = tmp_path / "edition"
    shutil.copytree(src, dest, symlinks=True)
    later = NOW + WEEK
    due = edition.build_edition(dest, later, git=True, schedule=SCHEDULE)
    assert due == [ch.id for ch in CHAPTERS[:4]]
    log = subprocess.run(["git", "log", "--format=%s"], cwd=dest, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 2
    assert subprocess.run(["git", "status", "--porcelain"], cwd=dest, capture_output=True, text=True,
                          check=True).stdout == ""
    # a day later nothing new is due: no file changes, no commit (a daily cron adds nothing)
    edition.build_edition(dest, later + dt.timedelta(days=1), git=True, schedule=SCHEDULE)
    log = subprocess.run(["git", "log", "--format=%s"], cwd=dest, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 2, log.stdout


def test_new_answers_are_listed_and_published_only_when_confirmed(built, tmp_path, capsys, monkeypatch):
    src, _ = built
    dest = tmp_path / "edition"
    shutil.copytree(src, dest, symlinks=True)
    asked = []
    with pytest.raises(SystemExit, match="not confirmed"):
        edition.build_edition(dest, NOW + WEEK, schedule=SCHEDULE, confirm=lambda new: asked.append(new) or False)
    assert asked == [[CHAPTERS[3].id]]  # only the answers the earlier edition did not hold
    said = capsys.readouterr().out
    assert f"answers of {CHAPTERS[3].id} (due {SCHEDULE.due[CHAPTERS[3].id]:%Y-%m-%d %H:%M} UTC): NEW" in said
    assert f"answers of {CHAPTERS[0].id} (due" in said
    assert f"{CHAPTERS[0].id} (due 2026-09-21 23:59 UTC): NEW" not in said
    extended = SCHEDULE.due[CHAPTERS[2].id] + dt.timedelta(days=2)  # its 2-day extension holds the answers back
    assert (f"answers of {CHAPTERS[2].id} (due {SCHEDULE.due[CHAPTERS[2].id]:%Y-%m-%d %H:%M} UTC, published after "
            f"the longest extension, {extended:%Y-%m-%d %H:%M} UTC)") in said, said
    assert files(dest) == files(src) and no_answers(dest, CHAPTERS[3].topic)
    monkeypatch.setattr(sys, "stdin", open(os.devnull))  # cron: no terminal to ask on, and no --yes
    from autograder.__main__ import confirm_answers
    assert confirm_answers([CHAPTERS[3].id]) is False and "pass --yes" in capsys.readouterr().err


def test_refuses_a_folder_that_is_not_an_edition(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep me")
    with pytest.raises(SystemExit, match="holds no earlier edition"):
        edition.build_edition(tmp_path / "mine", NOW, schedule=SCHEDULE)
    with pytest.raises(SystemExit, match="outside the repository"):
        edition.build_edition(ROOT / "build" / "edition", NOW, schedule=SCHEDULE)
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "keep me"


def test_figures_of_chapters_not_due_are_prerendered(tmp_path, monkeypatch):
    ch = CHAPTERS[-1]
    nb = nbformat.read(ch.student, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "implemented_or_reference" in c.source)
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=",
                                                                  "text/plain": "<Figure>"})]
    built_nb = tmp_path / "jupyter_execute" / "chapters" / ch.id / f"{ch.id}.ipynb"
    built_nb.parent.mkdir(parents=True)
    nbformat.write(nb, built_nb)
    monkeypatch.setattr(edition, "EXECUTED", tmp_path / "jupyter_execute")
    edition.build_edition(tmp_path / "e", NOW, schedule=SCHEDULE)
    got = nbformat.read(tmp_path / "e" / ch.student.relative_to(ROOT), as_version=4)
    same = next(c for c in got.cells if c.get("id") == cell.get("id"))
    assert same.outputs[0]["data"]["image/png"] == "iVBORw0KGgo="


@pytest.mark.slow
def test_self_check_works_in_the_edition(built, tmp_path):
    """A student's self-check runs on the edition's own `course` package."""
    dest, _ = built
    ch = get_chapter("00_introduction")
    path = write(solved(ch), tmp_path, "me", ch)
    env = {**os.environ, "PYTHONPATH": str(dest)}
    proc = subprocess.run([sys.executable, "-m", "autograder", "check", str(path)], cwd=dest, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    probe = ("import course, course.reference.introduction as r; print(course.__file__)\n"
             f"import course.reference.{CHAPTERS[3].topic} as m, inspect; print(inspect.getsource(m) == "
             f"__import__('course.standins').standins.shim({CHAPTERS[3].topic!r}))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0].startswith(str(dest)) and out[1] == "True"
    assert json.loads((dest / ".student-edition").read_text())["answers_of"] == [c.id for c in CHAPTERS[:3]]


RUN_NOTEBOOKS = """
import json, sys, traceback
notebooks = json.loads(sys.stdin.read())
failed = {}
for chapter, cells in notebooks.items():
    namespace = {"__name__": "__main__"}
    for source in cells:
        try:
            exec(compile(source, f"<{chapter}>", "exec"), namespace)
        except BaseException:
            failed[chapter] = traceback.format_exc()[-1500:]
            break
print(json.dumps(failed))
"""


def run_in_edition(dest: Path, chapters: list) -> dict[str, str]:
    """Run each chapter's solved notebook (answers, imports and test cells: its demonstrations left
    out) in one Python whose `course` is the edition's package; {chapter: the traceback} of those
    that failed. A test cell raises when a visible check fails, as in Jupyter."""
    notebooks = {ch.id: [c.source for c in lean(solved(ch)).cells if c.cell_type == "code"][1:]  # no setup cell
                 for ch in chapters}
    env = {**os.environ, "PYTHONPATH": str(dest)}
    env.pop("COURSE_PROBE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", RUN_NOTEBOOKS], input=json.dumps(notebooks), cwd=dest.parent,
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.slow
def test_every_chapter_runs_in_the_edition_whatever_is_due(built, tmp_path):
    """Every chapter's solved notebook passes its visible checks inside the edition's own package,
    early in the term (chapters 0-2 due: later chapters import stand-ins of 3-10) and half-way (0-6 due),
    and `course.learner` collects and judges the solved notebooks there."""
    dest, _ = built
    assert run_in_edition(dest, CHAPTERS) == {}
    middle = tmp_path / "middle"
    edition.build_edition(middle, START + 6 * WEEK + dt.timedelta(days=3), schedule=SCHEDULE)
    assert run_in_edition(middle, CHAPTERS[7:]) == {}
    notebooks = tmp_path / "notebooks"
    for ch in CHAPTERS:
        write(solved(ch), notebooks, "me", ch)
    learner = ("from course.learner import collect, learner_parts\n"
               f"collect({str(notebooks)!r}, {str(tmp_path / 'mine')!r})\n"
               f"parts = learner_parts({str(tmp_path / 'mine')!r})\n"
               "print(sorted(set(parts.owners.values())))")
    env = {**os.environ, "PYTHONPATH": str(dest)}
    proc = subprocess.run([sys.executable, "-c", learner], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == "['yours']", proc.stdout + proc.stderr


IMPORT_EVERY_MODULE = """
import importlib, json, sys, traceback
failed = {}
for chapter, modules in json.loads(sys.stdin.read()).items():
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:
            failed[f"{chapter}: {name}"] = traceback.format_exc().strip().splitlines()[-1]
print(json.dumps(failed))
"""


def notebook_imports(ch) -> list[str]:
    """The `course` modules a chapter's released notebook imports, demonstrations included."""
    return sorted({module for cell in nbformat.read(ch.student, as_version=4).cells if cell.cell_type == "code"
                   for module, _ in imports(cell.source) if module.startswith("course")})


def test_every_module_a_notebook_imports_is_in_the_edition_at_every_point_of_the_term(tmp_path):
    """Before the first due date and after each one, every `course` module any chapter's notebook imports,
    its demonstrations' too, imports inside the edition's own package: the trusted side of the checks
    never, the answers of a chapter not yet due only as its stand-in (chapter 10's corpus reads text with
    chapter 1's tokenizer, due weeks before)."""
    wanted = json.dumps({ch.id: notebook_imports(ch) for ch in CHAPTERS})
    failed = {}
    for k, when in enumerate([START - dt.timedelta(days=1), *(SCHEDULE.due[ch.id] + dt.timedelta(hours=1)
                                                            for ch in CHAPTERS)]):
        dest = tmp_path / f"edition-{k}"
        edition.build_edition(dest, when, schedule=SCHEDULE)
        proc = subprocess.run([sys.executable, "-c", IMPORT_EVERY_MODULE], input=wanted, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(dest)}, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        failed.update({f"{when:%Y-%m-%d}, {name}": why for name, why in json.loads(proc.stdout).items()})
        shutil.rmtree(dest)
    assert failed == {}


def test_a_piece_of_a_chapter_not_yet_due_says_so(built, tmp_path):
    """Early in the term chapter 10's model needs chapter 8's Decoder, which the edition does not hold yet:
    building it says which chapter's answer is missing and what to do, not a bare ModuleNotFoundError."""
    dest, _ = built
    probe = ("from course.models import DecoderLM, DecoderLMConfig\n"
             "try:\n    DecoderLM(DecoderLMConfig(vocab_size=10))\n"
             "except AttributeError as err:\n    print(err)\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(dest)},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Decoder is an answer of the chapter on decoder" in out.stdout and "once it is due" in out.stdout


def test_the_edition_names_the_cells_that_wait_for_a_chapter_without_stand_in(tmp_path, capsys):
    """Before any due date, chapter 10's library asks for chapter 8's and 9's pieces and chapter 11's for
    chapter 10's, which have no stand-in: `edition` names them, chapter by chapter; once chapter 10 is due,
    nothing waits."""
    edition.build_edition(tmp_path / "early", START - dt.timedelta(days=1), schedule=SCHEDULE)
    said = capsys.readouterr().out
    assert ("10_training: its notebook's library uses Decoder, Transformer, causal_mask (08_decoder); "
            "OutputProjection, beam_search, greedy_decode (09_decoding), which this edition does not hold") in said
    assert "11_modern: its notebook's library uses cross_entropy, evaluate, lr_at, train_step (10_training)" in said
    late = SCHEDULE.due[CHAPTERS[10].id] + dt.timedelta(hours=1)
    edition.build_edition(tmp_path / "late", late, schedule=SCHEDULE)
    assert "does not hold" not in capsys.readouterr().out
