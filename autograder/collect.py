"""`python -m autograder collect ARCHIVE --chapter CH --into SUBMISSIONS`.

Turns the zip file a learning-management system exports into nbgrader's
submitted layout, ``SUBMISSIONS/<student_id>/<chapter_id>/<chapter_id>.ipynb``,
ready for `grade`.

Whose a notebook is comes from the archive's top-level entry, the one the
LMS named, never from names deeper down, which the student chose:

* Canvas: a file ``<name>_[LATE_]<user id>_<submission id>_<original name>.ipynb``
  (student id: the user id);
* Moodle: a folder ``<Full Name>_<id>_assignsubmission_file_/`` (student id:
  the id), holding the student's files and any sub-folders they uploaded;
  with "Download submissions in folders" off, a file
  ``<Full Name>_<id>_assignsubmission_file_<original name>.ipynb``. Moodle's
  other submission types (``_assignsubmission_onlinetext_``) hold no notebook;
* nbgrader's layout, ``<student_id>/<chapter_id>/<anything>.ipynb``, and a
  folder per student, ``<student_id>/<anything>.ipynb``: the first folder.

Anything below a student's entry is that student's (a notebook in a
sub-folder of Alice's Moodle folder is Alice's), unless a name there points
at another student (a Moodle submission's folder or file name, a Canvas file
name or a folder named as another student of the archive): such a notebook
was planted, and is reported ("nested inside <entry>, which belongs to <id>")
and ignored, as is one in a student's folder for another chapter. A member
that is no student's entry (a loose notebook, a chapter's folder at the top,
a path with ``..``) is reported and skipped.

One folder around everything (some downloads wrap the archive in e.g.
``submissions/``) is read through: when every member is inside the same top
folder, and that folder is not itself a student's entry (a Moodle submission
folder, or a folder named as a student id that holds a notebook itself or in
its chapter's folder, as one student's folder does), the archive is read
inside it, and `collect` says so.

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

import csv
import datetime as dt
import re
import zipfile
from pathlib import Path, PurePosixPath
from zoneinfo import ZoneInfo

from .chapters import all_chapters
from .intake import MAX_NOTEBOOK_BYTES, STUDENT_ID
from .late import TIMESTAMP, format_timestamp
from .schedule import load_schedule

# Canvas: <name>_[late_]<user id>_<submission id>_<the student's file name>
CANVAS = re.compile(r"^[^/_]+_(?:late_)?(\d+)_\d+_(.+\.ipynb)$", re.I)
CANVAS_ANY = re.compile(r"^[^/_]+_(?:late_)?(\d+)_\d+_.+$")  # any file Canvas named for a student
# Moodle's folder of one submission: <Full Name>_<id>_assignsubmission_<plugin>_ (plugin: file, onlinetext, ...)
MOODLE = re.compile(r"^.+_(\d+)_assignsubmission_([a-z0-9]+)_?$")
# Moodle's flat download: <Full Name>_<id>_assignsubmission_<plugin>_<the student's file name>; Moodle
# writes a "_" in a name as a space, so the first "_" ends the name
MOODLE_FILE = re.compile(r"^[^/_]+_(\d+)_assignsubmission_([a-z0-9]+)_(.+)$")
NO_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest zip time: what a member gets when none was recorded
EXTENDED_TIMESTAMP = 0x5455  # Info-ZIP's "UT" extra field: flags, then the mtime in Unix seconds (UTC)
UNKNOWN = "cannot tell whose notebook it is"
#: the students' names an LMS wrote in its download (`lms_name`): collect keeps them in SUBMISSIONS/NAMES,
#: grade carries them to OUT/NAMES, export fills a Moodle worksheet's and a Canvas import's names from them
NAMES = "lms-names.csv"


def chapter_ids() -> set[str]:
    return {ch.id for ch in all_chapters()}


def entry_of(parts: tuple[str, ...]) -> tuple[str | None, str, tuple[str, ...]]:
    """(student, why not, inner) of a member at `parts`: whose its top-level entry is, by the name
    the LMS gave it, and the names below it that the student chose (sub-folders, the name of the
    file they uploaded); student None when the entry is no student's, with why not."""
    top, rest = parts[0], parts[1:]
    if not rest:  # a file at the top: only Canvas's and Moodle's flat names say whose
        if m := CANVAS.match(top):
            return m.group(1), "", (m.group(2),)
        if (m := MOODLE_FILE.match(top)) and m.group(2) == "file":
            return m.group(1), "", (m.group(3),)
        return None, f"in Moodle's {m.group(2)} submission, not a file one" if m else UNKNOWN, ()
    if m := MOODLE.match(top):
        if m.group(2) != "file":
            return None, f"in Moodle's {m.group(2)} submission, not a file one", ()
        return m.group(1), "", rest
    if top in chapter_ids():
        return None, "a chapter's folder at the top of the archive, not a student's", ()
    if not STUDENT_ID.match(top) or CANVAS.match(top) or MOODLE_FILE.match(top):
        return None, UNKNOWN, ()
    return top, "", rest


