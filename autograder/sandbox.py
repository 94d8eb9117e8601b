"""Run one student's Jupyter kernel inside a bubblewrap sandbox.

nbgrader starts kernels from a kernelspec; the grader's kernelspec runs
``python -m autograder.sandbox --lib LIB CONNECTION_FILE``, which execs
bubblewrap (``bwrap``) around an ordinary ipykernel (``--wall`` and
``--memory`` set a chapter's own limits: see `autograder.limits`). Inside
the sandbox:

* the only writable places are the submission's own folder (mounted at
  /submission, the kernel's working directory), a private, size-capped
  /tmp, and the kernel's private folder for its IPC sockets;
* visible read-only: the system's /usr, the Python installation and the
  virtual environment, and a copy of the `course` package holding only the
  reference modules of *earlier* chapters. Not visible: solutions/, the
  gradebook, release files, the grading secret, other students' folders,
  and the notebook file itself (it holds the restored hidden tests; the
  kernel gets its cells from nbgrader, not from the file);
* no network (a new, empty network namespace: the kernel talks to nbgrader
  over IPC sockets, not TCP), new PID/IPC/UTS namespaces, no capabilities;
* when the grader runs as root, the kernel runs as an unprivileged uid of
  its own (a fresh one per kernel), so the limit on processes holds (it
  does not for root) and counts that kernel's processes only;
* resource limits: CPU time (the larger of `CPU_SECONDS` and the wall
  clock), address space, file size, processes, open files, and a
  wall-clock cap after which the kernel is killed.

The kernel's connection file is handed in through a pipe (``--ro-bind-data``)
so the sandbox never sees the grader's runtime folder. The IPC sockets live
in a folder of their own, made for this kernel alone and mounted at
/run/sockets inside.

What this does not bound: disk space (each file is capped, the number of
files is not) and the machine's total memory (the address-space limit is
per process); see the README's section for instructors.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import resource
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from course.protocol import PROBE_DIR_ENV, PROBE_DIRNAME

#: when the grader is root, each kernel runs as a uid of its own from this
#: range, in no /etc/passwd: the process limit then counts that kernel's
#: processes only, and no two kernels (or grade runs) can signal each other
UID_RANGE = range(2_000_000_000, 2_100_000_000)
CPU_SECONDS = 600
MEMORY_BYTES = 6 * 1024**3  # address space, by default; torch alone maps ~1-2 GiB
FILE_BYTES = 64 * 1024**2
TMP_BYTES = 256 * 1024**2  # /tmp is memory: cap it
PROCESSES = 64  # threads count too; a kernel uses about ten
OPEN_FILES = 1024
WALL_SECONDS = 600  # by default
CELL_SECONDS = 60  # by default, nbgrader interrupts a cell after this long
TEST_CELL_SECONDS = 20  # ... and an autograder test cell after this long (its checks take seconds)
INSIDE_LIB = "/opt/course-lib"
INSIDE_WORK = "/submission"
INSIDE_CONNECTION = "/run/kernel.json"
INSIDE_SOCKETS = "/run/sockets"
INSIDE_VENV = "/opt/venv"


def available() -> str | None:
    """None when a sandboxed process can start here, else the reason."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    probe = bwrap_command(Path("/tmp"), None, [inside_python(), "-c", "import ipykernel"],
                          sockets=None, wall=60)
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=60,
                              preexec_fn=_limits, pass_fds=())
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bubblewrap could not start: {err}"
    if proc.returncode:
        return f"bubblewrap could not start: {proc.stderr.strip()[-300:]}"
    return None


def kernel_uid() -> int:
    """An unused uid for one kernel."""
    while True:
        uid = UID_RANGE[secrets.randbelow(len(UID_RANGE))]
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        p = Path(top)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), top]
        elif p.is_dir():
            args += ["--ro-bind", top, top]
    for f in ("/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf"):
        if Path(f).exists():
            args += ["--ro-bind", f, f]
    base = str(Path(sys.base_prefix).resolve())  # a venv's python finds it by its real path
    args += [*_parents(base), "--ro-bind", base, base]
    if sys.prefix != sys.base_prefix:
        args += ["--ro-bind", sys.prefix, INSIDE_VENV]
    return args


def _parents(path: str) -> list[str]:
    """Create `path`'s parent folders traversable (bwrap makes them 0700)."""
    args = []
    for parent in reversed(Path(path).parents[:-1]):
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def inside_python() -> str:
    """The path of this Python interpreter as the sandbox sees it."""
    if sys.prefix != sys.base_prefix:
        return f"{INSIDE_VENV}/bin/{Path(sys.executable).name}"
    return sys.executable


