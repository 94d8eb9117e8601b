"""Manual grading: nbgrader's formgrader on the course folder `grade` wrote,
and what is graded or adjusted there reaching grades.csv, the LMS files and
the feedback."""

import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from mutants.introduction import MUTANTS
from submissions import mutated, solved, write

from autograder import sandbox
from autograder.chapters import get_chapter
from autograder.gradebook import open_gradebook
from autograder.manual import formgrader_command
from course.protocol import CONFIG_FILE

CH = get_chapter("00_introduction")
TEST, WRITTEN = "test-linear-rows", "written-why-rows"  # chapter 0's test cell, and its written answer
NOBODY = 65534  # the normal user the formgrader test runs as, when the tests run as root


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_formgrader_needs_a_graded_course(tmp_path):
    with pytest.raises(SystemExit, match="run `python -m autograder grade"):
        formgrader_command(tmp_path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as(user: int) -> list[str]:
    """The command prefix that runs a command as the uid (and gid) `user`."""
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]


def _formgrader_answers(out: Path, user: int | None) -> tuple[int, str]:
    """Start `formgrader OUT`'s command (as the uid `user`, or as this process), headless; return the
    HTTP status of its Formgrader page once the server answers, and its log, once stopped."""
    port, token = _free_port(), "formgrader-test"
    argv, cwd, env = formgrader_command(out, port)
    env = {**os.environ, **env, "JUPYTER_TOKEN": token, "HOME": str(out), "JUPYTER_CONFIG_DIR": str(out / "cfg"),
           "JUPYTER_DATA_DIR": str(out / "data"), "JUPYTER_RUNTIME_DIR": str(out / "run")}
    if user is not None:
        argv = [*_as(user), *argv]
    server = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(240):
            if server.poll() is not None:
                pytest.fail(f"the formgrader exited: {server.stderr.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/formgrader?token={token}", timeout=5) as page:
                    status = page.status
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.25)
        else:
            pytest.fail("the formgrader did not answer within a minute")
    finally:
        server.terminate()
        server.wait(timeout=30)
    return status, server.stderr.read().decode()


@pytest.mark.parametrize("who", ["root", "a normal user"])
def test_formgrader_starts_as_root_and_as_a_normal_user(tmp_path, who):
    """README's step 6 as root (JupyterLab refuses root without --allow-root) and as anyone else."""
    if who == "root" and os.geteuid() != 0:
        pytest.skip("not root")
    user = NOBODY if who == "a normal user" and os.geteuid() == 0 else None
    if user is not None and subprocess.run([*_as(user), sys.executable, "-m", "jupyter", "lab", "--version"],
                                           capture_output=True, cwd="/").returncode:
        pytest.skip(f"uid {user} cannot run JupyterLab from {sys.executable} (a Python installed in root's home)")
    out = Path(tempfile.mkdtemp(prefix="formgrader-"))  # pytest's tmp_path is private to root
    try:
        root = out / "nbgrader"
        root.mkdir()
        open_gradebook(f"sqlite:///{root / 'gradebook.db'}").close()
        (root / CONFIG_FILE).write_text(json.dumps({"CourseDirectory": {"root": str(root)}}))
        if user is not None:
            subprocess.run(["chown", "-R", f"{user}:{user}", str(out)], check=True)
        status, log = _formgrader_answers(out, user)
        assert status == 200 and "No nbgrader_config.py" not in log, log[-3000:]
    finally:
        shutil.rmtree(out, ignore_errors=True)


