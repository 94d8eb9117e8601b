"""The hostile-submission suite: the real grader, the real sandbox.

Every case of `hostile.cases` (attacks, broken notebooks, runaway kernels,
plus honest students) is one student of ONE batch, graded by ONE
``python -m autograder grade`` run with short limits; each test then checks
one property of the result. Re-running and killing-then-re-running work on
a copy of that batch's output.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from autograder import sandbox
from autograder.chapters import ROOT
from autograder.course_folder import is_finished
from autograder.manual import formgrader_command
from autograder.nbgrader_commands import nbgrader_env
from course.protocol import JUPYTER_DIR, STATUS_DIR, kernel_name, status_name
from hostile.cases import (CASES, CELL_TIMEOUT, CH, HONEST, ORACLE_MODULES, PLANTED, STUBBORN, WALL_TIMEOUT, Paths,
                          write_batch)
from test_grading import grade_cells

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hostile"), pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: only then does each kernel get a uid and a process limit of its own "
                              "(the batch holds a fork bomb)")]
CANARY = "nothing may write here\n"
REFERENCE_LINE = "return x @ W + b"  # the solution's answer line
#: the isolation probe's findings that are not attempts, and the attempts the sandbox allows
PROBE_FACTS = {"uid", "processes", "limits"}
PROBE_ALLOWED = {"write own folder", "write /tmp", "write /dev/shm"}


@dataclass
class Batch:
    submissions: Path
    paths: Paths
    rows: dict[str, dict]
    stdout: str


def grade_command(submissions: Path, out: Path) -> list[str]:
    """`grade` with the batch's short limits, and the grading secret kept in
    the course folder, where the attacks in `hostile.cases` look for it."""
    return [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
            "--secret", str(out / "nbgrader" / ".grading-secret"),
            "--cell-timeout", str(CELL_TIMEOUT), "--wall-timeout", str(WALL_TIMEOUT)]


def run_grade(submissions: Path, out: Path, *extra: str, env: dict | None = None,
              check: bool = True) -> subprocess.CompletedProcess:
    command = [*grade_command(submissions, out), *extra]
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def read_rows(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len({r["student_id"] for r in rows}), "a student has two rows"
    return {r["student_id"]: r for r in rows}


def kernel_processes(out: Path) -> list[str]:
    """Sandboxed processes (a sandbox uid) whose mounts come from `out`."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            status = (proc / "status").read_text()
            uid = int(next(ln for ln in status.splitlines() if ln.startswith("Uid:")).split()[1])
            if uid in sandbox.UID_RANGE and str(out) in (proc / "mountinfo").read_text():
                found.append(f"{proc.name}: {(proc / 'cmdline').read_bytes()[:80]!r}")
        except (OSError, StopIteration):
            continue  # gone meanwhile
    return found


def listening_below_the_ephemeral_ports() -> socket.socket:
    """A TCP listener on 127.0.0.1 at a port below the ephemeral range. The sandbox's connect to the
    grader's port picks its own source port from that range: at an ephemeral port, the one time in
    some 28,000 that it picked the same number, Linux's TCP self-connect made the attempt succeed
    inside the sandbox's own loopback (seen once in CI), although nothing listens there."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for port in range(low - 1, 1024, -1):
        try:
            return socket.create_server(("127.0.0.1", port))
        except OSError:  # taken
            continue
    raise RuntimeError("no free port below the ephemeral range")


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> Batch:
    base = tmp_path_factory.mktemp("hostile")
    with listening_below_the_ephemeral_ports() as listener:  # a live port the sandbox must not reach
        paths = Paths(out=base / "out", canary=base / "canary.txt", port=listener.getsockname()[1])
        paths.canary.write_text(CANARY)
        write_batch(base / "submitted", paths)
        start = time.monotonic()
        proc = run_grade(base / "submitted", paths.out)
        print(f"\nhostile batch: {len(CASES)} submissions graded in {time.monotonic() - start:.0f} s")
    return Batch(base / "submitted", paths, read_rows(paths.out), proc.stdout)


def status_note(batch: Batch, student: str) -> dict:
    return json.loads((batch.paths.course / STATUS_DIR / status_name(student, CH.id)).read_text())


def printed(batch: Batch, student: str, label: str) -> str:
    """What a student's cell printed after `label` (the graded notebook is all that outlives a kernel)."""
    nb = nbformat.read(batch.paths.autograded(student) / f"{CH.id}.ipynb", as_version=4)
    for cell in nb.cells:
        # one print can arrive as several stream outputs ("processes:", then " 41\n") when the kernel's
        # output thread flushes between its writes, as it did on a loaded CI machine: join them first
        text = "".join(out.get("text", "") for out in cell.get("outputs", []) if out.get("name") == "stdout")
        for line in text.splitlines():
            if line.startswith(label):
                return line[len(label):].strip()
    raise AssertionError(f"{student}'s notebook printed no {label!r}")


