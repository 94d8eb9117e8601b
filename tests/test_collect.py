"""`python -m autograder collect`: LMS exports into nbgrader's layout."""

import datetime as dt
import json
import stat
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

from autograder import collect as collect_module
from autograder.collect import NO_TIME, collect
from autograder.late import read_timestamp
from autograder.schedule import Schedule

NB = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, when in members:
            zf.writestr(zipfile.ZipInfo(name, date_time=when), data)
    return path


def test_canvas_moodle_and_folder_layouts(tmp_path):
    t0, t1 = (2026, 1, 1, 0, 0, 0), (2026, 1, 2, 0, 0, 0)
    archive = _zip(tmp_path / "export.zip", [
        ("lovelaceada_1001_555_01_tokenizing.ipynb", NB, t0),
        ("lovelaceada_late_1001_556_01_tokenizing-1.ipynb", NB + b" ", t1),  # newer: kept
        ("Alan Turing_2002_assignsubmission_file_/my work.ipynb", NB, t0),
        ("grace/01_tokenizing/01_tokenizing.ipynb", NB, t0),
        ("bob/notes.txt", b"not a notebook", t0),
    ])
    found = collect(archive, "01_tokenizing", tmp_path / "subs")
    assert sorted(found) == ["1001", "2002", "grace"]
    assert found["1001"].startswith("lovelaceada_late_")
    assert (tmp_path / "subs" / "1001" / "01_tokenizing" / "01_tokenizing.ipynb").read_bytes() == NB + b" "
    assert (tmp_path / "subs" / "2002" / "01_tokenizing" / "01_tokenizing.ipynb").is_file()


def test_each_notebook_gets_nbgrader_timestamp_of_its_submission(tmp_path, monkeypatch, capsys):
    """timestamp.txt, in nbgrader's format, from the archive's time of the notebook kept: an
    Info-ZIP extended timestamp is UTC; a plain zip time is read in the course's time zone."""
    handed_in = dt.datetime(2026, 10, 5, 21, 13, 7, tzinfo=dt.timezone.utc)
    stamped = zipfile.ZipInfo("grace/01_tokenizing/01_tokenizing.ipynb", date_time=(2026, 1, 1, 0, 0, 0))
    stamped.extra = struct.pack("<HHBI", 0x5455, 5, 1, int(handed_in.timestamp()))
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(stamped, NB)
        for name, when in (("lovelaceada_1001_555_01_tokenizing.ipynb", (2026, 10, 5, 23, 59, 30)),
                           ("Alan Turing_2002_assignsubmission_file_/my work.ipynb", NO_TIME)):
            zf.writestr(zipfile.ZipInfo(name, date_time=when), NB)
    subs = tmp_path / "subs"
    (subs / "2002" / "01_tokenizing").mkdir(parents=True)
    (subs / "2002" / "01_tokenizing" / "timestamp.txt").write_text("from an earlier collection\n")
    monkeypatch.setattr(collect_module, "load_schedule", lambda: Schedule(timezone="Europe/London"))
    collect(archive, "01_tokenizing", subs)
    said = capsys.readouterr().out.splitlines()  # which file went to which student, and how its time was read
    assert sorted(said[:-1]) == [
        "1001: lovelaceada_1001_555_01_tokenizing.ipynb -> 1001/01_tokenizing/01_tokenizing.ipynb, "
        "handed in 2026-10-05 22:59:30 UTC (its local zip time, read in Europe/London)",
        "2002: Alan Turing_2002_assignsubmission_file_/my work.ipynb -> 2002/01_tokenizing/01_tokenizing.ipynb, "
        "no time in the archive (never late)",
        "grace: grace/01_tokenizing/01_tokenizing.ipynb -> grace/01_tokenizing/01_tokenizing.ipynb, "
        "handed in 2026-10-05 21:13:07 UTC (the zip's UTC timestamp)"]
    assert read_timestamp(subs / "grace" / "01_tokenizing") == ("2026-10-05 21:13:07.000000 UTC", None)
    assert read_timestamp(subs / "1001" / "01_tokenizing") == ("2026-10-05 22:59:30.000000 UTC", None)  # BST
    assert not (subs / "2002" / "01_tokenizing" / "timestamp.txt").exists()  # no time: never late
    collect(archive, "01_tokenizing", subs, timezone="America/New_York")
    assert read_timestamp(subs / "1001" / "01_tokenizing") == ("2026-10-06 03:59:30.000000 UTC", None)