def bwrap_command(workdir: Path, lib: Path | None, command: list[str], *, sockets: Path | None, wall: int,
                  uid: int | None = None, connection_fd: int | None = None, hidden: Sequence[str] = ()) -> list[str]:
    """The full bwrap command line that runs `command` in the sandbox.

    `hidden` names files in `workdir` that the sandbox must not read: each
    is covered by /dev/null, which the sandbox (mounted nodev) cannot open.
    `uid` is the user the command runs as when the grader is root (default:
    a fresh `kernel_uid`).
    """
    args = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp",
            "--perms", "0755", "--dir", "/run", "--perms", "0755", "--dir", "/opt", *_system_binds(),
            "--bind", str(workdir), INSIDE_WORK, "--chdir", INSIDE_WORK]
    for name in hidden:
        args += ["--ro-bind", "/dev/null", f"{INSIDE_WORK}/{name}"]
    if lib is not None:
        args += ["--ro-bind", str(lib), INSIDE_LIB]
    if sockets is not None:
        args += ["--bind", str(sockets), INSIDE_SOCKETS]
    if connection_fd is not None:
        args += ["--perms", "0444", "--ro-bind-data", str(connection_fd), INSIDE_CONNECTION]
    path = f"{Path(inside_python()).parent}:/usr/bin:/bin"
    env = {"PATH": path, "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONPATH": INSIDE_LIB,
           "PYTHONDONTWRITEBYTECODE": "1", "MPLCONFIGDIR": "/tmp/matplotlib", "IPYTHONDIR": "/tmp/ipython",
           "OMP_NUM_THREADS": "1", "NBGRADER_EXECUTION": "autograde", "USER": "student", "LOGNAME": "student",
           PROBE_DIR_ENV: PROBE_DIRNAME}  # relative: the kernel runs in the notebook's folder
    args.append("--clearenv")
    for k, v in env.items():
        args += ["--setenv", k, v]
    if os.geteuid() == 0:
        # bwrap as root keeps CAP_SETUID/SETGID only so that setpriv can drop
        # to the kernel's uid (and drop every capability) before the kernel starts.
        uid = kernel_uid() if uid is None else uid
        args += ["--cap-add", "CAP_SETUID,CAP_SETGID", "--", "timeout", "--signal=KILL", str(wall),
                 "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--bounding-set=-all", "--inh-caps=-all", "--"]
    else:
        args += ["--unshare-user", "--", "timeout", "--signal=KILL", str(wall)]
    return args + command


def _limits(memory_bytes: int = MEMORY_BYTES, cpu_seconds: int = CPU_SECONDS) -> None:
    for limit, value in ((resource.RLIMIT_CPU, cpu_seconds), (resource.RLIMIT_AS, memory_bytes),
                         (resource.RLIMIT_FSIZE, FILE_BYTES), (resource.RLIMIT_NOFILE, OPEN_FILES),
                         (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))
    if os.geteuid() == 0:  # counted per real user: only meaningful for the kernel's own uid
        resource.setrlimit(resource.RLIMIT_NPROC, (PROCESSES, PROCESSES))


def _give_to(uid: int, folder: Path) -> None:
    """Let the kernel's user write the submission's folder (grader running as root)."""
    for root, dirs, files in os.walk(folder):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(name, uid, uid)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="start an ipykernel inside the grading sandbox")
    parser.add_argument("--lib", type=Path, required=True, help="the course package copy to expose")
    parser.add_argument("--wall", type=int, default=WALL_SECONDS, help="kill the kernel after this many seconds")
    parser.add_argument("--memory", type=int, default=MEMORY_BYTES, help="address space of each process, in bytes")
    parser.add_argument("connection_file", type=Path)
    args = parser.parse_args(argv)

    info = json.loads(args.connection_file.read_text())
    if info.get("transport") != "ipc" or not os.path.isabs(info.get("ip", "")):
        sys.exit("the sandbox has no network: configure KernelManager.transport = 'ipc' "
                 "and GuardedExecute.socket_dir (an absolute path)")
    workdir = Path.cwd()
    sockets = Path(info["ip"]).parent  # the kernel's own folder (GuardedExecute.socket_dir)
    uid = kernel_uid()
    if os.geteuid() == 0:
        _give_to(uid, workdir)
        os.chown(sockets, uid, uid)
    inside = dict(info, ip=f"{INSIDE_SOCKETS}/{Path(info['ip']).name}")  # same files, seen from inside
    read_fd, write_fd = os.pipe()
    os.write(write_fd, json.dumps(inside).encode())
    os.close(write_fd)
    os.set_inheritable(read_fd, True)
    kernel = [inside_python(), "-m", "ipykernel_launcher", "-f", INSIDE_CONNECTION,
              "--HistoryManager.hist_file=:memory:"]
    notebooks = [p.name for p in workdir.glob("*.ipynb") if p.is_file() and not p.is_symlink()]
    command = bwrap_command(workdir, args.lib, kernel, sockets=sockets, wall=args.wall, uid=uid,
                            connection_fd=read_fd, hidden=notebooks)
    _limits(args.memory, max(CPU_SECONDS, args.wall))
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
