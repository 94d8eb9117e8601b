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
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path, PurePosixPath

from .intake import MAX_NOTEBOOK_BYTES, STUDENT_ID

CANVAS = re.compile(r"^[^/_]+_(?:late_)?(\d+)_\d+_.+\.ipynb$", re.I)
MOODLE = re.compile(r"^.+_(\d+)_assignsubmission_file_?$")


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


def collect(archive: Path, chapter: str, into: Path) -> dict[str, str]:
    """Write each student's notebook under `into`; return {student: member}."""
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
    return {s: i.filename for s, i in chosen.items()}
