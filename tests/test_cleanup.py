"""`autograder.cleanup.remove_tree` removes what a kernel can build, where `shutil.rmtree` fails."""

from __future__ import annotations

import os
import shutil

import pytest

from autograder.cleanup import CleanupError, remove_tree


def deep_chain(top, depth: int) -> None:
    """A folder chain `depth` levels deep (deeper than a path may be long), built as a kernel builds it."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = sub
    with open(os.open("leaf", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w") as f:
        f.write("x")
    os.close(fd)


def test_shutil_rmtree_fails_on_a_deep_chain_and_remove_tree_does_not(tmp_path):
    (tmp_path / "a").mkdir()
    deep_chain(tmp_path / "a", 3000)
    with pytest.raises((RecursionError, OSError)):
        shutil.rmtree(tmp_path / "a")
    remove_tree(tmp_path / "a")  # pytest's own clean-up of tmp_path is shutil.rmtree too
    (tmp_path / "b").mkdir()
    deep_chain(tmp_path / "b", 3000)
    assert remove_tree(tmp_path / "b") >= 3001
    assert not (tmp_path / "b").exists()


def test_wide_odd_unreadable_and_special_entries_go_too(tmp_path):
    top = tmp_path / "t"
    (top / "wide").mkdir(parents=True)
    for i in range(3000):
        (top / "wide" / f"f{i}").write_text("")
    os.mkdir(os.fsencode(top) + b"/odd \xff\n name")
    (top / "locked" / "inner").mkdir(parents=True)
    (top / "locked" / "inner" / "file").write_text("x")
    os.chmod(top / "locked" / "inner", 0)
    os.chmod(top / "locked", 0)
    os.mkfifo(top / "pipe")
    os.symlink("/etc", top / "link-to-etc")
    os.symlink(top / "wide", top / "link-to-wide")
    remove_tree(top)
    assert not top.exists() and os.path.isdir("/etc")


def test_a_file_a_link_and_nothing(tmp_path):
    (tmp_path / "f").write_text("x")
    os.symlink(tmp_path / "f", tmp_path / "l")
    assert remove_tree(tmp_path / "l") == 1 and (tmp_path / "f").exists()
    assert remove_tree(tmp_path / "f") == 1 and remove_tree(tmp_path / "f") == 0


def test_what_cannot_be_removed_is_named(tmp_path, monkeypatch):
    (tmp_path / "t" / "x").mkdir(parents=True)

    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "rmdir", refuse)
    with pytest.raises(CleanupError, match="cannot"):
        remove_tree(tmp_path / "t")
