"""Run one student's Jupyter kernel inside a bubblewrap sandbox.

nbgrader starts kernels from a kernelspec; the grader's kernelspec runs
``python -m autograder.sandbox --lib LIB CONNECTION_FILE``, which execs
bubblewrap (``bwrap``) around an ordinary ipykernel (``--wall`` and
``--memory`` set a chapter's own limits: see `autograder.limits`). Inside
the sandbox:

* the only writable places are a fresh scratch folder of the
  kernel's own (mounted at /submission, the kernel's working directory),
  the probe folder where checks record results (/submission/.course-probes),
  a private, size-capped /tmp and /dev/shm, and the kernel's private folder
  for its IPC sockets. The scratch folder lives in that private folder, which the
  grader deletes once the kernel is gone (`execute.GuardedExecute`): what
  the kernel writes never lands beside the graded notebook, so no file it
  planted (an ``ipykernel_launcher.py``, a fake ``autograder`` package) is
  there for a later Python to run;
* visible read-only: the system's /usr, the Python installation and the
  virtual environment, and a copy of the `course` package holding only the
  reference modules of *earlier* chapters. Not visible: solutions/, the
  gradebook, release files, the grading secret, other students' folders,
  and the notebook's own folder (its file holds the restored hidden tests;
  the kernel gets its cells from nbgrader, not from the file);
* no network (a new, empty network namespace: the kernel talks to nbgrader
  over IPC sockets, not TCP), new PID/IPC/UTS namespaces, no capabilities;
* when the grader runs as root, the kernel runs as an unprivileged uid of
  its own (a fresh one per kernel), so the limit on processes holds (it
  does not for root) and counts that kernel's processes only;
* resource limits: CPU time (the larger of `CPU_SECONDS` and the wall
  clock), address space, file size, processes, open files, and a
  wall-clock cap after which the kernel is killed;
* threads are not processes: the process limit (which Linux counts in
  threads) leaves room for PyTorch's two pools of a thread per core of the
  grading machine on top of a kernel's own, and ``torch.set_num_threads``
  sets at most as many threads as there are cores (`course.kernel_threads`,
  run as each kernel starts), so that honest code that trains "on every
  core" of a bigger machine (``torch.set_num_threads(64)``) keeps its
  kernel; OpenMP threads wait passively, so too many of them slow a kernel
  down instead of spinning;
* a fair share of the CPU: where the grader runs as root on a machine with
  a CPU cgroup controller, each kernel runs in a CPU cgroup of its own with
  the same weight as every other kernel's (`cpu_group`), so that one
  kernel's many busy threads cannot starve the test cells of the students
  graded beside it. Without cgroups (an unprivileged grader) kernels share
  the CPU as ordinary processes do;
* Python starts with a safe path (``-P``): nothing in the working folder
  shadows a module;
* bubblewrap itself starts with an almost empty environment, and the
  kernel's standard output and error go to a log file of its own, in its
  private folder (`KERNEL_LOG`), not to the grader's: a kernel can read
  neither the grader's environment nor another student's log lines.

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
import time
from pathlib import Path

from course.protocol import PROBE_DIR_ENV, PROBE_DIRNAME

#: when the grader is root, each kernel runs as a uid of its own from this
#: range, in no /etc/passwd: the process limit then counts that kernel's
#: processes only, and no two kernels (or grade runs) can signal each other
UID_RANGE = range(2_000_000_000, 2_100_000_000)
CPU_SECONDS = 600
MEMORY_BYTES = 6 * 1024**3  # address space, by default; torch alone maps ~1-2 GiB
FILE_BYTES = 256 * 1024**2  # torch.compile's C++ compiler writes files of over 64 MiB
TMP_BYTES = 256 * 1024**2  # /tmp is memory: cap it
#: threads count too: a kernel uses about ten, two per core more when it trains on every core
#: (PyTorch keeps two pools), a DataLoader's workers a few each (and a fork bomb as many as this
#: allows: keep it moderate). torch.set_num_threads is capped at the cores (`course.kernel_threads`)
PROCESSES = max(128, 2 * (os.cpu_count() or 1) + 64)
#: run in every kernel as it starts, before any cell
KERNEL_START = "__import__('course.kernel_threads').kernel_threads.cap_threads()"
OPEN_FILES = 1024
WALL_SECONDS = 600  # by default
CELL_SECONDS = 60  # by default, nbgrader interrupts a cell after this long
TEST_CELL_SECONDS = 20  # ... and an autograder test cell after this long (its checks take seconds)
INSIDE_LIB = "/opt/course-lib"
INSIDE_WORK = "/submission"
INSIDE_CONNECTION = "/run/kernel.json"
INSIDE_SOCKETS = "/run/sockets"
INSIDE_VENV = "/opt/venv"
SCRATCH = "work"  # in the kernel's private folder: its working directory
KERNEL_LOG = "kernel.log"  # in the kernel's private folder: its standard output and error
#: a CPU cgroup per kernel (cgroup v1's cpu hierarchy, or v2's unified one), under this group
CGROUP_ROOTS = (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup"))
CGROUP_PARENT = "transformer-course-kernels"


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
    args += ["--perms", "0755", "--dir", "/etc"]  # traversable: bwrap would make it 0700
    for f in ("/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
              "/etc/fonts"):  # fontconfig's configuration: without it matplotlib's first plot prints an error
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
                  uid: int | None = None, connection_fd: int | None = None, probe: Path | None = None) -> list[str]:
    """The full bwrap command line that runs `command` in the sandbox.

    `workdir` becomes the working directory, /submission; `probe`, when
    given, is mounted at /submission/.course-probes, where checks record
    results. `uid` is the user the command runs as when the grader is root
    (default: a fresh `kernel_uid`).
    """
    args = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp",
            # POSIX semaphores and shared memory (a DataLoader's workers), private and capped like /tmp
            "--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/dev/shm",
            "--perms", "0755", "--dir", "/run", "--perms", "0755", "--dir", "/opt", *_system_binds(),
            "--bind", str(workdir), INSIDE_WORK, "--chdir", INSIDE_WORK]
    if probe is not None:
        args += ["--bind", str(probe), f"{INSIDE_WORK}/{PROBE_DIRNAME}"]
    if lib is not None:
        args += ["--ro-bind", str(lib), INSIDE_LIB]
    if sockets is not None:
        args += ["--bind", str(sockets), INSIDE_SOCKETS]
    if connection_fd is not None:
        args += ["--perms", "0444", "--ro-bind-data", str(connection_fd), INSIDE_CONNECTION]
    path = f"{Path(inside_python()).parent}:/usr/bin:/bin"
    env = {"PATH": path, "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONPATH": INSIDE_LIB,
           "PYTHONDONTWRITEBYTECODE": "1", "MPLCONFIGDIR": "/tmp/matplotlib", "IPYTHONDIR": "/tmp/ipython",
           "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "PYTHONSAFEPATH": "1",
           "NBGRADER_EXECUTION": "autograde", "USER": "student", "LOGNAME": "student",
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
    """Let the kernel's user write a folder (grader running as root)."""
    for root, dirs, files in os.walk(folder):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(name, uid, uid)