@pytest.mark.slow
def test_manual_grades_reach_grades_csv_the_lms_and_the_feedback(tmp_path):
    from nbgrader.api import Gradebook

    subs, out, secret = tmp_path / "submitted", tmp_path / "out", tmp_path / "secret"
    write(solved(CH), subs, "1001", CH)
    write(mutated(CH, MUTANTS[0]), subs, "1002", CH)
    run = [sys.executable, "-m", "autograder"]
    safety = [] if sandbox.available() is None else ["--unsafe-no-sandbox"]
    grade = [*run, "grade", str(subs), "--out", str(out), "--secret", str(secret), *safety]
    subprocess.run(grade, check=True, capture_output=True, timeout=600)
    before = {r["student_id"]: r for r in _rows(out / "grades.csv")}
    top = float(before["1001"]["max_score"])
    assert float(before["1002"]["score"]) < float(before["1001"]["score"]) == top - 1  # the written point waits
    assert {r["status"] for r in before.values()} == {"graded (awaits manual grading)"}

    argv, folder, env = formgrader_command(out)
    assert folder == out / "nbgrader" and "lab" in argv
    assert json.loads((folder / CONFIG_FILE).read_text())["CourseDirectory"]["root"] == str(folder)
    assert env["JUPYTER_PATH"].startswith(str(folder))

    # What the formgrader's Manual Grading view stores, through nbgrader's own API: both written
    # answers graded, 1002's test cell overridden, extra credit for 1001.
    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as gb:
        for student in ("1001", "1002"):
            written = gb.find_grade(WRITTEN, CH.id, CH.id, student)
            written.manual_score, written.needs_manual_grade = written.max_score, False
        grade_cell = gb.find_grade(TEST, CH.id, CH.id, "1002")
        grade_cell.manual_score, grade_cell.needs_manual_grade = grade_cell.max_score, False
        cell_name, cell_max = grade_cell.name, grade_cell.max_score
        comment = gb.find_submission(CH.id, "1002").notebooks[0].comments[0]
        comment.manual_comment = "Accepted by hand: the bias is added further down."
        gb.find_grade(TEST, CH.id, CH.id, "1001").extra_credit = 0.5
        gb.db.commit()

    subprocess.run([*run, "export", str(out), "--lms", "canvas", "--chapter", CH.id], check=True,
                   capture_output=True)
    after = {r["student_id"]: r for r in _rows(out / "grades.csv")}
    assert float(after["1002"]["score"]) == top and after["1002"]["status"] == "graded (graded by hand)"
    assert float(after["1001"]["score"]) == top + 0.5 and after["1001"]["status"] == "graded (graded by hand)"
    with open(out / "lms" / "canvas.csv", newline="") as f:
        canvas = list(csv.reader(f))
    assert {line[1]: float(line[5]) for line in canvas[2:]} == {"1001": top + 0.5, "1002": top}
    exercises = {(r["student_id"], r["grade_id"]): float(r["score"]) for r in _rows(out / "exercises.csv")}
    assert exercises[("1002", cell_name)] == cell_max

    # Grading again runs no notebook, keeps the manual grades, and gives the comment back as feedback.
    again = subprocess.run(grade, check=True, capture_output=True, text=True, timeout=600)
    assert "0 notebook(s) run" in again.stdout
    assert {r["student_id"]: r["score"] for r in _rows(out / "grades.csv")} == \
        {s: r["score"] for s, r in after.items()}
    html = (out / "feedback" / "1002" / CH.id / f"{CH.id}.html").read_text()
    assert "Accepted by hand" in html


@pytest.mark.slow
def test_a_written_answer_awaits_manual_grading_then_counts(tmp_path):
    """Chapter 0's written answer (nbgrader: a markdown cell with solution and grade): released
    without its model answer, graded as "awaits manual grading" (grades.csv and the report), then by hand."""
    import nbformat
    from nbgrader.api import Gradebook

    from autograder.grade import grade
    from autograder.lms import export
    from autograder.report import WRITTEN_PENDING

    (released,) = [c for c in nbformat.read(CH.student, as_version=4).cells
                   if c.metadata.get("nbgrader", {}).get("grade_id") == WRITTEN]
    assert released.source == "YOUR ANSWER HERE"  # the release holds no answer
    student = solved(CH)
    next(c for c in student.cells if c.metadata.get("nbgrader", {}).get("grade_id") == WRITTEN).source = \
        "Because x holds one example per row."
    write(student, tmp_path / "submitted", "1001", CH)
    out = tmp_path / "out"
    grade(tmp_path / "submitted", out, use_sandbox=sandbox.available() is None, secret=tmp_path / "secret")
    (row,) = _rows(out / "grades.csv")
    top = float(row["max_score"])
    assert (float(row["score"]), row["status"]) == (top - 1, "graded (awaits manual grading)")
    (report,) = [r for r in _rows(out / "report" / "exercises.csv") if r["grade_id"] == WRITTEN]
    assert report["most_common_failure"] == WRITTEN_PENDING

    with Gradebook(f"sqlite:///{out / 'nbgrader' / 'gradebook.db'}") as gb:  # as formgrader's GradeHandler.put
        written = gb.find_grade(WRITTEN, CH.id, CH.id, "1001")
        written.manual_score, written.needs_manual_grade = 1.0, False
        gb.db.commit()
    export(out, "moodle", chapters=[CH.id])
    (row,) = _rows(out / "grades.csv")
    assert (float(row["score"]), row["status"]) == (top, "graded (graded by hand)")
    assert _rows(out / "lms" / "moodle" / f"{CH.id}.csv")[0]["Grade"] == f"{top:g}"
