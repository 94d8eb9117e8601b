"""`python -m autograder collect`: LMS exports into nbgrader's layout."""

import stat
import subprocess
import sys
import zipfile
from pathlib import Path

from autograder.collect import collect

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
                          Path("a/b/subs/escaped/01_tokenizing/01_tokenizing.ipynb"),
                          Path("evil.zip")], everything
    assert sorted(found) == ["abs", "escaped"]
    assert all(f.read_bytes() == NB for f in into.rglob("*.ipynb"))


def test_cli_rejects_unknown_chapter(tmp_path):
    archive = _zip(tmp_path / "a.zip", [("s1/x.ipynb", NB, (2026, 1, 1, 0, 0, 0))])
    proc = subprocess.run([sys.executable, "-m", "autograder", "collect", str(archive), "--chapter",
                           "99_nothing", "--into", str(tmp_path / "subs")], capture_output=True, text=True)
    assert proc.returncode != 0 and "unknown chapter" in proc.stderr + proc.stdout