def test_hostile_archive_cannot_escape_or_link(tmp_path, monkeypatch, capsys):
    """A member whose path climbs out ("../..") or is absolute is no entry an LMS makes: it is
    reported and skipped, as is a link. `into` and the working directory are nested deep enough
    that an escape would still land inside tmp_path, where the test looks."""
    into, cwd = tmp_path / "a" / "b" / "subs", tmp_path / "c" / "d" / "e"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    absolute = tmp_path / "abs" / "01_tokenizing" / "y.ipynb"
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../../escaped/01_tokenizing/x.ipynb", NB)
        zf.writestr(str(absolute), NB)
        zf.writestr("grace/../mallory/01_tokenizing/01_tokenizing.ipynb", NB)
        link = zipfile.ZipInfo("mallory/01_tokenizing/01_tokenizing.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
        zf.writestr("grace/01_tokenizing/01_tokenizing.ipynb", NB)
    found = collect(archive, "01_tokenizing", into)
    everything = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file() or p.is_symlink())
    assert everything == [Path("a/b/subs/grace/01_tokenizing/01_tokenizing.ipynb"),
                          Path("a/b/subs/grace/01_tokenizing/timestamp.txt"),
                          Path("evil.zip")], everything
    assert sorted(found) == ["grace"]
    said = capsys.readouterr().out
    for member in ("../../escaped/01_tokenizing/x.ipynb", str(absolute),
                   "grace/../mallory/01_tokenizing/01_tokenizing.ipynb"):
        assert f"skipped {member}: not a path inside the archive" in said


def test_cli_rejects_unknown_chapter(tmp_path):
    archive = _zip(tmp_path / "a.zip", [("s1/x.ipynb", NB, (2026, 1, 1, 0, 0, 0))])
    proc = subprocess.run([sys.executable, "-m", "autograder", "collect", str(archive), "--chapter",
                           "99_nothing", "--into", str(tmp_path / "subs")], capture_output=True, text=True)
    assert proc.returncode != 0 and "unknown chapter" in proc.stderr + proc.stdout


def test_cli_says_it_reads_zips_when_given_a_folder(tmp_path):
    folder = tmp_path / "downloaded"
    (folder / "s1").mkdir(parents=True)
    proc = subprocess.run([sys.executable, "-m", "autograder", "collect", str(folder), "--chapter", "01_tokenizing",
                           "--into", str(tmp_path / "subs")], capture_output=True, text=True)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{folder} is not a zip file: collect reads the zip an LMS exports" in proc.stderr, proc.stderr


def test_a_notebook_named_after_another_chapter_is_collected_with_a_warning(tmp_path, capsys):
    got = collected(tmp_path, [("lovelaceada_1001_501_04_attention.ipynb", "ada", OLD),
                               ("turingalan_1002_502_01_tokenizing.ipynb", "alan", OLD)])
    assert got == {"1001": "ada", "1002": "alan"}
    warnings = [line for line in capsys.readouterr().out.splitlines() if "warning" in line]
    assert warnings == ["  warning: 1001's notebook is named after chapter 04_attention, not 01_tokenizing: is "
                        "this 01_tokenizing's archive, and the student's right notebook?"]


# Ownership: whose a notebook is comes from the archive's top-level entry, the one the LMS
# named, never from names a student put inside their own upload. In each archive below a
# student plants, inside their own entry, a newer notebook under names of another student of
# the archive (their folder, their id, their Canvas file name): each student gets exactly
# their own notebook, and the planted one is reported and ignored.
OLD, NEW = (2026, 1, 1, 0, 0, 0), (2026, 1, 9, 0, 0, 0)  # every planted notebook is the newer one


def tagged(tag):
    """A notebook that says whose it is."""
    return json.dumps({"cells": [], "metadata": {"tag": tag}, "nbformat": 4, "nbformat_minor": 5}).encode()


