"""nbgrader's Execute preprocessor, hardened for untrusted notebooks.

* Output floods: nbclient keeps every message from the kernel in the
  grader's memory, and ZeroMQ queues what nbclient has not read yet.
  `GuardedExecute` refuses kernel messages bigger than `max_message_bytes`
  and queues at most `max_queued_messages` (both at the socket), and keeps
  at most `max_output_bytes` of messages per notebook (outputs, display
  updates, widget traffic); it drops the rest. The judge never reads
  outputs anyway.
* Kernel death (``os._exit``, a killed kernel, the sandbox's wall-clock
  limit): nbclient raises and nbgrader would discard the whole notebook.
  `GuardedExecute` keeps the cells that ran, so the judge can still credit
  the checks recorded before the kernel died.
* Forged or garbled messages: a message whose signature does not check out
  (a forked child writing on the kernel's sockets, or a forger) would make
  nbclient raise, and nbgrader would drop the whole notebook. The grader's
  channels (`TolerantChannel`) drop such a message, log it and go on.
* A time budget for the student's own cells (`notebook_seconds`, see
  `autograder.limits`): every cell but the test cells runs within what is
  left of it. Once it is spent, a cell that only defines (an answer cell, or
  one of nothing but imports and definitions: `defines_only`) still runs,
  within `after_budget_seconds`, and the others are not run. The test cells
  always run, each within its own limit (`test_cell_seconds`), whatever the
  student's cells took: a long training cell left in a notebook costs time,
  not the grade. A notebook whose every function loops forever costs the
  budget, plus a few seconds per check (the kernel's checks give up on a
  call after `course.probing.runner.CASE_SECONDS` of processor time).
* A kernel that ignores the interrupt at a cell's time limit (it ignores
  SIGINT, or broke the machinery that answers) would hold the notebook
  until the wall clock: after `interrupt_grace_seconds` without an answer
  the kernel is killed, and the cells that ran keep their credit.
* Each kernel gets a fresh folder for its IPC sockets (`socket_dir`),
  which also holds its working directory and its log (`sandbox.SCRATCH`,
  `sandbox.KERNEL_LOG`); the folder, and the kernel's CPU cgroup, are
  removed once the kernel is gone.
* Display updates reach only the cell that is running, so a later cell
  cannot rewrite what an earlier one showed.
* The kernel had the notebook's folder to itself: before the grader writes
  anything there (the graded notebook), `reclaim_folder` takes the folder
  back and removes the links, pipes and devices the kernel may have left.

What happened (kernel death, interrupted cells, truncated output, removed
links) goes to a status file that `grade` reports in grades.csv, with the
notebook's run time and the grader's peak memory so far.
"""

from __future__ import annotations

import ast
import asyncio
import json
import math
import logging
import os
import resource
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

import zmq
import zmq.asyncio
from jupyter_client import AsyncKernelManager
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_core.utils import ensure_async
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Integer, Type, Unicode, default

from course.cells import is_test_cell
from course.protocol import status_name

from . import sandbox
from .cleanup import CleanupError, empty_folder, remove_tree

#: folders the kernel nests deeper than this are deleted after it ran
MAX_DEPTH = 16


def status_path(status_dir: str | Path, student: str, assignment: str) -> Path:
    """Where `GuardedExecute` notes what happened while a notebook ran."""
    return Path(status_dir) / status_name(student, assignment)


def reclaim_folder(folder: Path) -> int:
    """Make a folder the kernel wrote in safe for the grader to write in.

    Every directory is given back to the grader's user (so that nothing can
    add entries to it any more) and emptied of what is not a regular file or
    a directory: links, pipes, sockets. Directories nested deeper than
    `MAX_DEPTH` are removed. Works on file descriptors, never following a
    link. Returns how many entries were removed (a folder too deep counts as
    one, whatever it held).
    """
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        return _reclaim(fd, 0)
    finally:
        os.close(fd)


