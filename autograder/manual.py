"""Manual grading with nbgrader's own formgrader, on the course folder `grade` wrote.

``python -m autograder formgrader OUT`` starts JupyterLab in ``OUT/nbgrader``
(whose ``nbgrader_config.json`` names that folder as the course root), with
the grading kernels on its path, so the formgrader's "Manual Grading" view
shows every chapter, student and cell. Scores given or adjusted there, extra
credit and comments go to the gradebook; ``grade`` run again (it regrades
nothing that has not changed) writes the feedback with the comments, and
``grade`` or ``export`` write them into grades.csv (`results.refresh`).

Run as root (as README recommends for the grading sandbox), JupyterLab
refuses to start unless told ``--allow-root``; the command says so then.
The formgrader shows nbgrader's scores, before any late penalty: nbgrader
applies the penalty only to the feedback page's total, and grades.csv,
the feedback and `export` give the score after it (see `results.graded_row`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from course.protocol import CONFIG_FILE, JUPYTER_DIR

from .chapters import ROOT


def _prepend(folder: Path | str, variable: str) -> str:
    """The search path `variable` of this environment with `folder` first."""
    return os.pathsep.join([str(folder), os.environ.get(variable, "")]).rstrip(os.pathsep)


def formgrader_command(out: Path, port: int = 8888) -> tuple[list[str], Path, dict[str, str]]:
    """(argv, folder, environment) that start the formgrader on OUT's course folder."""
    root = out.resolve() / "nbgrader"
    config = root / CONFIG_FILE
    if not (root / "gradebook.db").is_file() or not config.is_file():
        raise SystemExit(f"no graded course in {root}: run `python -m autograder grade ... --out {out}` first")
    if json.loads(config.read_text())["CourseDirectory"]["root"] != str(root):
        raise SystemExit(f"{config} names another course folder: run `grade` into {out} again")
    bindir = str(Path(sys.executable).parent)
    quiet = root / JUPYTER_DIR / "config"  # nbgrader warns "No nbgrader_config.py file found" without one
    quiet.mkdir(parents=True, exist_ok=True)
    (quiet / "nbgrader_config.py").write_text(f"# This course's settings are in {config}, which nbgrader reads.\n")
    env = {"JUPYTER_PATH": str(root / JUPYTER_DIR),  # the sandboxed grading kernels, if autograding from there
           "JUPYTER_CONFIG_PATH": _prepend(quiet, "JUPYTER_CONFIG_PATH"),
           "PYTHONPATH": _prepend(ROOT, "PYTHONPATH"), "PATH": _prepend(bindir, "PATH"),
           # kernels start in a graded notebook's folder: nothing there may shadow a module
           "PYTHONSAFEPATH": "1"}
    argv = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:
        argv.append("--allow-root")
    return argv, root, env
