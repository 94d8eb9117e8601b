"""What a grade depends on: the course's grading secret, each chapter's
limits, and the digests that decide what a second run grades again."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import sandbox
from autograder.chapters import ROOT, all_chapters, get_chapter, oracle_files, sandbox_files
from autograder.course_folder import Course
from autograder.fingerprint import GRADER_FILES, judging_digest
from autograder.limits import (
    BUDGET_MULTIPLE,
    BUDGET_START_SECONDS,
    REFERENCE_SECONDS_FILE,
    Limits,
    chapter_limits,
    limits_from_metadata,
    notebook_budget,
)
from autograder.nbconfig import nbgrader_config, write_config
from autograder.secret import course_secret, default_secret_path
from course import standins
from course.protocol import CONFIG_FILE, JUPYTER_DIR, PROBE_DIRNAME, SECRET_ENV
from mutants.introduction import MUTANTS
from submissions import mutated, solved, write

CH = get_chapter("00_introduction")


# ---------------------------------------------------------------- secret ---

def test_secret_is_made_once_private_and_kept(tmp_path, capsys):
    path = tmp_path / "config" / "grading-secret"
    assert course_secret(path) == path
    first = path.read_bytes()
    assert len(first) >= 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert str(path) in capsys.readouterr().err
    assert course_secret(path) == path and path.read_bytes() == first
    assert capsys.readouterr().err == ""


def test_secret_location_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, str(tmp_path / "s"))
    assert default_secret_path() == tmp_path / "s"
    monkeypatch.delenv(SECRET_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert default_secret_path() == tmp_path / "xdg" / "transformer-course" / "grading-secret"


def test_empty_secret_is_refused(tmp_path):
    (tmp_path / "empty").touch()
    with pytest.raises(SystemExit, match="not a file with a secret"):
        course_secret(tmp_path / "empty")


# ---------------------------------------------------------------- limits ---

def test_limits_default_to_the_sandbox_and_come_from_notebook_metadata():
    assert limits_from_metadata({}) == Limits(sandbox.CELL_SECONDS, sandbox.WALL_SECONDS, sandbox.MEMORY_BYTES)
    own = limits_from_metadata({"course": {"grading": {"wall_seconds": 3600, "memory_bytes": 2**34}}})
    assert own == Limits(sandbox.CELL_SECONDS, 3600, 2**34)


@pytest.mark.parametrize("grading", [{"wall_second": 5}, {"cell_seconds": 0}, {"cell_seconds": 1.5},
                                     {"memory_bytes": True}, [1, 2]])
def test_malformed_limits_are_refused(grading):
    with pytest.raises(ValueError):
        limits_from_metadata({"course": {"grading": grading}})


def test_command_line_time_limits_override_the_chapters():
    budget = notebook_budget(CH)
    assert chapter_limits(CH) == Limits(notebook_seconds=budget)  # chapter 0 keeps the defaults
    assert chapter_limits(CH, cell_seconds=7) == Limits(cell_seconds=7, test_cell_seconds=7,  # never above a cell's
                                                        notebook_seconds=budget)
    assert chapter_limits(CH, 70, 700) == Limits(70, 700, notebook_seconds=budget)
    assert chapter_limits(CH, 7, 30) == Limits(7, 30, test_cell_seconds=7, notebook_seconds=30)  # nor the wall's


def test_a_notebooks_budget_is_a_multiple_of_its_references_recorded_time_plus_a_start():
    recorded = json.loads(REFERENCE_SECONDS_FILE.read_text())
    assert set(recorded) == {ch.id for ch in all_chapters()}, "record every chapter's reference time"
    for ch in all_chapters():
        assert notebook_budget(ch) == BUDGET_START_SECONDS + math.ceil(BUDGET_MULTIPLE * recorded[ch.id])
    own = limits_from_metadata({"course": {"grading": {"notebook_seconds": 99}}})
    assert own.notebook_seconds == 99  # a chapter may set its own


def test_limits_reach_nbgrader_and_the_sandbox(tmp_path):
    limits = Limits(cell_seconds=11, wall_seconds=1234, memory_bytes=3 * 2**30, test_cell_seconds=9,
                    notebook_seconds=77)
    course = Course(tmp_path, CH)
    kernel = course.write_kernelspec(use_sandbox=True, limits=limits, published=set())
    argv = json.loads((course.root / JUPYTER_DIR / "kernels" / kernel / "kernel.json").read_text())["argv"]
    assert argv[argv.index("--wall") + 1] == "1234" and argv[argv.index("--memory") + 1] == str(3 * 2**30)
    write_config(course.root, nbgrader_config(course.root, tmp_path / "secret", kernel, limits))
    config = json.loads((course.root / CONFIG_FILE).read_text())
    assert config["Execute"]["timeout"] == 11 and config["GuardedExecute"]["wall_seconds"] == 1234
    assert config["GuardedExecute"]["test_cell_seconds"] == 9 and config["GuardedExecute"]["notebook_seconds"] == 77
    assert config["GuardedExecute"]["kernel_name"] == kernel
    assert config["PrepareProbes"]["secret_file"] == config["JudgeChecks"]["secret_file"] == str(tmp_path / "secret")


# --------------------------------------------------------------- digests ---

def test_a_chapter_sandbox_holds_the_published_answers_stand_ins_for_the_others_and_no_oracle():
    ch = get_chapter("07_feed_forward")
    course = Path("course")
    for published in (set(), {"04_attention", "06_add_norm"}, {c.id for c in all_chapters()}):
        files = sandbox_files(ch, published)
        assert {p.relative_to(ROOT) for p in (ROOT / course / "probing").rglob("*.py")} <= set(files)
        assert {course / "protocol.py", course / "checks" / "__init__.py", course / "standins" / "attention.py"} \
            <= set(files)
        assert not set(files) & {p.relative_to(ROOT) for p in oracle_files()}
        for other in all_chapters():
            module = other.reference_module.relative_to(ROOT)
            if other.number >= ch.number:
                assert module not in files, other.id
            elif other.id in published:
                assert files[module] == other.reference_module.read_bytes(), other.id
            elif other.topic in standins.topics():
                assert files[module] == standins.shim(other.topic).encode(), other.id
            else:
                assert module not in files, other.id
    assert {f.name for f in GRADER_FILES} >= {"judge.py", "execute.py"}


def test_judging_digest_changes_with_the_files_and_the_limits(tmp_path, monkeypatch):
    import autograder.fingerprint as fingerprint

    copy = tmp_path / "course" / "checks" / "framework.py"
    copy.parent.mkdir(parents=True)
    copy.write_text("x = 1\n")
    monkeypatch.setattr(fingerprint, "ROOT", tmp_path)
    monkeypatch.setattr(fingerprint, "GRADER_FILES", [])
    monkeypatch.setattr(fingerprint, "sandbox_files", lambda ch, published: {Path("course/checks/framework.py"):
                                                                            copy.read_bytes()})
    monkeypatch.setattr(fingerprint, "oracle_files", lambda: [])
    before = judging_digest(CH, Limits())
    assert judging_digest(CH, Limits()) == before
    assert judging_digest(CH, Limits(memory_bytes=2**33)) != before
    copy.write_text("x = 2\n")
    assert judging_digest(CH, Limits()) != before


# ------------------------------------------------ same class, same grades ---

def _grade(subs, out, *extra: str, env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(out), *extra],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_grading_the_same_class_into_two_folders_gives_the_same_grades(tmp_path):
    from course.checks.framework import get_check, seed_for, submission_code

    subs, secret = tmp_path / "submitted", tmp_path / "instructor" / "grading-secret"
    students = {"solution": solved(CH), "bias-forgotten": mutated(CH, MUTANTS[0]),
                "stub": nbformat.read(CH.student, as_version=4)}
    for student, nb in students.items():
        write(nb, subs, student, CH)
    env = {k: v for k, v in os.environ.items() if k != SECRET_ENV}

    # out1 lies deep: its sockets' paths would pass the Unix limit of 107 bytes (kernel_socket_folder)
    deep = tmp_path / ("a-deep-folder-" * 8) / "out1"
    first = _grade(subs, deep, env={**env, SECRET_ENV: str(secret)})  # the course's default secret
    (tmp_path / "out1").symlink_to(deep)
    assert f"created the course's grading secret: {secret}" in first.stderr
    second = _grade(subs, tmp_path / "out2", "--secret", str(secret), env=env)
    assert "grading secret" not in second.stderr
    # every run says which secret it used, and where it was told of it
    assert f"grading secret: {secret} (from ${SECRET_ENV}, made " in first.stdout
    assert f"grading secret: {secret} (from --secret, made " in second.stdout

    grades = (tmp_path / "out1" / "grades.csv").read_text()
    assert grades.count(",graded") == len(students), grades  # every notebook graded, not failed alike
    for name in ("grades.csv", "exercises.csv"):
        assert (tmp_path / "out1" / name).read_text() == (tmp_path / "out2" / name).read_text(), name
    for student in students:  # the same verdicts, and the probe folder removed once read
        folders = [tmp_path / out / "nbgrader" / "autograded" / student / CH.id for out in ("out1", "out2")]
        assert _verdicts(folders[0]) == _verdicts(folders[1]), student
        assert not any((f / PROBE_DIRNAME).exists() for f in folders), student
    # the hidden cases were drawn from the course's secret: the failed ones shown are among them
    graded_nb = nbformat.read(
        tmp_path / "out1" / "nbgrader" / "autograded" / "bias-forgotten" / CH.id / f"{CH.id}.ipynb", 4)
    seed = seed_for(secret.read_bytes(), "bias-forgotten", CH.id, submission_code(graded_nb.cells))
    drawn = get_check("introduction.linear_rows").make_cases(True, seed)
    report = _verdicts(tmp_path / "out1" / "nbgrader" / "autograded" / "bias-forgotten" / CH.id)
    shown = re.findall(r"case '([^']*)'", report[report.index("hidden cases failed"):])
    assert shown and set(shown) <= {c.label for c in drawn}, (shown, [c.label for c in drawn])


def _verdicts(folder) -> str:
    """The judge's reports in a graded notebook's test cells."""
    nb = nbformat.read(folder / f"{CH.id}.ipynb", as_version=4)
    return "".join(out.get("text", "") for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
                   for out in c.get("outputs", []))


def test_kernel_sockets_get_a_short_folder_when_the_course_folder_is_deep(tmp_path):
    from autograder.execute import MAX_SOCKET_PATH, kernel_socket_folder

    short = kernel_socket_folder(tmp_path / "s")
    assert short.parent == tmp_path / "s"
    deep = tmp_path / ("x" * 60) / ("y" * 60)
    fallback = kernel_socket_folder(deep)
    assert fallback.parent != deep and len(str(fallback / "k-65535")) <= MAX_SOCKET_PATH
    assert fallback.stat().st_mode & 0o777 == 0o700  # private, as mkdtemp makes it
    fallback.rmdir()


def test_test_cells_get_their_own_shorter_timeout():
    from nbformat.v4 import new_code_cell

    from autograder.execute import GuardedExecute

    def cell(**grading):
        return new_code_cell("pass", metadata={"nbgrader": grading} if grading else {})

    run = GuardedExecute(timeout=60, test_cell_seconds=5)
    assert run._get_timeout(cell(grade=True, solution=False, points=1)) == 5  # an autograder test cell
    assert run._get_timeout(cell(grade=True, solution=True, points=1)) == 60  # an answer cell
    assert run._get_timeout(cell()) == 60
    assert GuardedExecute(timeout=3, test_cell_seconds=5)._get_timeout(cell(grade=True, solution=False)) == 3
