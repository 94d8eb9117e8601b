"""nbgrader's own commands, run as subprocesses in a chapter's course folder.

Each runs with the configuration `autograder.nbconfig` wrote there, with a
memory cap, and dies with the grader. A batch that fails is retried one
student at a time, so one broken submission cannot sink the rest.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

from course.protocol import (
    BOOK_ENV,
    JUPYTER_DIR,
    PROBE_DIR_ENV,
    PROBE_DIRNAME,
    RUNTIME_DIR,
)

from .chapters import ROOT
from .course_folder import Course

GRADER_MEMORY_BYTES = 16 * 1024**3  # a backstop: floods are cut in GuardedExecute
PR_SET_PDEATHSIG = 1
START_SECONDS = 300  # nbgrader's own start-up and bookkeeping, per command
NOTEBOOK_SECONDS = 120  # per notebook, on top of its wall clock: the judge, saving


def grader_limits() -> None:
    """Cap nbgrader's memory, and end it (and so its kernel) if grade dies."""
    resource.setrlimit(resource.RLIMIT_AS, (GRADER_MEMORY_BYTES, GRADER_MEMORY_BYTES))
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def nbgrader_env(root: Path) -> dict[str, str]:
    """The environment nbgrader runs in, for the course folder `root`."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # alembic
    env[PROBE_DIR_ENV] = PROBE_DIRNAME  # for unsandboxed kernels; relative: they run in the notebook's folder
    env["JUPYTER_PATH"] = str(root / JUPYTER_DIR)  # our kernelspecs
    env["JUPYTER_RUNTIME_DIR"] = str(root / RUNTIME_DIR)  # connection files, private to the grader
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"  # the judge's imports
    env["PYTHONSAFEPATH"] = "1"  # no Python the grader starts imports from the folder it starts in
    env.pop(BOOK_ENV, None)
    return env


def run_nbgrader(root: Path, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    """``nbgrader ARGS`` in the course folder `root`; a timeout is reported as a failure."""
    command = [sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"]
    try:
        return subprocess.run(command, cwd=root, env=nbgrader_env(root), capture_output=True, text=True,
                              timeout=timeout, preexec_fn=grader_limits)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, -signal.SIGKILL, "", f"ERROR: timed out after {timeout} s")


def generate_assignment(course: Course) -> None:
    """Release the chapter from source/ into release/ and the gradebook."""
    proc = run_nbgrader(course.root, "generate_assignment", course.ch.id, "--force")
    if proc.returncode:
        raise SystemExit(f"nbgrader generate_assignment {course.ch.id} failed:\n{proc.stderr[-3000:]}")
