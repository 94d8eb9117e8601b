"""Grading a large class: parallel workers, shards on a shared PostgreSQL
gradebook, the merge step, and the deployment files that run the shards.

One small class of chapter 0 (a solution, a stub, a mutant and a student
whose notebook is missing) is graded one student at a time into SQLite: the
reference. Graded again on two workers, and as two shards running at once
against one PostgreSQL server that the test starts itself (Debian's
`postgresql`, on loopback), then merged, it must give the very same results.
"""

from __future__ import annotations

import filecmp
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import yaml

from autograder.chapters import ROOT, get_chapter
from autograder.pool import Progress
from autograder.shards import Shard, merge
from mutants import mutants_for
from submissions import lean, mutated, solved, write

CH = get_chapter("00_introduction")
SHARDS = 2
#: the students of the `sequential` class; ids chosen so that each of 2 shards gets some
CLASS = ["ada", "ben", "cy", "dee"]
COMPARED = ["grades.csv", "exercises.csv", "report/exercises.csv"]


@dataclass(frozen=True)
class Graded:
    submissions: Path
    out: Path


def grade(submissions: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen) -> str:
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output[-3000:]
    return output


def assert_same_results(got: Path, want: Path) -> None:
    for name in COMPARED:
        assert (got / name).read_text() == (want / name).read_text(), name
    compared = filecmp.dircmp(got / "feedback", want / "feedback")
    folders = [compared]
    while folders:
        d = folders.pop()
        assert not (d.left_only or d.right_only or d.diff_files or d.funny_files), d.report()
        folders += d.subdirs.values()


#: one worker runs this module, so its module fixture is made once (`make test` runs two)
pytestmark = pytest.mark.xdist_group("scale")


@pytest.fixture(scope="module")
def sequential(tmp_path_factory) -> Graded:
    """The class graded one student at a time, into SQLite."""
    base = tmp_path_factory.mktemp("scale")
    subs = base / "submitted"
    write(lean(solved(CH)), subs, "ada", CH)
    write(nbformat.read(CH.student, as_version=4), subs, "ben", CH)
    (subs / "cy" / CH.id).mkdir(parents=True)  # handed in nothing
    write(mutated(CH, mutants_for(CH.topic)[0]), subs, "dee", CH)
    finish(grade(subs, base / "sequential", "--workers", "1"))
    return Graded(subs, base / "sequential")


def test_the_class_splits_into_two_nonempty_shards():
    shards = [[s for s in CLASS if Shard(i, SHARDS).holds(s)] for i in range(SHARDS)]
    assert all(shards) and sorted(sum(shards, [])) == sorted(CLASS), shards


@pytest.mark.slow
def test_two_workers_give_the_same_results_as_one(sequential, tmp_path):
    finish(grade(sequential.submissions, tmp_path / "parallel", "--workers", "2"))
    assert_same_results(tmp_path / "parallel", sequential.out)
    assert {p.name for p in (tmp_path / "parallel" / "report").iterdir()} == \
        {p.name for p in (sequential.out / "report").iterdir()}


# ------------------------------------------------------------ PostgreSQL ---

