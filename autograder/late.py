"""Late work, through nbgrader's own machinery.

The due date of a chapter (``schedule.yml``) becomes the nbgrader
assignment's ``duedate``, an extension the submission's ``extension``, and
the time a notebook was handed in its ``timestamp.txt`` (nbgrader's own
file, in ``SUBMISSIONS/<student>/<chapter>/``, which `collect` writes from
the LMS archive). nbgrader's ``AssignLatePenalties`` then asks a
`LateSubmissionPlugin` for the penalty: nbgrader's own (``none``, ``zero``)
or `PercentPerDay` below.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.utils import parse_utc
from traitlets import Float

TIMESTAMP = "timestamp.txt"  # nbgrader's name (CourseDirectory.get_existing_timestamp)
MAX_TIMESTAMP_BYTES = 100


class PercentPerDay(LateSubmissionPlugin):
    """Take `percent` of the notebook's score off per started day late (all of it at most)."""

    percent = Float(10.0, help="percent of the score taken off per started day late").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        if total_seconds_late <= 0:
            return None
        days = math.ceil(total_seconds_late / 86400)
        return round(score * min(1.0, days * self.percent / 100), 2)


def read_timestamp(folder: Path) -> tuple[str | None, str | None]:
    """(timestamp, problem) of a submission folder's timestamp.txt, in
    nbgrader's format ("2026-09-21 22:59:00.000000 UTC"); (None, None) if there is none."""
    path = folder / TIMESTAMP
    if not path.exists() and not path.is_symlink():
        return None, None
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_TIMESTAMP_BYTES:
        return None, f"{TIMESTAMP} ignored: not a small plain file"
    text = path.read_text(errors="replace").strip()
    try:
        when = parse_utc(text)
    except (ValueError, OverflowError, TypeError):
        return None, f"{TIMESTAMP} ignored: not a date ({text[:30]!r})"
    return format_timestamp(when), None


def format_timestamp(when: dt.datetime) -> str:
    """nbgrader's timestamp format, in UTC (a naive datetime is UTC)."""
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return when.strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"


def describe_lateness(seconds: float) -> str:
    """'2 days 3 h', '45 min': how late, for people."""
    minutes = math.ceil(seconds / 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    parts = ([f"{days} day{'s' * (days != 1)}"] if days else []) + ([f"{hours} h"] if hours else [])
    return " ".join(parts or [f"{mins} min"])