def collected(tmp_path, members, chapter="01_tokenizing"):
    """collect() on a zip of `members` (name, tag, time): {student: the tag of the notebook they got}."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    archive = _zip(tmp_path / "export.zip", [(name, tagged(tag), when) for name, tag, when in members])
    into = tmp_path / "subs"
    found = collect(archive, chapter, into)
    assert sorted(p.name for p in into.iterdir() if p.name != collect_module.NAMES) == sorted(found)
    return {s: json.loads((into / s / chapter / f"{chapter}.ipynb").read_bytes())["metadata"]["tag"]
            for s in found}


def skipped(said, member):
    """The line collect printed about skipping `member`."""
    (line,) = [line for line in said.splitlines() if line.startswith(f"skipped {member}: ")]
    return line


def test_canvas_owner_is_the_name_canvas_gave_the_file(tmp_path, capsys):
    """Canvas prefixes the file a student uploads with `<name>_<user id>_<submission id>_`: what
    follows is the student's own choice, and a Canvas name of another student there is planted."""
    got = collected(tmp_path, [
        ("lovelaceada_1001_501_01_tokenizing.ipynb", "ada", OLD),
        ("turingalan_late_1002_502_01_tokenizing.ipynb", "alan", OLD),
        ("lovelaceada_1001_503_turingalan_1002_502_01_tokenizing.ipynb", "planted by ada", NEW),
    ])
    assert got == {"1001": "ada", "1002": "alan"}
    said = capsys.readouterr().out
    assert skipped(said, "lovelaceada_1001_503_turingalan_1002_502_01_tokenizing.ipynb").endswith(
        "nested inside lovelaceada_1001_503_turingalan_1002_502_01_tokenizing.ipynb, which belongs to 1001 "
        "(it names 1002)")


def test_moodle_owner_is_the_submission_folder_moodle_made(tmp_path, capsys):
    """Moodle's folder `<Full Name>_<id>_assignsubmission_file_/` keeps the sub-folders a student
    uploaded: a notebook in one is theirs, unless the sub-folder is named as another student's
    (their Moodle folder, or their id); `_onlinetext_` folders hold no notebook to grade."""
    alice, bob, carol = ("Alice Smith_1001_assignsubmission_file_", "Bob Jones_1002_assignsubmission_file_",
                         "Carol King_1003_assignsubmission_file_")
    got = collected(tmp_path, [
        (f"{alice}/01_tokenizing.ipynb", "alice", OLD),
        (f"{bob}/my work.ipynb", "bob", OLD),
        (f"{carol}/work/week 2/01_tokenizing.ipynb", "carol, in a sub-folder", OLD),
        (f"{alice}/{bob}/01_tokenizing.ipynb", "planted by alice", NEW),
        (f"{alice}/1002/01_tokenizing/01_tokenizing.ipynb", "planted by alice", NEW),
        (f"{alice}/1003/x.ipynb", "planted by alice", NEW),
        ("Bob Jones_1002_assignsubmission_onlinetext_/onlinetext.ipynb", "online text", NEW),
    ])
    assert got == {"1001": "alice", "1002": "bob", "1003": "carol, in a sub-folder"}
    said = capsys.readouterr().out
    for planted, other in ((f"{alice}/{bob}/01_tokenizing.ipynb", "1002"),
                           (f"{alice}/1002/01_tokenizing/01_tokenizing.ipynb", "1002"),
                           (f"{alice}/1003/x.ipynb", "1003")):
        assert skipped(said, planted).endswith(f"nested inside {alice}, which belongs to 1001 (it names {other})")
    assert "onlinetext" in skipped(said, "Bob Jones_1002_assignsubmission_onlinetext_/onlinetext.ipynb")


