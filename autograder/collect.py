"""`python -m autograder collect ARCHIVE --chapter CH --into SUBMISSIONS`.

Turns the zip file a learning-management system exports into nbgrader's
submitted layout, ``SUBMISSIONS/<student_id>/<chapter_id>/<chapter_id>.ipynb``,
ready for `grade`. Understood layouts, per notebook in the archive:

* already in that layout: ``<student_id>/<chapter_id>/<anything>.ipynb``;
* Canvas: ``<name>_[LATE_]<user id>_<submission id>_<original name>.ipynb``
  (student id: the user id);
* Moodle: ``<Full Name>_<id>_assignsubmission_file_/<original name>.ipynb``
  (student id: the id);
* a folder per student: ``<student_id>/<anything>.ipynb``.

The archive is untrusted: members are read with a size limit, never
extracted by path (no "zip slip"), links are skipped, and a student with
several notebooks keeps the newest (by the archive's timestamp).

Next to each notebook goes nbgrader's ``timestamp.txt``: when it was handed
in, which is the time the LMS gave the file in the archive (Canvas and
Moodle stamp each file with its submission time). A zip member's time is
the UTC time of its Info-ZIP "extended timestamp" where the archive has
one, else its plain zip time, a local time without a zone, read in the
course's time zone (``schedule.yml``; pass `timezone` where the LMS uses
another). A member with no time at all (the zip format's 1980-01-01) gets
no timestamp.txt: nbgrader then never counts it late.
"""

from __future__ import annotations

import datetime as dt
import re
import zipfile
from pathlib import Path, PurePosixPath
from zoneinfo import ZoneInfo

from .intake import MAX_NOTEBOOK_BYTES, STUDENT_ID
from .late import TIMESTAMP, format_timestamp
from .schedule import load_schedule

CANVAS = re.compile(r"^[^/_]+_(?:late_)?(\d+)_\d+_.+\.ipynb$", re.I)
MOODLE = re.compile(r"^.+_(\d+)_assignsubmission_file_?$")
NO_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest zip time: what a member gets when none was recorded
EXTENDED_TIMESTAMP = 0x5455  # Info-ZIP's "UT" extra field: flags, then the mtime in Unix seconds (UTC)


def student_of(member: PurePosixPath, chapter: str) -> str | None:
    """The student id a notebook in the archive belongs to, if any."""
    parts = member.parts
    if len(parts) >= 3 and parts[-2] == chapter:
        return parts[-3]
    if len(parts) >= 2 and (m := MOODLE.match(parts[-2])):
        return m.group(1)
    if (m := CANVAS.match(parts[-1])):
        return m.group(1)
    if len(parts) >= 2:
        return parts[-2]
    return None


def utc_time(info: zipfile.ZipInfo) -> dt.datetime | None:
    """A member's Info-ZIP extended timestamp (UTC), if it has one."""
    extra = info.extra
    while len(extra) >= 4:
        kind, size = int.from_bytes(extra[:2], "little"), int.from_bytes(extra[2:4], "little")
        data, extra = extra[4:4 + size], extra[4 + size:]
        if kind == EXTENDED_TIMESTAMP and len(data) >= 5 and data[0] & 1:
            return dt.datetime.fromtimestamp(int.from_bytes(data[1:5], "little"), dt.timezone.utc)
    return None


def handed_in(info: zipfile.ZipInfo, zone: ZoneInfo) -> dt.datetime | None:
    """When the archive says a member was handed in (UTC), or None when it holds no time."""
    if (when := utc_time(info)) is not None:
        return when
    if info.date_time == NO_TIME:
        return None
    return dt.datetime(*info.date_time, tzinfo=zone).astimezone(dt.timezone.utc)


def collect(archive: Path, chapter: str, into: Path, timezone: str | None = None) -> dict[str, str]:
    """Write each student's notebook, and its timestamp.txt, under `into`; return {student: member}.
    `timezone` is the zone of the archive's plain zip times (default: the course's, schedule.yml).
    Prints which member went to which student, handed in when, and how that time was read."""
    zone = ZoneInfo(timezone or load_schedule().timezone)
    chosen: dict[str, zipfile.ZipInfo] = {}
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            member = PurePosixPath(info.filename)
            is_link = (info.external_attr >> 16) & 0o170000 == 0o120000
            if info.is_dir() or is_link or member.suffix != ".ipynb" or "__MACOSX" in member.parts:
                continue
            student = student_of(member, chapter)
            if student is None or not STUDENT_ID.match(student):
                print(f"skipped {info.filename}: cannot tell whose notebook it is")
                continue
            if info.file_size > MAX_NOTEBOOK_BYTES:
                print(f"skipped {info.filename}: larger than {MAX_NOTEBOOK_BYTES} bytes")
                continue
            if student not in chosen or info.date_time > chosen[student].date_time:
                chosen[student] = info
        for student, info in chosen.items():
            data = zf.read(info)[:MAX_NOTEBOOK_BYTES + 1]
            dest = into / student / chapter / f"{chapter}.ipynb"
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            when = handed_in(info, zone)
            stamp = dest.parent / TIMESTAMP
            if when is None:
                stamp.unlink(missing_ok=True)
            else:
                stamp.write_text(format_timestamp(when) + "\n")
            print(f"{student}: {info.filename} -> {dest.relative_to(into)}, {describe_time(info, when, zone)}")
    return {s: i.filename for s, i in chosen.items()}


def describe_time(info: zipfile.ZipInfo, when: dt.datetime | None, zone: ZoneInfo) -> str:
    """When a member was handed in, and which of the archive's times said so, for the instructor."""
    if when is None:
        return "no time in the archive (never late)"
    source = "the zip's UTC timestamp" if utc_time(info) else f"its local zip time, read in {zone.key}"
    return f"handed in {when:%Y-%m-%d %H:%M:%S} UTC ({source})"