# ----------------------------------------------------------- every case ---

@pytest.mark.parametrize("case", CASES, ids=lambda c: c.student)
def test_case_gets_its_exact_grade_and_status(batch, case):
    row = batch.rows[case.student]
    assert (float(row["score"]), row["status"]) == (case.score, case.status)
    assert float(row["max_score"]) == sum(points for points, _ in grade_cells(CH).values())  # by hand too


def test_a_kernel_that_ignores_the_interrupt_costs_seconds_not_the_wall_clock(batch):
    for student in (STUBBORN, "broken-isinstance"):
        seconds = status_note(batch, student)["seconds"]
        assert seconds < CELL_TIMEOUT + 15 < WALL_TIMEOUT, (student, seconds)


def test_every_student_has_exactly_one_row(batch):
    assert sorted(batch.rows) == sorted(c.student for c in CASES)


# --------------------------------------------------------------- sandbox ---

def test_isolation_probe_reached_nothing(batch):
    course = batch.paths.course
    findings = json.loads(printed(batch, "x-isolation-probe", "findings:"))
    for target in (course / ".grading-secret", course / "gradebook.db", CH.solution, CH.reference_module,
                   batch.paths.autograded(HONEST) / f"{CH.id}.ipynb"):
        assert target.exists(), f"{target} must exist for its 'denied' to mean something"
    assert PROBE_ALLOWED < set(findings) and "read grading secret" in findings, sorted(findings)
    assert any(label.startswith("read inherited ") for label in findings), "the kernel inherited no file to try"
    oracles = {f"import {m}" for m in ORACLE_MODULES}  # the checks' trusted side: no oracle in the sandbox
    assert "import course.checks.framework" in oracles and oracles <= set(findings), sorted(oracles - set(findings))
    for label, seen in findings.items():  # every attempt the probe made, whatever its label
        if label not in PROBE_FACTS:
            assert seen.startswith("allowed" if label in PROBE_ALLOWED else "denied"), (label, seen)
    assert findings["uid"] in sandbox.UID_RANGE
    assert findings["processes"] < 10, "the kernel sees processes outside its sandbox"
    assert findings["limits"] == {"AS": sandbox.MEMORY_BYTES, "CPU": sandbox.CPU_SECONDS, "FSIZE": sandbox.FILE_BYTES,
                                  "NPROC": sandbox.PROCESSES, "NOFILE": sandbox.OPEN_FILES}
    assert not (course / "autograded" / HONEST / CH.id / "planted.txt").exists()


def test_no_kernel_outlives_grading(batch):
    assert kernel_processes(batch.paths.out) == []


def test_process_and_memory_limits_held(batch):
    processes = int(printed(batch, "fork-bomb", "processes:"))
    assert processes <= sandbox.PROCESSES + 2  # + bwrap's init and timeout, which run as root
    allocated = int(printed(batch, "memory-bomb", "allocated:"))
    assert 0 < allocated < sandbox.MEMORY_BYTES


def test_grader_memory_stays_bounded_under_a_flood(batch):
    note = status_note(batch, "output-flood")
    assert note["output_truncated"]
    assert note["grader_peak_rss_mb"] < 1500, note


def test_nothing_escapes_through_links(batch):
    assert batch.paths.canary.read_text() == CANARY
    for folder, dirs, files in os.walk(batch.paths.course / "autograded"):
        for name in dirs + files:
            mode = os.lstat(os.path.join(folder, name)).st_mode
            assert stat.S_ISDIR(mode) or stat.S_ISREG(mode), os.path.join(folder, name)


def test_what_a_kernel_writes_stays_in_its_scratch_folder(batch):
    """The graded notebook's folder and the feedback hold only what nbgrader writes: no file a
    kernel wrote (planted modules, checkpoints, the probe folder) is left beside them."""
    for student, row in batch.rows.items():
        if row["status"].startswith("graded"):
            assert sorted(p.name for p in batch.paths.autograded(student).iterdir()) == [f"{CH.id}.ipynb"], student
    assert not list(batch.paths.course.glob(f"{sandbox.CGROUP_PARENT}*")), "nothing else lands in the course folder"
    assert not batch.paths.ran.exists(), batch.paths.ran.read_text()