def _cgroup_parent() -> tuple[Path, str] | None:
    """The folder under which kernels get CPU cgroups, and the file that sets a group's
    weight; None where this process may not make cgroups (not root, no cpu controller)."""
    if os.geteuid() != 0:
        return None
    for base in CGROUP_ROOTS:
        v1 = (base / "cpu.shares").exists()
        if not v1 and "cpu" not in _read(base / "cgroup.subtree_control").split():
            continue
        parent = base / CGROUP_PARENT
        try:
            parent.mkdir(exist_ok=True)
            if not v1:
                (parent / "cgroup.subtree_control").write_text("+cpu")
        except OSError:
            continue
        return parent, "cpu.shares" if v1 else "cpu.weight"
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def cpu_groups_available() -> bool:
    """Whether kernels started from this process get a CPU cgroup each (`cpu_group`)."""
    return _cgroup_parent() is not None


def cpu_group(name: str) -> Path | None:
    """Move this process (and so everything it starts) into a CPU cgroup of its own,
    `name`, weighted as every other kernel's; None where cgroups cannot be used.

    Groups left by kernels that have ended are removed on the way (removing a
    group that still has processes fails, and is skipped).
    """
    found = _cgroup_parent()
    if found is None:
        return None
    parent, weight = found
    for stale in parent.iterdir():
        if stale.is_dir() and stale.name != name:
            remove_cpu_group(stale)
    group = parent / name
    for _ in range(5):
        try:
            group.mkdir(exist_ok=True)
            (group / weight).write_text("1024" if weight == "cpu.shares" else "100")
            (group / "cgroup.procs").write_text(str(os.getpid()))
            return group
        except FileNotFoundError:  # removed, still empty, by another kernel's start: make it again
            continue
        except OSError:
            return None
    return None


def remove_cpu_group(group: Path, wait: float = 0.0) -> None:
    """Remove a kernel's CPU cgroup once its processes are gone, waiting up to `wait` seconds
    for the last of them to exit (else leave it: the next kernel's `cpu_group` removes it)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.1)


def cpu_group_of(sockets: Path) -> Path | None:
    """The CPU cgroup of the kernel whose private folder is `sockets`, if it has one."""
    found = _cgroup_parent()
    return found[0] / sockets.name if found else None


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
    sockets = Path(info["ip"]).parent  # the kernel's own folder (GuardedExecute.socket_dir)
    scratch = sockets / SCRATCH
    shutil.copytree(Path.cwd(), scratch, symlinks=True,  # the chapter's data files, as released
                    ignore=shutil.ignore_patterns("*.ipynb", PROBE_DIRNAME))
    probe = Path.cwd() / PROBE_DIRNAME  # made by the grader (judge.PrepareProbes)
    probe = probe if probe.is_dir() and not probe.is_symlink() else None
    uid = kernel_uid()
    if os.geteuid() == 0:
        for folder in (scratch, probe):
            if folder is not None:
                _give_to(uid, folder)
        os.chown(sockets, uid, uid)
    log = os.open(sockets / KERNEL_LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the grader's only
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    inside = dict(info, ip=f"{INSIDE_SOCKETS}/{Path(info['ip']).name}")  # same files, seen from inside
    read_fd, write_fd = os.pipe()
    os.write(write_fd, json.dumps(inside).encode())
    os.close(write_fd)
    os.set_inheritable(read_fd, True)
    kernel = [inside_python(), "-P", "-m", "ipykernel_launcher", "-f", INSIDE_CONNECTION,
              "--HistoryManager.hist_file=:memory:", f"--IPKernelApp.exec_lines={KERNEL_START}"]
    command = bwrap_command(scratch, args.lib, kernel, sockets=sockets, wall=args.wall, uid=uid,
                            connection_fd=read_fd, probe=probe)
    cpu_group(sockets.name)
    _limits(args.memory, max(CPU_SECONDS, args.wall))
    os.execvpe(command[0], command, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


if __name__ == "__main__":
    main()