def postgres_bindir() -> Path | None:
    """Where initdb and pg_ctl are: on PATH, or in Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which("pg_ctl")
    for folder in [*([Path(found).parent] if found else []),
                   *sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)]:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A PostgreSQL server of its own on loopback (its socket in a temporary folder); its URL."""
    bindir = postgres_bindir()
    if bindir is None:
        message = "PostgreSQL is not installed: apt-get install postgresql (make setup does)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    folder = Path(tempfile.mkdtemp(prefix="course-pg-"))
    as_user = {}
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        user = pwd.getpwnam("postgres") if "postgres" in {u.pw_name for u in pwd.getpwall()} else pwd.getpwnam("nobody")
        os.chown(folder, user.pw_uid, user.pw_gid)
        as_user = {"user": user.pw_uid, "group": user.pw_gid}
    data, port = folder / "data", free_port()
    subprocess.run([bindir / "initdb", "-D", data, "-U", "grader", "--auth=trust", "--no-sync", "-E", "UTF8"],
                   check=True, capture_output=True, **as_user)
    options = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={folder} -c fsync=off"
    subprocess.run([bindir / "pg_ctl", "-D", data, "-l", folder / "log", "-o", options, "-w", "start"],
                   check=True, capture_output=True, **as_user)
    try:
        from sqlalchemy import create_engine, text
        engine = create_engine(f"postgresql://grader@127.0.0.1:{port}/postgres", isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text("CREATE DATABASE gradebook"))
        engine.dispose()
        yield f"postgresql://grader@127.0.0.1:{port}/gradebook"
    finally:
        subprocess.run([bindir / "pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True, **as_user)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_two_shards_on_one_postgresql_gradebook_merge_into_the_sequential_grades(sequential, postgres, tmp_path):
    shards = [tmp_path / f"shard-{i}" for i in range(SHARDS)]
    running = [grade(sequential.submissions, out, "--workers", "1", "--shard", f"{i}/{SHARDS}", "--db", postgres)
               for i, out in enumerate(shards)]
    for proc in running:
        finish(proc)
    from nbgrader.api import Gradebook
    with Gradebook(postgres) as gb:  # every shard wrote its students' grades into the one gradebook
        graded = {s.student.id for s in gb.assignment_submissions(CH.id)}
    assert graded == {"ada", "ben", "dee"}
    merged = tmp_path / "merged"
    proc = subprocess.run([sys.executable, "-m", "autograder", "merge", str(merged), *map(str, shards),
                           "--db", postgres], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_same_results(merged, sequential.out)
    assert (merged / "report" / "index.html").is_file()
    assert (merged / "feedback" / "_assets" / "mathjax").is_dir(), "merged feedback pages would show raw TeX"


@pytest.mark.slow
def test_merge_refuses_a_student_in_two_shards(sequential, tmp_path):
    with pytest.raises(SystemExit, match="is in both"):
        merge(tmp_path / "merged", [sequential.out, sequential.out])


# ------------------------------------------------------ small, no grading ---

@pytest.mark.parametrize("count", [1, 2, 7])
def test_shards_share_out_every_student_exactly_once(count):
    students = [f"s{i:03d}" for i in range(200)]
    holders = [[i for i in range(count) if Shard(i, count).holds(s)] for s in students]
    assert all(len(h) == 1 for h in holders)
    if count > 1:
        sizes = [sum(h == [i] for h in holders) for i in range(count)]
        assert min(sizes) > 200 / count / 2, sizes


@pytest.mark.parametrize("text", ["2/2", "-1/2", "1", "a/b", "0/0"])
def test_a_malformed_shard_is_refused(text):
    with pytest.raises(ValueError):
        Shard.parse(text)


class Terminal:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def test_progress_shows_done_failed_and_time_left_only_on_a_terminal():
    for tty in (True, False):
        stream = Terminal(tty)
        progress = Progress("grading 00_introduction", 4, stream)
        progress.done, progress.failed = 2, 1
        progress.show()
        progress.finish()
        if tty:
            assert "grading 00_introduction: 2/4 students, 1 not graded, about" in stream.text
            assert "left" in stream.text
        else:
            assert stream.text == ""


# ------------------------------------------------------ deployment files ---

def test_kubernetes_job_runs_one_shard_per_index_with_what_bubblewrap_needs():
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "grade-job.yaml").read_text()))
    job = next(d for d in docs if d and d.get("kind") == "Job")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] >= 2
    pod = spec["template"]["spec"]
    container = next(c for c in pod["containers"] if "autograder" in " ".join(c.get("command", []) + c.get("args", [])))
    script = " ".join(container.get("command", []) + container.get("args", []))
    assert "--shard" in script and "JOB_COMPLETION_INDEX" in script and "--db" in script
    assert f"/{spec['completions']}" in script
    assert "--unsafe-no-sandbox" not in script
    security = container["securityContext"]  # what bubblewrap needs to make its namespaces
    assert security.get("privileged") or security.get("seccompProfile", {}).get("type") == "Unconfined"
    assert security.get("appArmorProfile", {}).get("type") == "Unconfined" or security.get("privileged")
    assert any(d and d.get("kind") == "Job" and "merge" in str(d) for d in docs), "no merge step"


def test_slurm_array_script_is_valid_bash_and_runs_one_shard_per_task():
    script = ROOT / "deploy" / "slurm" / "grade-array.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert "#SBATCH --array=" in text and "SLURM_ARRAY_TASK_ID" in text and "--shard" in text
    assert "--db" in text and "merge" in text and "--unsafe-no-sandbox" not in text
    assert "unprivileged_userns_clone" in text or "max_user_namespaces" in text
