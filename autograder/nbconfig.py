"""nbgrader's configuration for grading one chapter, as a traitlets `Config`.

The grader writes it as JSON (`course.protocol.CONFIG_FILE`) into the course
folder, where nbgrader's commands read it, before it runs them on a chapter.
It puts the course's preprocessors into ``nbgrader autograde``: the probes
and the judge around the hardened `Execute` (see `autograder.judge` and
`autograder.execute`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from traitlets.config import Config

from course.protocol import CONFIG_FILE, SOCKETS_DIR, STATUS_DIR

from .limits import Limits

COURSE_ID = "transformer-course"

AUTOGRADE_PREPROCESSORS = [
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
FEEDBACK_PREPROCESSORS = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "nbgrader.preprocessors.ClearHiddenTests",
]


def nbgrader_config(root: Path, secret: Path, kernel: str, limits: Limits, late_penalty: str = "none",
                    forbidden_calls: str = "refuse") -> Config:
    """nbgrader's settings for a course folder `root`: grade in `kernel`
    with the per-cell and wall-clock `limits`, seeding hidden cases from the
    grading `secret` file, with the `late_penalty` of ``schedule.yml``
    (``none``, ``zero``: nbgrader's own; ``P% per day``: `autograder.late.PercentPerDay`)
    and its `forbidden_calls` (``refuse``, ``flag``: `autograder.schedule.Schedule`)."""
    c = Config()
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.course_id = COURSE_ID
    c.Execute.timeout = limits.cell_seconds
    c.KernelManager.transport = "ipc"  # the sandbox has no network, not even loopback TCP
    c.GuardedExecute.kernel_name = kernel
    c.GuardedExecute.status_dir = str(root / STATUS_DIR)
    c.GuardedExecute.socket_dir = str(root / SOCKETS_DIR)
    c.GuardedExecute.wall_seconds = limits.wall_seconds
    c.GuardedExecute.test_cell_seconds = limits.test_cell_seconds
    c.GuardedExecute.notebook_seconds = limits.notebook_seconds
    c.GuardedExecute.shutdown_kernel = "immediate"  # nothing in the kernel is worth waiting for
    c.Autograde.autograde_preprocessors = AUTOGRADE_PREPROCESSORS
    c.PrepareProbes.secret_file = str(secret)
    c.PrepareProbes.allow_forbidden = forbidden_calls == "flag"
    c.JudgeChecks.secret_file = str(secret)
    c.JudgeChecks.verdicts_dir = str(root / STATUS_DIR)  # the grader's own: the report reads them there
    c.JudgeChecks.release_dir = str(root / "release")  # the released notebooks: their cells are the instructor's
    c.GenerateFeedback.preprocessors = FEEDBACK_PREPROCESSORS
    per_day = re.fullmatch(r"(\d+(?:\.\d+)?)\s*% per day", late_penalty)
    if per_day:
        c.AssignLatePenalties.plugin_class = "autograder.late.PercentPerDay"
        c.PercentPerDay.percent = float(per_day.group(1))
    else:
        c.LateSubmissionPlugin.penalty_method = late_penalty
    return c


def write_config(root: Path, config: Config) -> None:
    """Make `config` the one nbgrader reads in the course folder `root`."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "nbgrader_config.py").unlink(missing_ok=True)  # left by earlier versions; it would be read too
    (root / CONFIG_FILE).write_text(json.dumps(config, indent=1, sort_keys=True))
