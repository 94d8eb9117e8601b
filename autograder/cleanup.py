"""Removing what a kernel (or a student's upload) left, whatever its shape.

`shutil.rmtree` recurses once per level: a folder chain a few thousand levels
deep, which one line of student code builds in its working folder, makes it
raise RecursionError (which ``ignore_errors`` does not catch), and a path that
deep is longer than the kernel lets a path be. `remove_tree` never recurses
and never walks a path: it works on file descriptors, two at a time, moving
each subfolder up into the top folder before emptying it, so any depth and
any width take the same few lines of stack. It never follows a link, makes
every folder it empties writable first (the kernel may have taken the
permissions away), and raises `CleanupError`, naming the path, on what it
cannot remove.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class CleanupError(OSError):
    """A tree could not be removed whole (the message says what and why)."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _open_dir(name: str, dir_fd: int | None = None) -> int:
    return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _writable(fd: int) -> None:
    try:
        os.fchmod(fd, 0o700)
    except OSError:
        pass  # not ours to change: the unlinks below say whether it matters


def remove_tree(path: Path | str) -> int:
    """Delete `path`, a file, a link, or a folder of any depth and width; nothing if it is not there.
    Returns how many entries were removed. Raises `CleanupError` if something stays."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return 0
    except OSError as err:
        raise CleanupError(f"cannot look at {path}: {err.strerror}") from err
    try:
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(path)
            return 1
        top = _open_dir(str(path))
    except OSError as err:
        raise CleanupError(f"cannot remove {path}: {err.strerror}") from err
    try:
        removed = empty_folder(top)
    except OSError as err:
        raise CleanupError(f"cannot empty {path}: {err.strerror}") from err
    finally:
        os.close(top)
    try:
        os.rmdir(path)
    except OSError as err:
        raise CleanupError(f"cannot remove {path}: {err.strerror}") from err
    return removed + 1


def empty_folder(top: int) -> int:
    """Remove everything inside the open folder `top` (a file descriptor), at any depth, without
    recursing: each subfolder is moved up into `top` under a fresh name, then emptied the same way,
    then removed. Returns how many entries were removed."""
    _writable(top)
    known = set(os.listdir(top))
    pending = [name for name in known if _is_dir(name, top)]
    removed = _unlink_files(top, skip=set(pending))
    counter = 0
    while pending:
        name = pending.pop()
        fd = _open_dir(name, top)
        try:
            _writable(fd)
            for entry in os.scandir(fd):
                if entry.is_dir(follow_symlinks=False):
                    while f"\x01rm{counter}" in known:
                        counter += 1
                    fresh = f"\x01rm{counter}"
                    os.rename(entry.name, fresh, src_dir_fd=fd, dst_dir_fd=top)
                    known.add(fresh)
                    pending.append(fresh)
                else:
                    os.unlink(entry.name, dir_fd=fd)
                    removed += 1
        finally:
            os.close(fd)
        os.rmdir(name, dir_fd=top)
        known.discard(name)
        removed += 1
    return removed


def _is_dir(name: str, dir_fd: int) -> bool:
    return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)


def _unlink_files(fd: int, skip: set[str]) -> int:
    removed = 0
    for name in os.listdir(fd):
        if name not in skip:
            os.unlink(name, dir_fd=fd)
            removed += 1
    return removed


def remove_quietly(path: Path | str) -> str | None:
    """`remove_tree`, returning what went wrong instead of raising (None: all gone)."""
    try:
        remove_tree(path)
    except CleanupError as err:
        return str(err)
    return None