def named_student(inner: tuple[str, ...], owner: str, students: set[str]) -> str | None:
    """Another student than `owner` that a name chosen inside `owner`'s entry points at: a Moodle
    submission's folder or file name, a Canvas file name of a student of the archive (`students`),
    or a folder named as one of them; None when there is none."""
    for i, name in enumerate(inner):
        other = None
        if m := (MOODLE.match(name) or MOODLE_FILE.match(name)):
            other = m.group(1)
        elif (m := CANVAS.match(name)) and m.group(1) in students:
            other = m.group(1)
        elif i < len(inner) - 1 and name in students:
            other = name
        if other is not None and other != owner:
            return other
    return None


def student_of(member: PurePosixPath, chapter: str, students: set[str] = frozenset()) -> tuple[str | None, str]:
    """(student, "") for the notebook at `member` (its path in the archive, read inside any wrapper
    folder), or (None, why it is skipped). The student is the one the top-level entry belongs to;
    a notebook below it that names another of the archive's `students`, or that sits in a student's
    folder for another chapter, is not taken as theirs."""
    parts = member.parts
    if not parts or member.is_absolute() or ".." in parts:
        return None, "not a path inside the archive"
    student, why, inner = entry_of(parts)
    if student is None:
        return None, why
    if (other := named_student(inner, student, students)) is not None:
        return None, f"nested inside {parts[0]}, which belongs to {student} (it names {other})"
    if (len(parts) > 2 and not MOODLE.match(parts[0]) and parts[1] != chapter
            and parts[1] in chapter_ids()):
        return None, f"in {student}'s folder for chapter {parts[1]}, not {chapter}"
    return student, ""


def wrapper(members: list[zipfile.ZipInfo], chapter: str) -> str | None:
    """The one folder every member is in, when it is not itself a student's entry, else None.
    It is a student's entry when it is named as a Moodle submission, or is named as a student
    and holds a notebook (other than one Canvas or Moodle named) directly or in a folder named
    `chapter` (nbgrader's layout); a folder no student can be named as is always read through."""
    paths = [PurePosixPath(m.filename) for m in members]
    tops = {p.parts[0] for p in paths if p.parts}
    if len(tops) != 1 or any(len(p.parts) < 2 and not m.is_dir() for p, m in zip(paths, members)):
        return None
    top = tops.pop()
    if top in ("/", "..") or MOODLE.match(top):
        return None
    if entry_of((top, f"{chapter}.ipynb"))[0] is None:
        return top
    for p in paths:
        inner = p.parts[1:]
        if p.suffix == ".ipynb" and ((len(inner) == 1 and not CANVAS.match(inner[0])
                                      and not MOODLE_FILE.match(inner[0]))
                                     or (len(inner) == 2 and inner[0] == chapter)):
            return None
    return top


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


def is_notebook(info: zipfile.ZipInfo) -> bool:
    """A member to read: a notebook, not a folder or a link."""
    is_link = (info.external_attr >> 16) & 0o170000 == 0o120000
    return not info.is_dir() and not is_link and PurePosixPath(info.filename).suffix == ".ipynb"


def inside(info: zipfile.ZipInfo, top: str | None) -> PurePosixPath:
    """A member's path inside the wrapper folder `top` (None: the archive's own path)."""
    member = PurePosixPath(info.filename)
    return member if top is None else PurePosixPath(*member.parts[1:])