def _reclaim(fd: int, depth: int) -> int:
    removed = 0
    os.fchown(fd, os.geteuid(), os.getegid())
    os.fchmod(fd, 0o755)
    for entry in os.scandir(fd):
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode) and depth < MAX_DEPTH:
            sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            try:
                removed += _reclaim(sub, depth + 1)
            finally:
                os.close(sub)
        elif stat.S_ISDIR(mode):  # deeper than any honest folder: emptied without recursing (`cleanup`)
            sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            try:
                empty_folder(sub)  # counted as one entry: what it held is the kernel's business
            finally:
                os.close(sub)
            os.rmdir(entry.name, dir_fd=fd)
            removed += 1
        elif stat.S_ISREG(mode):
            os.chown(entry.name, os.geteuid(), os.getegid(), dir_fd=fd, follow_symlinks=False)
        else:
            os.unlink(entry.name, dir_fd=fd)
            removed += 1
    return removed


#: a Unix socket's path holds at most 107 bytes, and ZeroMQ appends "-<n>" to the kernel's address
MAX_SOCKET_PATH = 100


def kernel_socket_folder(socket_dir: Path) -> Path:
    """A fresh, private folder for one kernel's IPC sockets.

    It is made in `socket_dir`, or, when that path is too long for a Unix
    socket's address (a deep --out folder), in the system's temporary folder.
    """
    socket_dir.mkdir(parents=True, exist_ok=True)
    for base in (socket_dir, Path(tempfile.gettempdir())):
        folder = Path(tempfile.mkdtemp(prefix="k", dir=base))
        if len(str(folder / "k-65535")) <= MAX_SOCKET_PATH:
            return folder
        folder.rmdir()
    raise RuntimeError(f"no folder for IPC sockets with a path under {MAX_SOCKET_PATH} bytes: "
                       "set TMPDIR to a short path")


def defines_only(cell: NotebookNode) -> bool:
    """Whether a cell still runs once the budget is spent: an answer cell (nbgrader's solution), or a
    cell of nothing but imports, function and class definitions (what later cells may need)."""
    if utils.is_solution(cell):
        return True
    try:
        body = ast.parse(cell.source).body
    except SyntaxError:
        return False
    kinds = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return all(isinstance(node, kinds) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
               for node in body)


class TolerantChannel(AsyncZMQSocketChannel):
    """A channel that drops (and counts) a message that fails to deserialize, such as one
    with an invalid signature, instead of raising: nbclient would stop the notebook.
    `dropped` counts for the whole process (nbgrader runs one notebook at a time)."""

    dropped = 0

    async def _recv(self, **kwargs: Any) -> dict[str, Any]:
        parts = await self.socket.recv_multipart(**kwargs)
        try:
            _, message = self.session.feed_identities(parts)
            return self.session.deserialize(message)
        except (ValueError, KeyError, TypeError) as err:  # jupyter_client's errors for a bad message
            TolerantChannel.dropped += 1
            logging.getLogger(__name__).warning("dropped a kernel message that failed its checks: %s", err)
            # a message of no cell (empty parent header), which nbclient ignores
            return {"header": {"msg_type": "dropped"}, "parent_header": {}, "msg_type": "dropped",
                    "content": {}, "metadata": {}, "buffers": []}


class TolerantKernelClient(AsyncKernelClient):
    """The grader's kernel client: every channel is a `TolerantChannel`."""

    shell_channel_class = Type(TolerantChannel)
    iopub_channel_class = Type(TolerantChannel)
    stdin_channel_class = Type(TolerantChannel)
    control_channel_class = Type(TolerantChannel)


class BoundedKernelManager(AsyncKernelManager):
    """A kernel manager whose clients are `TolerantKernelClient`s using its ZeroMQ context,
    and so the socket limits `GuardedExecute` sets on it."""

    client_factory = Type(TolerantKernelClient)

    @default("context")
    def _context_default(self) -> zmq.asyncio.Context:
        """One ZeroMQ context for every kernel this process runs, never terminated (as
        jupyter_server's shared context): a grading worker runs kernel after kernel, and
        terminating each kernel's own context can wait forever for a socket that a channel
        thread, killed by the termination itself, never closed."""
        self._created_context = False
        return zmq.asyncio.Context.instance()

    def client(self, **kwargs: Any) -> Any:
        return super().client(context=self.context, **kwargs)