def test_modules_planted_where_python_starts_never_run(batch, tmp_path):
    """Python started by the grader (its kernelspec) or by the formgrader (a notebook's kernel,
    from the graded notebook's folder) in a folder holding planted modules runs none of them."""
    folder = tmp_path / "planted"
    for name in PLANTED:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"open({str(batch.paths.ran)!r}, 'a').write(__name__ + '\\n')\n")
    spec = json.loads((batch.paths.course / JUPYTER_DIR / "kernels" / kernel_name(CH.id) / "kernel.json").read_text())
    grading = [a if a != "{connection_file}" else "--help" for a in spec["argv"]]
    _, _, formgrader_env = formgrader_command(batch.paths.out)
    for argv, env in ((grading, {**nbgrader_env(batch.paths.course), **spec["env"]}),
                      ([sys.executable, "-m", "ipykernel_launcher", "--help"], {**os.environ, **formgrader_env})):
        proc = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert not batch.paths.ran.exists(), batch.paths.ran.read_text()


def test_a_kernel_gets_its_fair_share_of_the_cpu_beside_a_busy_one(tmp_path):
    """Two sandboxed kernels side by side, one spinning four processes, one spinning one: with a CPU
    cgroup per kernel each gets about half of what they share (without, the busy one takes 4/5)."""
    if not sandbox.cpu_groups_available():
        pytest.skip("no CPU cgroup controller this process may use")
    with _without_autogroups():  # which would share the CPU out per session (and bwrap starts one) anyway
        busy, single = _spin_side_by_side(tmp_path)
    assert single >= 0.5 * busy, f"the single process got {single:.2f} s of CPU, the four {busy:.2f} s"


AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")


@contextlib.contextmanager
def _without_autogroups():
    """Switch the scheduler's per-session groups off for a while, where they are on (root only)."""
    before = AUTOGROUP.read_text() if AUTOGROUP.exists() else None
    try:
        if before is not None:
            AUTOGROUP.write_text("0")
        yield
    finally:
        if before is not None:
            AUTOGROUP.write_text(before)


def _spin_side_by_side(tmp_path: Path) -> tuple[float, float]:
    """CPU seconds of a sandboxed kernel spinning four processes, and of one spinning one, run together
    for three seconds, each in the CPU cgroup a kernel gets."""
    spin = ("import os, time\n"
            "def spin():\n"
            "    end = time.monotonic() + 3\n"
            "    while time.monotonic() < end: pass\n"
            "kids = []\n"
            "for _ in range({n} - 1):\n"
            "    kids.append(os.fork())\n"
            "    if kids[-1] == 0: spin(); os._exit(0)\n"
            "spin(); [os.waitpid(k, 0) for k in kids]\n"
            "t = os.times(); print(t.user + t.system + t.children_user + t.children_system)")
    launcher = ("import os, sys; from autograder import sandbox\n"
                "sandbox.cpu_group(sys.argv[1])\n"
                "os.execvp(sys.argv[2], sys.argv[2:])")
    procs = []
    for name, processes in (("busy", 4), ("single", 1)):
        command = sandbox.bwrap_command(tmp_path, None, [sandbox.inside_python(), "-c", spin.format(n=processes)],
                                        sockets=None, wall=60)
        procs.append(subprocess.Popen([sys.executable, "-c", launcher, f"fairness-{name}-{os.getpid()}", *command],
                                      stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}))
    busy, single = (float(p.communicate(timeout=60)[0]) for p in procs)
    for name in ("busy", "single"):
        sandbox.remove_cpu_group(sandbox.cpu_group_of(Path(f"fairness-{name}-{os.getpid()}")), wait=2)
    return busy, single


# -------------------------------------------------------------- feedback ---

def test_feedback_shows_no_hidden_tests_and_no_one_elses_answers(batch):
    for student, row in batch.rows.items():
        folder = batch.paths.out / "feedback" / student / CH.id
        if not row["status"].startswith("graded"):
            assert not folder.exists()
            continue
        assert sorted(p.name for p in folder.iterdir()) == [f"{CH.id}.html"], student
        html = (folder / f"{CH.id}.html").read_text()
        assert "hidden=True" not in html and "BEGIN HIDDEN" not in html, student
        submitted = (batch.paths.course / "submitted" / student / CH.id / f"{CH.id}.ipynb").read_text()
        if REFERENCE_LINE not in submitted:
            assert REFERENCE_LINE not in html, f"{student}'s feedback shows the reference answer"