def collect(archive: Path, chapter: str, into: Path, timezone: str | None = None) -> dict[str, str]:
    """Write each student's notebook, and its timestamp.txt, under `into`; return {student: member}.
    `timezone` is the zone of the archive's plain zip times (default: the course's, schedule.yml).
    Prints which member went to which student, handed in when, and how that time was read."""
    zone = ZoneInfo(timezone or load_schedule().timezone)
    chosen: dict[str, zipfile.ZipInfo] = {}
    with zipfile.ZipFile(archive) as zf:
        members = [i for i in zf.infolist() if "__MACOSX" not in PurePosixPath(i.filename).parts]
        if (top := wrapper(members, chapter)) is not None:
            print(f"reading the archive inside {top}/, the one folder every member is in")
        notebooks = [(info, inside(info, top)) for info in members if is_notebook(info)]
        students = {s for _, path in notebooks if path.parts and (s := entry_of(path.parts)[0])}
        for info, path in notebooks:
            student, why = student_of(path, chapter, students)
            if student is None:
                print(f"skipped {info.filename}: {why}")
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
            if other := other_chapter(info.filename, chapter):
                print(f"  warning: {student}'s notebook is named after chapter {other}, not {chapter}: "
                      f"is this {chapter}'s archive, and the student's right notebook?")
        # a student the LMS listed (a folder or file named for them) whose entries hold no notebook to grade
        listed: dict[str, list[str]] = {}
        names: dict[str, str] = {}
        for info in members:
            path = inside(info, top)
            if path.parts and (owner := lms_owner(path.parts[0])) is not None and not info.is_dir():
                listed.setdefault(owner, []).append(info.filename)
                names.setdefault(owner, lms_name(path.parts[0]))
        for student in sorted(set(listed) - set(chosen)):
            held = listed[student]
            print(f"{student}: no notebook in the archive, so nothing to grade for {chapter} ({len(held)} other "
                  f"file(s): {', '.join(held[:2])}{', ...' if len(held) > 2 else ''})")
    if any(names.values()):
        add_names(into / NAMES, names)
        print(f"names of {sum(map(bool, names.values()))} student(s), as the LMS wrote them, kept in "
              f"{into / NAMES} (export uses them)")
    return {s: i.filename for s, i in chosen.items()}


def lms_owner(top: str) -> str | None:
    """The student id an LMS put in a top-level entry's name, whatever the entry holds (a Moodle folder of
    any submission type, a Moodle or Canvas file); None for a name no LMS made."""
    m = MOODLE.match(top) or MOODLE_FILE.match(top) or CANVAS_ANY.match(top)
    return m.group(1) if m else None


def lms_name(top: str) -> str:
    """The name an LMS gave a student in the top-level entry it made for them: Moodle's full name
    (``Alice Smith_1001_assignsubmission_file_``), Canvas's (``smithalice_1001_...``); "" for others."""
    if (m := MOODLE.match(top)) or (m := MOODLE_FILE.match(top)):
        return top[:m.start(1) - 1]
    return top.split("_", 1)[0] if CANVAS_ANY.match(top) else ""


def read_names(path: Path) -> dict[str, str]:
    """{student id: name} of a NAMES file (a roster with student_id and name); {} when there is none."""
    if not path.is_file():
        return {}
    with open(path, newline="") as f:
        return {r["student_id"]: r["name"] for r in csv.DictReader(f) if r.get("student_id") and r.get("name")}


def add_names(path: Path, names: dict[str, str]) -> None:
    """Merge `names` into the NAMES file at `path` (a later archive's name wins)."""
    merged = {**read_names(path), **{s: n for s, n in names.items() if n}}
    if not merged:
        return
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student_id", "name"])
        writer.writerows(sorted(merged.items()))


def other_chapter(filename: str, chapter: str) -> str | None:
    """The chapter id a member's file name holds when it is not `chapter`'s (a Canvas name holds the
    uploaded file's name after the student's), or None."""
    name = PurePosixPath(filename).name
    if chapter in name:
        return None
    return next((ch for ch in sorted(chapter_ids()) if ch in name), None)


def describe_time(info: zipfile.ZipInfo, when: dt.datetime | None, zone: ZoneInfo) -> str:
    """When a member was handed in, and which of the archive's times said so, for the instructor."""
    if when is None:
        return "no time in the archive (never late)"
    source = "the zip's UTC timestamp" if utc_time(info) else f"its local zip time, read in {zone.key}"
    return f"handed in {when:%Y-%m-%d %H:%M:%S} UTC ({source})"