def test_moodle_flat_download_owner_is_the_file_name_prefix(tmp_path, capsys):
    """With "Download submissions in folders" off, Moodle names each file
    `<Full Name>_<id>_assignsubmission_file_<file>` (a "_" in a name becomes a space)."""
    planted = "Alice Smith_1001_assignsubmission_file_Bob Jones_1002_assignsubmission_file_x.ipynb"
    got = collected(tmp_path, [
        ("Alice Smith_1001_assignsubmission_file_01_tokenizing.ipynb", "alice", OLD),
        ("Bob Jones_1002_assignsubmission_file_01_tokenizing.ipynb", "bob", OLD),
        (planted, "planted", NEW),
    ])
    assert got == {"1001": "alice", "1002": "bob"}
    assert "(it names 1002)" in skipped(capsys.readouterr().out, planted)


def test_nbgrader_layout_owner_is_the_first_folder(tmp_path, capsys):
    """nbgrader's `<student>/<chapter>/<file>.ipynb`, read from the top: a folder of another student
    nested in it is planted, and a notebook of another chapter is not this chapter's."""
    got = collected(tmp_path, [
        ("alice/01_tokenizing/01_tokenizing.ipynb", "alice", OLD),
        ("bob/01_tokenizing/01_tokenizing.ipynb", "bob", OLD),
        ("alice/01_tokenizing/bob/01_tokenizing/01_tokenizing.ipynb", "planted by alice", NEW),
        ("alice/bob/01_tokenizing/01_tokenizing.ipynb", "planted by alice", NEW),
        ("bob/02_embedding/02_embedding.ipynb", "bob's next chapter", NEW),
    ])
    assert got == {"alice": "alice", "bob": "bob"}
    said = capsys.readouterr().out
    for planted in ("alice/01_tokenizing/bob/01_tokenizing/01_tokenizing.ipynb",
                    "alice/bob/01_tokenizing/01_tokenizing.ipynb"):
        assert skipped(said, planted).endswith("nested inside alice, which belongs to alice (it names bob)")
    assert "02_embedding" in skipped(said, "bob/02_embedding/02_embedding.ipynb")


def test_folder_per_student_owner_is_the_first_folder(tmp_path, capsys):
    """`<student>/<file>.ipynb`: a sub-folder is the student's own, unless it is named as another student."""
    got = collected(tmp_path, [
        ("1001/01_tokenizing.ipynb", "1001", OLD),
        ("1002/notebook.ipynb", "1002", OLD),
        ("1003/drafts/final.ipynb", "1003, in a sub-folder", OLD),
        ("1001/1002/01_tokenizing.ipynb", "planted by 1001", NEW),
        ("1001/Bob Jones_1002_assignsubmission_file_/01_tokenizing.ipynb", "planted by 1001", NEW),
    ])
    assert got == {"1001": "1001", "1002": "1002", "1003": "1003, in a sub-folder"}
    said = capsys.readouterr().out
    assert skipped(said, "1001/1002/01_tokenizing.ipynb").endswith("which belongs to 1001 (it names 1002)")
    assert "(it names 1002)" in skipped(said, "1001/Bob Jones_1002_assignsubmission_file_/01_tokenizing.ipynb")


def test_one_folder_around_everything_is_read_through(tmp_path, capsys):
    """Some downloads wrap the whole archive in one folder (`submissions/`): when every member is in
    it and it is not itself a student's entry, the archive is read inside it; otherwise it is a
    student's entry like any other."""
    moodle = "Alice Smith_1001_assignsubmission_file_"
    wrapped = collected(tmp_path / "a", [
        (f"submissions/{moodle}/01_tokenizing.ipynb", "alice", OLD),
        ("submissions/turingalan_1002_502_01_tokenizing.ipynb", "alan", OLD),
        ("submissions/grace/01_tokenizing/01_tokenizing.ipynb", "grace", OLD),
    ])
    assert wrapped == {"1001": "alice", "1002": "alan", "grace": "grace"}
    assert "reading the archive inside submissions/" in capsys.readouterr().out
    # a folder that cannot be a student's (not a student id) is read through whatever it holds
    around = collected(tmp_path / "f", [(f"CS101-Assignment 4-12345/{moodle}/01_tokenizing.ipynb", "alice", OLD),
                                        ("CS101-Assignment 4-12345/loose.ipynb", "loose", NEW)])
    assert around == {"1001": "alice"}
    said = capsys.readouterr().out
    assert "reading the archive inside CS101-Assignment 4-12345/" in said
    assert "cannot tell whose" in skipped(said, "CS101-Assignment 4-12345/loose.ipynb")
    # one student's folder alone, in nbgrader's layout or as a folder per student: theirs, not a wrapper
    assert collected(tmp_path / "b", [("grace/01_tokenizing/01_tokenizing.ipynb", "grace", OLD)]) == {"grace": "grace"}
    assert collected(tmp_path / "c", [("grace/notebook.ipynb", "grace", OLD)]) == {"grace": "grace"}
    assert collected(tmp_path / "d", [(f"{moodle}/work/x.ipynb", "alice", OLD)]) == {"1001": "alice"}
    # not every member shares it: `submissions` is read as an entry, and what it names is planted
    capsys.readouterr()
    got = collected(tmp_path / "e", [(f"submissions/{moodle}/01_tokenizing.ipynb", "planted", NEW),
                                     ("Bob Jones_1002_assignsubmission_file_/x.ipynb", "bob", OLD)])
    assert got == {"1002": "bob"}
    assert "(it names 1001)" in skipped(capsys.readouterr().out, f"submissions/{moodle}/01_tokenizing.ipynb")