def test_a_forbidden_function_in_an_answer_is_flagged_for_a_person(batch):
    """The check makes F.linear raise while it runs (0 points); the judge also names the call in the
    feedback and the report, for a person to read. An honest answer is not flagged."""
    assert "For your instructor: your notebook names torch.nn.functional.linear" in printed(
        batch, "flag-forbidden-call", "⚠")
    report = (batch.paths.out / "report" / "index.html").read_text()
    assert "flag-forbidden-call (torch.nn.functional.linear)" in report and HONEST + " (" not in report


def test_echoed_hidden_tests_are_removed(batch):
    html = (batch.paths.out / "feedback" / "x-echo-hidden-tests" / CH.id / f"{CH.id}.html").read_text()
    assert "output removed by the grader" in html


# ------------------------------------------------- re-runs and refusals ---

def test_running_twice_changes_nothing(batch, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(batch.paths.out, out)
    before = {name: (out / name).read_bytes() for name in ("grades.csv", "exercises.csv")}
    proc = run_grade(batch.submissions, out)
    graded = sum(r["status"].startswith("graded") for r in batch.rows.values())
    assert f"0 notebook(s) run, {graded} unchanged" in proc.stdout
    assert {name: (out / name).read_bytes() for name in before} == before


def test_killed_half_way_then_rerun_finishes_with_every_grade_right(batch, tmp_path):
    out, subs = tmp_path / "out", tmp_path / "submitted"
    shutil.copytree(batch.paths.out, out)
    shutil.copytree(batch.submissions, subs)
    nb = f"{CH.id}/{CH.id}.ipynb"
    swap = {HONEST: "a-honest-wrong", "a-honest-wrong": HONEST, "honest-partial": HONEST}
    for student, like in swap.items():
        shutil.copy(batch.submissions / like / nb, subs / student / nb)

    first = subprocess.Popen(grade_command(subs, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    graded = out / "nbgrader" / "autograded" / HONEST / nb
    deadline = time.monotonic() + 300
    while not (graded.exists() and is_finished(graded)) and time.monotonic() < deadline:
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert is_finished(graded), "the first student was not graded in time"
    time.sleep(1)
    assert kernel_processes(out) == [], "a kernel outlived its killed grader"

    run_grade(subs, out)
    rows = read_rows(out)
    expected = {s: dict(r) for s, r in batch.rows.items()}
    for student, like in swap.items():  # the status too: a written answer given awaits manual grading
        expected[student].update(score=batch.rows[like]["score"], status=batch.rows[like]["status"])
    assert rows == expected
    with sqlite3.connect(out / "nbgrader" / "gradebook.db") as db:
        per_student = db.execute("SELECT student_id, count(*) FROM submitted_assignment GROUP BY student_id").fetchall()
        grades = db.execute("SELECT count(*) FROM grade").fetchone()[0]
    assert all(n == 1 for _, n in per_student)
    assert grades == len(per_student) * len(grade_cells(CH))  # each graded cell once: test cell, written answer


def test_trees_left_behind_stop_no_later_run(batch, tmp_path):
    """A folder chain thousands of levels deep, left in the course folder (by a kernel, before the grader
    could remove it) or in a student's upload, costs no one a grade in the next run: the notebook
    beside it is graded again (its folder emptied first) and every grade is as before."""
    out, subs = tmp_path / "out", tmp_path / "submitted"
    shutil.copytree(batch.paths.out, out)
    shutil.copytree(batch.submissions, subs)
    for top in (out / "nbgrader" / "autograded" / HONEST / CH.id, subs / "honest-partial" / CH.id):
        (top / "deep").mkdir()
        fd = os.open(top / "deep", os.O_RDONLY | os.O_DIRECTORY)
        for _ in range(4000):
            os.mkdir("d", dir_fd=fd)
            fd, old = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(old)
        os.close(fd)
    nb = nbformat.read(subs / HONEST / CH.id / f"{CH.id}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("handed in again"))  # so its folder is emptied and regraded
    nbformat.write(nb, subs / HONEST / CH.id / f"{CH.id}.ipynb")
    proc = run_grade(subs, out)
    assert "1 notebook(s) run" in proc.stdout
    assert read_rows(out) == batch.rows
    assert not (out / "nbgrader" / "autograded" / HONEST / CH.id / "deep").exists()


def test_grade_refuses_to_run_without_a_sandbox(tmp_path):
    (tmp_path / "submitted").mkdir()
    env = dict(os.environ, PATH=str(Path(sys.executable).parent))  # no bwrap on PATH
    refused = run_grade(tmp_path / "submitted", tmp_path / "out", env=env, check=False)
    assert refused.returncode != 0
    assert "cannot grade safely" in refused.stderr and "--unsafe-no-sandbox" in refused.stderr
    run_grade(tmp_path / "submitted", tmp_path / "out", "--unsafe-no-sandbox", env=env)
