"""`python -m autograder collect`: LMS exports into nbgrader's layout."""

import datetime as dt
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
    assert sorted(said) == [
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


def test_hostile_archive_cannot_escape_or_link(tmp_path, monkeypatch):
    """Every escape the archive tries would land inside tmp_path, where the
    test looks: `into` and the working directory are nested deep enough
    that "../.." stays inside, and the absolute member points into it."""
    into, cwd = tmp_path / "a" / "b" / "subs", tmp_path / "c" / "d" / "e"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    absolute = tmp_path / "abs" / "01_tokenizing" / "y.ipynb"
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../../escaped/01_tokenizing/x.ipynb", NB)
        zf.writestr(str(absolute), NB)
        link = zipfile.ZipInfo("mallory/01_tokenizing/01_tokenizing.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
    found = collect(archive, "01_tokenizing", into)
    everything = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file() or p.is_symlink())
    assert everything == [Path("a/b/subs/abs/01_tokenizing/01_tokenizing.ipynb"),
                          Path("a/b/subs/abs/01_tokenizing/timestamp.txt"),
                          Path("a/b/subs/escaped/01_tokenizing/01_tokenizing.ipynb"),
                          Path("a/b/subs/escaped/01_tokenizing/timestamp.txt"),
                          Path("evil.zip")], everything
    assert sorted(found) == ["abs", "escaped"]
    assert all(f.read_bytes() == NB for f in into.rglob("*.ipynb"))


def test_cli_rejects_unknown_chapter(tmp_path):
    archive = _zip(tmp_path / "a.zip", [("s1/x.ipynb", NB, (2026, 1, 1, 0, 0, 0))])
    proc = subprocess.run([sys.executable, "-m", "autograder", "collect", str(archive), "--chapter",
                           "99_nothing", "--into", str(tmp_path / "subs")], capture_output=True, text=True)
    assert proc.returncode != 0 and "unknown chapter" in proc.stderr + proc.stdout