class GuardedExecute(Execute):
    """`Execute` that survives hostile kernels and notes what they did."""

    max_output_bytes = Integer(2_000_000, help="kernel messages kept per notebook").tag(config=True)
    max_message_bytes = Integer(8 * 1024**2, help="larger kernel messages are refused").tag(config=True)
    max_queued_messages = Integer(128, help="kernel messages queued unread at most; more are dropped").tag(config=True)
    status_dir = Unicode("", help="where to note kernel deaths, timeouts and floods").tag(config=True)
    socket_dir = Unicode("", help="where each kernel gets a private folder for its IPC sockets").tag(config=True)
    wall_seconds = Integer(600, help="the sandbox's wall-clock limit (for the message)").tag(config=True)
    test_cell_seconds = Integer(0, help="interrupt an autograder test cell after this long "
                                "(0: the per-cell timeout)").tag(config=True)
    notebook_seconds = Integer(0, help="the student's cells' time budget: no cell but a test cell runs past "
                               "it, and once it is spent only cells that define run (0: no budget)").tag(config=True)
    after_budget_seconds = Integer(5, help="what a cell that defines gets once the budget is spent").tag(config=True)
    interrupt_grace_seconds = Float(5.0, help="kill a kernel that has not answered the interrupt at a "
                                    "cell's time limit this long after it").tag(config=True)
    raise_on_iopub_timeout = Bool(False, help="stop the notebook when a cell's output is lost "
                                  "(a refused message): no, go on with the next cell").tag(config=True)
    #: every code cell runs: intake removes the tags, and no tag may skip a cell the seed counted
    skip_cells_with_tag = Unicode("\0 no tag skips a cell").tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("kernel_manager_class", BoundedKernelManager)
        super().__init__(**kwargs)
        self.timeout_func = self._cell_timeout

    def _cell_timeout(self, cell: NotebookNode) -> int | None:
        """A test cell's own timeout; any other cell's, never past what is left of the budget (a cell
        that defines gets `after_budget_seconds` once it is spent). None: no limit."""
        if is_test_cell(cell):
            return min(self.test_cell_seconds or self.timeout, self.timeout or self.test_cell_seconds) or None
        left = self._budget_left()
        if left is None:
            return self.timeout
        if left <= 0:
            return min(self.after_budget_seconds, self.timeout or self.after_budget_seconds)
        return max(1, min(self.timeout or left, math.ceil(left)))

    def _budget_left(self) -> float | None:
        """Seconds left of the student's cells' budget (None: no budget)."""
        if not self.notebook_seconds:
            return None
        return self.notebook_seconds - self._spent

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int) -> tuple[NotebookNode, dict]:
        """Run the cell, unless the budget is spent and it is a cell that computes (then note it, and
        run nothing); the time a cell other than a test cell takes comes off the budget."""
        if cell.cell_type != "code" or is_test_cell(cell):
            return super().preprocess_cell(cell, resources, index)
        left = self._budget_left()
        if left is not None and left <= 0 and not defines_only(cell):
            self._not_run.append(index)
            return cell, resources
        start = time.monotonic()
        try:
            return super().preprocess_cell(cell, resources, index)
        finally:
            self._spent += time.monotonic() - start

    def create_kernel_manager(self) -> Any:
        km = super().create_kernel_manager()
        km.context.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)  # for the sockets made after this
        km.context.setsockopt(zmq.RCVHWM, self.max_queued_messages)
        if self.socket_dir:  # one folder per kernel: nothing there is shared with another student
            self._sockets = kernel_socket_folder(Path(self.socket_dir))
            km.ip = str(self._sockets / "k")
        return km

    def preprocess(self, nb: NotebookNode, resources: dict, km: Any = None) -> tuple[NotebookNode, dict]:
        self._kept = 0
        self._flooded = False
        self._timed_out: list[int] = []
        self._finished: set[int] = set()  # cells whose end of output arrived
        self._running = -1
        self._sockets: Path | None = None
        self._ignored_interrupt = False
        self._not_run: list[int] = []
        TolerantChannel.dropped = 0
        problem = leftover = None
        start, iopub_timeout = time.monotonic(), self.iopub_timeout
        self._start, self._spent = start, 0.0
        try:
            nb, resources = super().preprocess(nb, resources, km=km)
        except (DeadKernelError, CellTimeoutError, RuntimeError) as err:
            if self._ignored_interrupt:
                problem = (f"kernel killed: it did not stop {self.interrupt_grace_seconds:g} s after "
                           "being interrupted at the per-cell time limit")
            elif time.monotonic() - start >= self.wall_seconds - 2:
                problem = f"kernel killed at the {self.wall_seconds} s time limit"
            else:
                problem = f"kernel died ({type(err).__name__})"
            self.log.warning("%s: %s", resources["nbgrader"]["student"], problem)
        finally:  # the kernel is gone, however it ended
            self.iopub_timeout = iopub_timeout
            if self._sockets:
                self._log_kernel_output(problem)
                try:
                    remove_tree(self._sockets)  # the kernel's scratch folder, whatever it built there
                except CleanupError as err:
                    leftover = str(err)
                    self.log.warning("%s: %s", resources["nbgrader"]["student"], err)
                group = sandbox.cpu_group_of(self._sockets)
                if group is not None:
                    sandbox.remove_cpu_group(group, wait=2.0)
            removed = reclaim_folder(Path(resources["metadata"]["path"]))
        if self._not_run and problem is None:
            problem = (f"the time budget of {self.notebook_seconds} s for the notebook's own cells ran out: "
                       f"{len(self._not_run)} cell(s) not run (the test cells ran)")
        self._write_status(resources["nbgrader"], {
            "problem": problem,
            "dropped_messages": TolerantChannel.dropped,
            "timed_out_cells": self._timed_out,
            "cells_not_run": self._not_run,
            "output_truncated": self._flooded,
            "removed_entries": removed,
            "leftover": leftover,
            "seconds": round(time.monotonic() - start, 2),
            "grader_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        })
        return nb, resources

    def _log_kernel_output(self, problem: str | None) -> None:
        """Put the end of what a kernel that died wrote to its own stdout/stderr in the grader's log."""
        if problem is None or self._sockets is None:
            return
        try:  # the kernel owned the folder: open nothing but a regular file, never a link
            fd = os.open(self._sockets / sandbox.KERNEL_LOG, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return
            f.seek(max(0, info.st_size - 2000))
            tail = f.read(2000).decode("utf-8", errors="replace").strip()
        if tail:
            self.log.warning("the kernel's own output ended with:\n%s", tail)

    def _write_status(self, info: dict, note: dict) -> None:
        if self.status_dir:
            path = status_path(self.status_dir, info["student"], info["assignment"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(note))

    async def _async_handle_timeout(self, timeout: int, cell: NotebookNode | None = None) -> dict | None:
        """Interrupt the cell (nbclient's way); if the kernel has not finished the cell
        `interrupt_grace_seconds` later, kill it: DeadKernelError ends the notebook."""
        reply = await super()._async_handle_timeout(timeout, cell)
        index = next((i for i, c in enumerate(self.nb.cells) if c is cell), self._running)
        deadline = time.monotonic() + self.interrupt_grace_seconds
        while index not in self._finished and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if index not in self._finished:
            self._ignored_interrupt = True
            self.log.warning("the kernel ignored the interrupt: killing it")
            await ensure_async(self.km.shutdown_kernel(now=True))
            raise DeadKernelError("the kernel ignored the interrupt at the per-cell time limit")
        return reply

    def on_cell_executed(self, **kwargs: Any) -> None:
        super().on_cell_executed(**kwargs)
        if kwargs["execute_reply"]["content"].get("ename") == self.error_on_timeout["ename"]:
            self._timed_out.append(kwargs["cell_index"])
        elif kwargs["cell_index"] not in self._finished:
            # The cell ended but its output did not: it was refused or dropped at the
            # socket, which may then stay disconnected. Do not wait long for more.
            self._flooded = True
            self.iopub_timeout = 1

    def process_message(self, msg: dict, cell: NotebookNode, cell_index: int) -> NotebookNode | None:
        self._running = cell_index
        if msg["msg_type"] == "status":  # status messages end a cell: always let them through
            if msg["content"].get("execution_state") == "idle":
                self._finished.add(cell_index)
            return super().process_message(msg, cell, cell_index)
        if not self._flooded:
            self._kept += len(json.dumps(msg.get("content", {}), default=str))
            self._flooded = self._kept > self.max_output_bytes
        return None if self._flooded else super().process_message(msg, cell, cell_index)

    def _update_display_id(self, display_id: str, msg: dict) -> None:
        cells = self._display_id_map.get(display_id)
        if not cells:
            return
        self._display_id_map[display_id] = {i: v for i, v in cells.items() if i == self._running}
        try:
            super()._update_display_id(display_id, msg)
        finally:
            self._display_id_map[display_id] = cells
