"""Late work, through nbgrader's own machinery.

The due date of a chapter (``schedule.yml``) becomes the nbgrader
assignment's ``duedate``, an extension the submission's ``extension``, and
the time a notebook was handed in its ``timestamp.txt`` (nbgrader's own
file, in ``SUBMISSIONS/<student>/<chapter>/``, which `collect` writes from
the LMS archive). nbgrader's ``AssignLatePenalties`` then asks a
`LateSubmissionPlugin` for the penalty: nbgrader's own (``none``, ``zero``)
or `PercentPerDay` below. `late_note` tells a late student, on their feedback
page, when they handed in, how late against which due date, the policy and
the points it took (`describe_late_work`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Collection
from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.utils import parse_utc
from traitlets import Float

from course.protocol import CONFIG_FILE

from .schedule import PENALTY

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


def reassess_penalties(gb, chapter: str, config, students: Collection[str]) -> None:
    """Take the penalty of each of `students`' late notebooks of `chapter` from its score now, as
    nbgrader's ``AssignLatePenalties`` does when it autogrades (with the plugin and policy of `config`,
    the course folder's nbgrader configuration): a score given by hand in the formgrader, or an
    extension or due date changed since, change the penalty without running the notebook again."""
    from nbgrader.preprocessors import AssignLatePenalties

    assess = AssignLatePenalties(config=config)
    assess.init_plugin()
    for sub in gb.assignment_submissions(chapter):
        if sub.student.id not in students:  # another shard's, or not in this run
            continue
        late = sub.total_seconds_late
        for nb in sub.notebooks:
            penalty = assess.plugin_inst.late_submission_penalty(sub.student.id, nb.score, late) if late > 0 else None
            nb.late_submission_penalty = None if penalty is None else min(max(penalty, 0.0), nb.score)
    gb.db.commit()


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


def _percent_per_day(late_penalty: str) -> float | None:
    m = PENALTY.match(late_penalty.strip())
    return float(m.group(2)) if m and m.group(2) else None


def describe_policy(late_penalty: str) -> str:
    """``schedule.yml``'s `late_penalty` for students: "10% of the points per day late, per started day"."""
    percent = _percent_per_day(late_penalty)
    if percent is not None:
        return f"{percent:g}% of the points per day late, per started day"
    if late_penalty.strip() == "zero":
        return "a notebook handed in late scores zero"
    return "no penalty for late work"


def _points(value: float) -> str:
    return f"{value:g} point{'s' * (value != 1)}"


def describe_late_work(seconds_late: float, handed_in: dt.datetime | None, due: dt.datetime | None,
                       extension: dt.timedelta | None, late_penalty: str, points: float, penalty: float,
                       max_score: float) -> str | None:
    """What a late student's feedback page says: when the notebook was handed in, how late, against
    which due date (the student's, `due`, with their `extension`), the policy (``schedule.yml``'s
    `late_penalty`) and the points it took of the `points` the notebook earned; None when not late.
    Times are nbgrader's, in UTC (naive datetimes are UTC)."""
    if seconds_late <= 0:
        return None

    def when(t: dt.datetime) -> str:
        return format_timestamp(t)[:16] + " UTC"

    text = "Handed in late: " + (f"{when(handed_in)}, " if handed_in else "")
    text += f"{describe_lateness(seconds_late)} after "
    if due is None:
        text += "the due date"
    elif extension:
        text += (f"your due date of {when(due)} (the chapter's due date, {when(due - extension)}, "
                 f"with your extension of {describe_lateness(extension.total_seconds())})")
    else:
        text += f"the due date of {when(due)}"
    text += f". Late policy: {describe_policy(late_penalty)}"
    percent = _percent_per_day(late_penalty)
    if percent is not None:
        days = math.ceil(seconds_late / 86400)  # as `PercentPerDay` counts them
        share = min(100.0, days * percent)
        text += f" ({days} started day{'s' * (days != 1)}: {share:g}%)"
    score = round(max(0.0, points - penalty), 2)
    if penalty:
        text += (f". Points taken: {penalty:g} of the {_points(points)} your notebook earned, "
                 f"so your score is {score:g} of {max_score:g}.")
    else:
        text += ". Points taken: none."
    return text


def late_note(course_root: Path, chapter: str, student: str) -> str | None:
    """`describe_late_work` for the student's graded chapter, from what nbgrader used to grade it:
    the gradebook and the late policy in the course folder's configuration (``OUT/nbgrader``,
    `nbconfig.write_config`); None when the notebook was not late (or is not in the gradebook)."""
    from nbgrader.api import MissingEntry

    from .gradebook import gradebook_url, open_gradebook

    path = course_root / CONFIG_FILE
    if not path.is_file():
        return None
    config = json.loads(path.read_text())
    if "percent" in config.get("PercentPerDay", {}):
        policy = f"{config['PercentPerDay']['percent']:g}% per day"
    else:
        policy = config.get("LateSubmissionPlugin", {}).get("penalty_method", "none")
    url = config.get("CourseDirectory", {}).get("db_url") or gradebook_url(course_root)
    with open_gradebook(url) as gb:
        try:
            sub = gb.find_submission(chapter, student)
        except MissingEntry:
            return None
        return describe_late_work(sub.total_seconds_late, sub.timestamp, sub.duedate, sub.extension, policy,
                                  round(sub.score, 2), round(sub.late_submission_penalty or 0.0, 2), sub.max_score)