def test_members_that_are_no_students_entry_are_reported(tmp_path, capsys):
    got = collected(tmp_path, [
        ("notebook.ipynb", "loose", NEW),
        ("01_tokenizing/01_tokenizing.ipynb", "a chapter's folder", NEW),
        ("grace/01_tokenizing/01_tokenizing.ipynb", "grace", OLD),
    ])
    assert got == {"grace": "grace"}
    said = capsys.readouterr().out
    assert "cannot tell whose" in skipped(said, "notebook.ipynb")
    assert "chapter" in skipped(said, "01_tokenizing/01_tokenizing.ipynb")


def test_the_names_the_lms_wrote_are_kept_for_export(tmp_path, capsys):
    """Moodle's full names and Canvas's names, as the download spells them, go to SUBMISSIONS/lms-names.csv,
    merged over archives (a later one's name wins); a folder of the nbgrader layout has no name to keep."""
    subs = tmp_path / "subs"
    collect(_zip(tmp_path / "a.zip", [("Alice Smith_1001_assignsubmission_file_/01_tokenizing.ipynb", NB, OLD),
                                      ("Bob Jones_1002_assignsubmission_file_01_tokenizing.ipynb", NB, OLD),
                                      ("grace/01_tokenizing/01_tokenizing.ipynb", NB, OLD)]),
            "01_tokenizing", subs)
    assert "names of 2 student(s), as the LMS wrote them, kept in" in capsys.readouterr().out
    collect(_zip(tmp_path / "b.zip", [("smithalice_1001_77_02_embedding.ipynb", NB, OLD)]), "02_embedding", subs)
    assert collect_module.read_names(subs / collect_module.NAMES) == {"1001": "smithalice", "1002": "Bob Jones"}


def test_a_student_the_archive_lists_without_a_notebook_is_reported(tmp_path, capsys):
    """Moodle's online-text folder (or a Canvas file that is no notebook) holds nothing to grade: collect says
    so for that student, instead of leaving them out in silence, and keeps their name."""
    subs = tmp_path / "subs"
    collect(_zip(tmp_path / "a.zip", [
        ("Alice Smith_1001_assignsubmission_file_/01_tokenizing.ipynb", NB, OLD),
        ("Frank Moore_1006_assignsubmission_onlinetext_/onlinetext.html", b"<p>see attached</p>", OLD),
        ("smithbob_1002_55_notes.pdf", b"%PDF", OLD)]), "01_tokenizing", subs)
    said = capsys.readouterr().out
    assert ("1006: no notebook in the archive, so nothing to grade for 01_tokenizing (1 other file(s): "
            "Frank Moore_1006_assignsubmission_onlinetext_/onlinetext.html)") in said
    assert "1002: no notebook in the archive" in said and "1001: no notebook" not in said
    assert collect_module.read_names(subs / collect_module.NAMES) == {"1001": "Alice Smith", "1006": "Frank Moore",
                                                                     "1002": "smithbob"}
