"""The term's schedule: ``schedule.yml`` at the repository root, the one
place an instructor sets due dates. Read by ``grade`` (nbgrader's duedate,
extensions and late penalty), by ``edition`` (a chapter's reference answers
are published once its due date has passed) and by ``export`` (the LMS's
assignment ids).

::

    timezone: Europe/London          # the zone the dates below are in (default UTC)
    late_penalty: none               # none | zero | "10% per day" (of the score, per started day)
    forbidden_calls: refuse          # refuse | flag: what a function an exercise forbids does in a check
    chapters:
      00_introduction: {due: 2026-09-21 23:59}
      01_tokenizing: {due: 2026-09-28 23:59, canvas_id: 4711}
    extensions:                      # per student and chapter: N days | N hours | N minutes
      "1001": {01_tokenizing: 2 days}
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from .chapters import ROOT, all_chapters

SCHEDULE = ROOT / "schedule.yml"
PENALTY = re.compile(r"^(none|zero|(\d+(?:\.\d+)?)\s*% per day)$")
DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(weeks?|days?|hours?|minutes?)$")
KNOWN_KEYS = {"timezone", "late_penalty", "forbidden_calls", "chapters", "extensions"}
FORBIDDEN_CALLS = ("refuse", "flag")
CHAPTER_KEYS = {"due", "canvas_id"}


@dataclass(frozen=True)
class Schedule:
    """Due dates (aware datetimes, UTC), extensions, the late policy, and what a forbidden call does:
    ``refuse`` (the default: a function an exercise forbids raises while its checks run, so the
    case fails and names it) or ``flag`` (it runs, and the feedback notes it for a person to read)."""

    due: dict[str, dt.datetime] = field(default_factory=dict)
    canvas_ids: dict[str, str] = field(default_factory=dict)
    extensions: dict[tuple[str, str], dt.timedelta] = field(default_factory=dict)
    late_penalty: str = "none"
    timezone: str = "UTC"
    forbidden_calls: str = "refuse"

    @property
    def percent_per_day(self) -> float | None:
        m = PENALTY.match(self.late_penalty)
        return float(m.group(2)) if m and m.group(2) else None

    def published(self, now: dt.datetime) -> set[str]:
        """The chapters whose answers are published at `now` (`is_due`): the student edition holds their
        reference modules, and so does the sandbox of a notebook graded then (stand-ins for the rest)."""
        return {ch.id for ch in all_chapters() if self.is_due(ch.id, now)}

    def is_due(self, chapter: str, now: dt.datetime) -> bool:
        """Whether the chapter's due date (plus the longest extension anyone has) has passed."""
        return chapter in self.due and now >= self.publication(chapter)

    def publication(self, chapter: str) -> dt.datetime:
        """When the chapter's answers are published: its due date plus the longest extension anyone has
        (KeyError for a chapter without a due date)."""
        longest = max((d for (_, c), d in self.extensions.items() if c == chapter), default=dt.timedelta(0))
        return self.due[chapter] + longest


def _when(value: object, zone: ZoneInfo, where: str) -> dt.datetime:
    if isinstance(value, dt.datetime):
        when = value
    elif isinstance(value, dt.date):  # a bare date: the end of that day
        when = dt.datetime.combine(value, dt.time(23, 59, 59))
    elif isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{where}: not a date and time: {value!r} (write e.g. 2026-09-21 23:59)") from None
    else:
        raise TypeError(f"{where}: not a date and time: {value!r}")
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone)
    return when.astimezone(dt.timezone.utc)


def _duration(value: object, where: str) -> dt.timedelta:
    m = DURATION.match(str(value).strip())
    if not m:
        raise ValueError(f"{where}: not a duration: {value!r} (write e.g. 2 days, 36 hours)")
    unit = m.group(2).rstrip("s") + "s"
    return dt.timedelta(**{unit: float(m.group(1))})


def parse_schedule(data: object, source: str = "schedule.yml") -> Schedule:
    """Check and read a schedule (the parsed YAML); a mistake raises ValueError naming it."""
    data = data or {}
    if not isinstance(data, dict) or set(data) - KNOWN_KEYS:
        raise ValueError(f"{source}: unknown setting(s) {sorted(set(data) - KNOWN_KEYS)}; known: {sorted(KNOWN_KEYS)}"
                         if isinstance(data, dict) else f"{source}: not a mapping")
    zone_name = str(data.get("timezone") or "UTC")
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{source}: unknown timezone {zone_name!r}") from None
    penalty = str(data.get("late_penalty") or "none").strip()
    if not PENALTY.match(penalty):
        raise ValueError(f"{source}: late_penalty must be none, zero or 'P% per day', not {penalty!r}")
    forbidden = str(data.get("forbidden_calls") or "refuse").strip()
    if forbidden not in FORBIDDEN_CALLS:
        raise ValueError(f"{source}: forbidden_calls must be one of {', '.join(FORBIDDEN_CALLS)}, not {forbidden!r}")
    known = {ch.id for ch in all_chapters()}
    due, canvas = {}, {}
    for ch, entry in (data.get("chapters") or {}).items():
        if ch not in known:
            raise ValueError(f"{source}: unknown chapter {ch!r}")
        if not isinstance(entry, dict) or set(entry) - CHAPTER_KEYS:
            raise ValueError(f"{source}: chapter {ch}: expected some of {sorted(CHAPTER_KEYS)}")
        if entry.get("due") is not None:
            due[ch] = _when(entry["due"], zone, f"{source}: chapter {ch}")
        if entry.get("canvas_id") is not None:
            canvas[ch] = str(entry["canvas_id"])
    extensions = {}
    for student, per in (data.get("extensions") or {}).items():
        if not isinstance(per, dict):
            raise TypeError(f"{source}: extensions of {student!r}: expected chapter: duration")
        for ch, value in per.items():
            if ch not in due:
                raise ValueError(f"{source}: extension for {student!r} on {ch!r}, which has no due date")
            extensions[(str(student), ch)] = _duration(value, f"{source}: extension {student}/{ch}")
    return Schedule(due, canvas, extensions, penalty, zone_name, forbidden)


def load_schedule(path: Path | None = None) -> Schedule:
    """The course's schedule (an empty one when the file does not exist)."""
    path = path or SCHEDULE
    if not path.exists():
        return Schedule()
    try:
        return parse_schedule(yaml.safe_load(path.read_text()), path.name)
    except (ValueError, TypeError, yaml.YAMLError) as err:
        raise SystemExit(f"{path}: {err}") from None
