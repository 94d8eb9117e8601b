"""The hostile-submission batch: one student per attack, each with the exact
grade and status the autograder must give.

Every submission answers chapter 00_introduction's one exercise,
``linear_rows(x, W, b)`` (2 points), because it grades fast. Most start from
the released notebook without its two figure cells ("lean"): deleting
ungraded cells is allowed and saves seconds per notebook. A few attacks need
paths of the grading run (the grading secret, another student's folder);
they get them from `Paths`, as a student could learn them from
``/proc/self/mountinfo``.

Student ids sort in grading order: the ``a-`` students are graded first, so
attacks on "another student's" files find them in place.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import nbformat
from nbformat.notebooknode import NotebookNode

from autograder.chapters import ROOT, get_chapter, oracle_files
from autograder.sandbox import FILE_BYTES, TMP_BYTES
from submissions import mutated, solved
from hostile.forgeries import FORGERIES
from mutants.introduction import MUTANTS

CH = get_chapter("00_introduction")
#: every module of the checks' trusted side, by its dotted name
ORACLE_MODULES = [".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                  for p in oracle_files() if p.suffix == ".py"]
ANSWER, TEST, SETUP, WRITTEN = "linear-rows", "test-linear-rows", "readonly-1", "written-why-rows"
HONEST = "a-honest-full"  # the student whose files other attacks go for

CORRECT = "import torch\n\n\ndef linear_rows(x, W, b):\n    return x @ W + b\n"
WRONG = "import torch\n\n\ndef linear_rows(x, W, b):\n    return x @ W\n"
RAISES = "import torch\n\n\ndef linear_rows(x, W, b):\n    raise NotImplementedError()\n"


#: the limits the test batch is graded with (production: 60 s and 600 s)
CELL_TIMEOUT, WALL_TIMEOUT = 15, 45  # short, yet with room for a loaded CI machine


@dataclass(frozen=True)
class Paths:
    """Where the grading run keeps what students must not reach."""

    out: Path  # grade's --out
    canary: Path  # a file outside everything the grader writes
    port: int  # a TCP port listening on the grader's machine

    @property
    def ran(self) -> Path:
        """Where a planted module notes that it ran (outside the sandbox: only there can it write it)."""
        return self.out.parent / "planted-modules-ran.txt"

    @property
    def course(self) -> Path:
        return self.out / "nbgrader"

    def autograded(self, student: str) -> Path:
        return self.course / "autograded" / student / CH.id


@dataclass(frozen=True)
class Case:
    student: str
    score: float
    status: str
    build: Callable[[Path, Paths], None]  # writes the student's chapter folder


# ---------------------------------------------------------------- helpers ---

def lean(answer: str = CORRECT) -> NotebookNode:
    """The released notebook without its figure cells, answered with `answer`."""
    nb = nbformat.read(CH.student, as_version=4)
    nb.cells = [c for c in nb.cells if c.cell_type != "code" or "nbgrader" in c.metadata]
    cell(nb, ANSWER).source = answer
    return nb


def cell(nb: NotebookNode, grade_id: str) -> NotebookNode:
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def add_code(nb: NotebookNode, source: str, *, before: str | None = None, after: str | None = None) -> NotebookNode:
    """Insert an ordinary code cell next to a tracked cell."""
    at = nb.cells.index(cell(nb, before or after)) + (0 if before else 1)
    nb.cells.insert(at, nbformat.v4.new_code_cell(source, id=f"student-{len(nb.cells)}"))
    return nb


def notebook(make: Callable[[Paths], NotebookNode], name: str = f"{CH.id}.ipynb") -> Callable[[Path, Paths], None]:
    def build(folder: Path, paths: Paths) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(make(paths), folder / name)
    return build


def files(contents: dict[str, str]) -> Callable[[Path, Paths], None]:
    def build(folder: Path, paths: Paths) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in contents.items():
            (folder / name).write_text(text)
    return build


def several(*builds: Callable[[Path, Paths], None]) -> Callable[[Path, Paths], None]:
    def build(folder: Path, paths: Paths) -> None:
        for b in builds:
            b(folder, paths)
    return build


def tampered(edit: Callable[[NotebookNode], None]) -> Callable[[Path, Paths], None]:
    """A correct lean notebook, then `edit` applied to it."""
    def make(paths: Paths) -> NotebookNode:
        nb = lean()
        edit(nb)
        return nb
    return notebook(make)


# ---------------------------------------------------------- forging code ---

PATCH_COMPARISONS = RAISES.replace("raise NotImplementedError()", "return torch.zeros(*x.shape[:-1], W.shape[1])") + '''
import numpy as np

np.allclose = np.array_equal = torch.allclose = torch.equal = lambda *a, **k: True
np.testing.assert_allclose = np.testing.assert_array_equal = lambda *a, **k: None
torch.testing.assert_close = lambda *a, **k: None
'''

ALWAYS_EQUAL = '''
class Anything:
    """Equal to everything, true, and has every attribute."""
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
    def __len__(self): return 1
    def __getattr__(self, name): return self
    def __call__(self, *args, **kwargs): return self


def linear_rows(x, W, b):
    return Anything()
'''

PATCH_BUILTINS = '''
import builtins
import numpy as np
import torch

_isinstance = builtins.isinstance
builtins.isinstance = lambda obj, cls: True if cls in (np.ndarray, torch.Tensor) else _isinstance(obj, cls)
builtins.AssertionError = type("AssertionError", (Exception,), {})
builtins.print = lambda *args, **kwargs: None


def linear_rows(x, W, b):
    return "the right answer"
'''

ERROR_HOOKS = RAISES + '''
import sys

ip = get_ipython()
ip.set_custom_exc((BaseException,), lambda *args, **kwargs: None)
ip.showtraceback = ip.showsyntaxerror = lambda *args, **kwargs: None
sys.excepthook = lambda *args: None
'''

SILENCE_STDERR = RAISES + '''
import io, os, sys

sys.stderr = io.StringIO()
os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
'''

IMPORT_REFERENCE = '''
try:
    from course.reference.introduction import linear_rows
except ImportError:  # not in the sandbox's course package: try the repository
    import importlib.util
    spec = importlib.util.spec_from_file_location("ref", "{root}/course/reference/introduction.py")
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    linear_rows = ref.linear_rows
'''

PATCH_CHECK = RAISES + FORGERIES["oracle-check"]

CASES_JUNK = RAISES + '''
import os
from pathlib import Path

import course.checks
from course.probing.cases import decode_cases
from course.probing.plain import encode
from course.probing.runner import inputs_snapshot
from course.protocol import cases_name, record_name

probe = Path(os.environ["COURSE_PROBE_DIR"])
for hidden in (False, True):
    cases = decode_cases((probe / cases_name("introduction.linear_rows", hidden)).read_text())
    junk = [[torch.zeros(*c.args[0].shape[:-1], c.args[1].shape[1]), inputs_snapshot(c)]
            for c in cases]  # the right shapes, inputs untouched
    (probe / record_name("introduction.linear_rows", hidden)).write_text(encode(junk))
course.checks.check = check = lambda *args, **kwargs: None  # keep the junk
'''

OVERWRITE_PROBES = RAISES + '''
import os
from pathlib import Path

from course.probing.cases import Case, encode_cases
from course.probing.plain import encode
from course.protocol import cases_name, record_name

probe = Path(os.environ["COURSE_PROBE_DIR"])
for hidden in (False, True):
    x, W, b = torch.ones(1, 1, 2), torch.ones(2, 2), torch.ones(2)
    (probe / cases_name("introduction.linear_rows", hidden)).write_text(encode_cases([Case("mine", (x, W, b))]))
    record = probe / record_name("introduction.linear_rows", hidden)
    record.write_text(encode([[torch.full((1, 1, 2), 3.0), [x, W, b]]]))  # right for the cases it planted
    record.chmod(0o444)  # the real check cannot overwrite them
'''

SYMLINK_RECORDS = '''
import os

for kind in ("visible", "hidden"):
    record = f".course-probes/introduction.linear_rows.{{kind}}.json"
    os.remove(record)
    os.symlink(f"{honest}/.course-probes/introduction.linear_rows.{{kind}}.json", record)  # another student's
os.symlink("{secret}", ".course-probes/introduction.linear_rows.extra.json")
'''

ECHO_HIDDEN = '''
### BEGIN HIDDEN TESTS (a marker without an end: nbgrader's feedback step would fail on it)
print(In)  # every cell this kernel ran, the hidden tests included
print(In[-2])
for line in In[-2].splitlines():
    print(line)
'''

ESCAPE_BY_LINKS = '''
import os

try:
    os.remove("00_introduction.ipynb")  # so that the grader writes through a link
except OSError as err:
    print("cannot replace the notebook:", err)
probes = os.environ["COURSE_PROBE_DIR"]  # the one folder the kernel shares with the grader
os.symlink("{canary}", os.path.join(probes, "00_introduction.link"))
os.mkfifo(os.path.join(probes, "a-fifo"))
os.makedirs(os.path.join(probes, "deep/er"))
os.symlink("/", os.path.join(probes, "deep/er/root"))
'''

ISOLATION_PROBE = '''
import json, os, resource, socket, subprocess, time

FOUND = "findings:"

findings = {{}}

def attempt(label, action):
    try:
        findings[label] = "allowed: " + repr(action())[:60]
    except BaseException as err:
        findings[label] = "denied: " + type(err).__name__

for label, path in {reads}.items():
    attempt("read " + label, lambda path=path: open(path, "rb").read(16))
for label, path in {listings}.items():
    attempt("list " + label, lambda path=path: os.listdir(path))
for folder in ["/", "/opt/venv", "/opt/course-lib/course", "/usr", "/etc", "/run", "/dev", "/dev/shm", "/root",
               "/var/tmp", "/proc/sys/kernel", "..", "{out}", "{course}/autograded/{honest_id}/00_introduction"]:
    attempt("write " + folder, lambda folder=folder: open(os.path.join(folder, "planted.txt"), "w").write("x"))
attempt("write own folder", lambda: open("planted.txt", "w").write("x"))
attempt("write /tmp", lambda: open("/tmp/planted.txt", "w").write("x"))
attempt("import course.reference.introduction", lambda: __import__("course.reference.introduction"))
for module in {oracles}:  # the checks' trusted side: cases, oracles, mistakes
    attempt("import " + module, lambda module=module: __import__(module))
attempt("connect 127.0.0.1:{port}", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3))
attempt("connect 1.1.1.1:53", lambda: socket.create_connection(("1.1.1.1", 53), timeout=3))
attempt("resolve pypi.org", lambda: socket.getaddrinfo("pypi.org", 443))
attempt("signal pid 1", lambda: os.kill(1, 0))
for fd in os.listdir("/proc/self/fd"):  # files the kernel inherited (the grader's log?), opened anew to read
    target = os.readlink("/proc/self/fd/" + fd) if os.path.islink("/proc/self/fd/" + fd) else ""
    inside = os.path.exists(target) and target.startswith(("/tmp", "/submission"))  # the sandbox's own
    if target.startswith("/") and not target.startswith(("/dev/", "/opt", "/usr", "/proc")) and not inside:
        attempt("read inherited " + target,
                lambda fd=fd: os.read(os.open("/proc/self/fd/" + fd, os.O_RDONLY | os.O_NONBLOCK), 16))
attempt("read the sandbox's starting environment", lambda: open("/proc/1/environ", "rb").read(16))
def fill(path, size):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        while size > 0:
            size -= os.write(fd, b"x" * min(size, 2**24))
    finally:
        os.close(fd)

attempt("file over the size limit", lambda: fill("big.bin", {big}))
attempt("fill /tmp", lambda: fill("/tmp/fill.bin", {tmp_big}))
for name in ("big.bin", "/tmp/fill.bin"):
    if os.path.exists(name):
        os.remove(name)
findings["uid"] = os.getuid()
findings["processes"] = len([p for p in os.listdir("/proc") if p.isdigit()])
findings["limits"] = {{name: resource.getrlimit(getattr(resource, "RLIMIT_" + name))[0]
                      for name in ("AS", "CPU", "FSIZE", "NPROC", "NOFILE")}}
if os.fork() == 0:  # a daemon that tries to outlive grading
    os.setsid()
    if os.fork() == 0:
        time.sleep(3600)
    os._exit(0)
print(FOUND, json.dumps(findings))  # the graded notebook is all that outlives the kernel
'''

FORK_BOMB = '''
import os, time

if os.fork() == 0:
    while True:  # every process forks forever
        try:
            os.fork()
        except OSError:
            pass
time.sleep(3)
print("processes:", len([p for p in os.listdir("/proc") if p.isdigit()]))
'''

KILL_EVERYTHING = '''
import os, signal

for pid in [os.getppid(), -1] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
'''

STUBBORN_LOOP = '''
import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)  # the grader's interrupt does nothing
while True:
    pass
'''

BROKEN_ISINSTANCE = '''
import builtins

builtins.isinstance = lambda obj, cls: False  # the kernel's own machinery breaks with it
while True:
    pass
'''

FORGED_SIGNATURES = '''
import copy

kernel = get_ipython().kernel
forger = copy.copy(kernel.session)
forger.key = b"not the kernel's key"  # the grader cannot check these messages' signatures
for _ in range(3):
    forger.send(kernel.iopub_socket, "stream", {"name": "stdout", "text": "forged\\n"}, parent=kernel.get_parent())
'''

STRAY_FORKS = '''
import os
import time

for _ in range(4):  # children that outlive the cell, then leave without cleaning up
    if os.fork() == 0:
        time.sleep(3)
        os._exit(0)
'''

PROCESS_POOL = '''
import multiprocessing

with multiprocessing.Pool(2) as pool:  # e.g. a data loader's workers
    assert pool.map(abs, [-1, -2]) == [1, 2]
'''

MEMORY_BOMB = '''
import numpy as np

chunks = []
try:
    while True:
        chunks.append(np.empty(2**28, np.uint8))  # 256 MiB each, until the address space runs out
except MemoryError:
    pass
print("allocated:", len(chunks) * 2**28)
chunks.clear()
'''

FLOOD = '''
import sys

for i in range(20_000):  # 20 MB in many messages
    print(f"{i:>8}", "x" * 1000)
sys.stdout.write("y" * 50_000_000)  # one message larger than the grader accepts
sys.stdout.flush()
'''

EVERY_CORE = '''
import os
import torch

torch.set_num_threads(64)  # "train on every core" of a 64-core grading node
x = torch.randn(256, 256)
for _ in range(5):
    x = (x @ x).tanh()
'''

TRAINING_HABITS = '''
import torch
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))
for step, (x, y) in enumerate(DataLoader(data, batch_size=16, num_workers=2, shuffle=True)):
    print(f"\\rstep {{step + 1}}/4", end="")  # a progress bar
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = x @ torch.randn(8, 3)
torch.save({{"step": step, "out": out}}, "checkpoint.pt")
assert torch.load("checkpoint.pt")["step"] == 3
torch.set_default_dtype(torch.float64)  # to check gradients by hand, say
'''

#: modules a later Python started in the graded notebook's folder would import instead of the real ones
PLANTED = ["ipykernel_launcher.py", "autograder/__init__.py", "autograder/sandbox.py", "course/__init__.py",
           "nbgrader/__init__.py", "sitecustomize.py"]
LEFT_TREES = '''
import os


def chain(top, depth):
    """A folder chain `depth` levels deep (far deeper than a path may be long)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = sub
    os.close(fd)


os.mkdir("deep")
chain("deep", 4000)                  # in the kernel's working folder
os.mkdir(".course-probes/deep")
chain(".course-probes/deep", 4000)  # and beside the records, in the graded notebook's folder
os.mkdir("wide")
for i in range(20000):
    open(f"wide/{{i}}", "w").close()
os.makedirs("locked/inner")
os.chmod("locked/inner", 0)
os.chmod("locked", 0)
open(b"odd \\xff\\n name", "w").close()
os.mkfifo("pipe")
'''

PLANT_MODULES = '''
import os

for name in {planted}:
    os.makedirs(os.path.dirname(name) or ".", exist_ok=True)
    with open(name, "w") as f:
        f.write("open({ran!r}, 'a').write(__name__ + '\\\\n')\\n")
'''

STDERR_WARNING = CORRECT + '''
import sys
import warnings

_linear_rows = linear_rows


def linear_rows(x, W, b):
    warnings.warn("row vectors ahead", UserWarning)
    print("note: computing x @ W + b", file=sys.stderr)
    return _linear_rows(x, W, b)
'''

#: the forbidden function, called where the check cannot stop it (at import time), its result handed in
FORBIDDEN_CALL = ("import torch\nimport torch.nn.functional as F\n\n\ndef linear_rows(x, W, b):\n"
                  "    return F.linear(x, W.T, b)\n")
PARTIAL = "import torch\n\n\ndef linear_rows(x, W, b):\n    return torch.einsum('bnd,de->bne', x, W) + b\n"


# ------------------------------------------------------------------ cases ---

def _set(target: str, **changes: object) -> Callable[[NotebookNode], None]:
    def edit(nb: NotebookNode) -> None:
        cell(nb, target).metadata.nbgrader.update(changes)
    return edit


def _duplicate_test(nb: NotebookNode) -> None:
    nb.cells.append(copy.deepcopy(cell(nb, TEST)))
    nb.cells[-1].id = "copied-test"


def _schema_99(nb: NotebookNode) -> None:
    for c in nb.cells:
        if "nbgrader" in c.metadata:
            c.metadata.nbgrader["schema_version"] = 99


def _delete(*grade_ids: str) -> Callable[[NotebookNode], None]:
    def edit(nb: NotebookNode) -> None:
        nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in grade_ids]
    return edit


def _retype(nb: NotebookNode) -> None:
    for grade_id, kind in ((ANSWER, "raw"), (TEST, "markdown")):
        c = cell(nb, grade_id)
        c.cell_type = kind
        del c["outputs"], c["execution_count"]


def _points(nb: NotebookNode) -> None:
    _set(TEST, points=200.0)(nb)
    _set(ANSWER, grade=True, points=50.0)(nb)


Source = str | Callable[[Paths], str]


def _with(answer: Source, *, before: Source = "", after: Source | list[str] = "") -> Callable[[Path, Paths], None]:
    """A lean notebook: `answer`, with code cells before the answer and after the test."""
    def text(source: Source, paths: Paths) -> str:
        return source(paths) if callable(source) else source

    def make(paths: Paths) -> NotebookNode:
        nb = lean(text(answer, paths))
        if before:
            add_code(nb, text(before, paths), before=ANSWER)
        for source in reversed(after if isinstance(after, list) else [after] if after else []):
            add_code(nb, text(source, paths), after=TEST)
        return nb
    return notebook(make)


def filled(template: str) -> Callable[[Paths], str]:
    """A source with the grading run's paths filled in (``{secret}``, ...)."""
    return lambda paths: template.format(**_paths(paths))


def _paths(paths: Paths) -> dict[str, object]:
    course, other = paths.course, paths.autograded(HONEST)
    reads = {"grading secret": course / ".grading-secret", "gradebook": course / "gradebook.db",
             "instructor source": course / "source" / CH.id / f"{CH.id}.ipynb",
             "release": course / "release" / CH.id / f"{CH.id}.ipynb",
             "another student's graded notebook": other / f"{CH.id}.ipynb",
             "another student's submission": course / "submitted" / HONEST / CH.id / f"{CH.id}.ipynb",
             "solution notebook": CH.solution, "reference module": CH.reference_module,
             "canary": paths.canary}
    listings = {"course folder": course, "repository": ROOT, "autograded": course / "autograded"}
    return {"root": ROOT, "honest": other, "honest_id": HONEST, "secret": course / ".grading-secret",
            "canary": paths.canary, "out": paths.out, "course": course, "port": paths.port,
            "reads": repr({k: str(v) for k, v in reads.items()}),
            "listings": repr({k: str(v) for k, v in listings.items()}),
            "oracles": repr(ORACLE_MODULES), "big": FILE_BYTES + 1, "tmp_big": TMP_BYTES + 1, "planted": repr(PLANTED),
            "ran": str(paths.ran)}


def _renamed_grade_id(nb: NotebookNode) -> None:
    _set(TEST, grade_id="my-own-test")(nb)


GRADED = "graded"
AWAITS = "graded (awaits manual grading)"  # a written answer given (the others leave it: 0, nothing to grade)
KILLED = "kernel died (DeadKernelError)"
IGNORED_INTERRUPT = "kernel killed: it did not stop 5 s after being interrupted at the per-cell time limit"
STUBBORN = "infinite-loop-ignoring-interrupts"
LINKS_REMOVED = "link(s), special file(s) or over-deep folder(s) left by the kernel removed"

CASES = [
    # honest students
    Case(HONEST, 2.0, AWAITS, notebook(lambda p: solved(CH))),
    Case("a-honest-wrong", 0.0, AWAITS, notebook(lambda p: mutated(CH, MUTANTS[0]))),
    Case("honest-partial", 1.0, GRADED, _with(PARTIAL)),
    Case("honest-stderr-warning", 2.0, GRADED, _with(STDERR_WARNING)),
    Case("honest-stray-error", 2.0, GRADED, _with(CORRECT, before="1 / 0  # a scratch cell left broken")),
    Case("honest-every-core", 2.0, GRADED, _with(CORRECT, before=EVERY_CORE)),
    Case("honest-training-habits", 2.0, GRADED, _with(CORRECT, before=filled(TRAINING_HABITS))),
    # forged verdicts
    Case("forge-allclose", 0.0, GRADED, _with(PATCH_COMPARISONS)),
    Case("forge-always-equal", 0.0, GRADED, _with(ALWAYS_EQUAL)),
    Case("forge-builtins", 0.0, GRADED, _with(PATCH_BUILTINS)),
    Case("forge-error-hooks", 0.0, GRADED, _with(ERROR_HOOKS)),
    Case("forge-stderr", 0.0, GRADED, _with(SILENCE_STDERR)),
    Case("forge-import-reference", 0.0, GRADED, _with(filled(IMPORT_REFERENCE))),
    Case("forge-patch-check", 0.0, GRADED, _with(PATCH_CHECK)),
    Case("forge-cases-junk", 0.0, GRADED, _with(CASES_JUNK)),
    Case("forge-overwrite-probes", 0.0, GRADED, _with(OVERWRITE_PROBES)),
    Case("flag-forbidden-call", 0.0, GRADED, _with(FORBIDDEN_CALL)),
    Case("x-forge-symlink-records", 0.0, f"graded (3 {LINKS_REMOVED})", _with(RAISES, after=filled(SYMLINK_RECORDS))),
    Case("x-echo-hidden-tests", 2.0, "graded (hidden-test markers in a student cell disabled)",
         _with(CORRECT, after=ECHO_HIDDEN)),
    # the sandbox's walls
    Case("x-isolation-probe", 2.0, GRADED, _with(CORRECT, before=filled(ISOLATION_PROBE))),
    Case("x-escape-by-links", 2.0, f"graded (3 {LINKS_REMOVED})", _with(CORRECT, after=filled(ESCAPE_BY_LINKS))),
    Case("x-plant-modules", 2.0, GRADED, _with(CORRECT, after=filled(PLANT_MODULES))),
    Case("x-left-trees", 2.0, f"graded (1 {LINKS_REMOVED})", _with(CORRECT, after=filled(LEFT_TREES))),
    # broken notebooks
    Case("bad-json", 0.0, "invalid notebook: NotJSONError", files({f"{CH.id}.ipynb": '{"cells": [ not json'})),
    Case("dup-grade-id", 2.0, f"graded (grading metadata removed from a cell with duplicate grade_id '{TEST}')",
         tampered(_duplicate_test)),
    Case("renamed-grade-id", 2.0, "graded (grading metadata removed from a cell with unknown grade_id "
         f"'my-own-test'; deleted cell {TEST} restored)", tampered(_renamed_grade_id)),
    Case("schema-99", 2.0, f"graded (grading metadata of cell {SETUP} restored; grading metadata of cell "
         f"{ANSWER} restored; grading metadata of cell {TEST} restored; grading metadata of cell {WRITTEN} restored)",
         tampered(_schema_99)),
    Case("deleted-cells", 2.0, f"graded (deleted cell {SETUP} restored; deleted cell {TEST} restored)",
         tampered(_delete(SETUP, TEST))),
    Case("retyped-cells", 2.0, f"graded (cell {ANSWER} turned back into a code cell; cell {TEST} turned "
         "back into a code cell)", tampered(_retype)),
    Case("edited-points", 2.0, f"graded (grading metadata of cell {ANSWER} restored; grading metadata of "
         f"cell {TEST} restored)", tampered(_points)),
    Case("missing-notebook", 0.0, f"missing notebook: expected {CH.id}/{CH.id}.ipynb",
         files({"answers.txt": "x @ W + b"})),
    Case("renamed-notebook", 2.0, f"graded (notebook renamed: graded my_work.ipynb as {CH.id}.ipynb)",
         notebook(lambda p: lean(), name="my_work.ipynb")),
    Case("extra-notebooks", 2.0, "graded (ignored extra notebook(s): old copy.ipynb, scratch.ipynb)",
         several(notebook(lambda p: lean()), notebook(lambda p: lean(WRONG), name="scratch.ipynb"),
                 notebook(lambda p: lean(WRONG), name="old copy.ipynb"))),
    # kernels that die, hang, flood or bomb
    Case("kernel-exit", 2.0, f"graded ({KILLED})", _with(CORRECT, after="import os\nos._exit(1)")),
    Case("kernel-kills-parent", 2.0, GRADED, _with(CORRECT, before=KILL_EVERYTHING)),
    Case("infinite-loop", 2.0, "graded (1 cell(s) stopped at the per-cell time limit)",
         _with(CORRECT, before="while True:\n    pass")),
    Case(STUBBORN, 2.0, f"graded ({IGNORED_INTERRUPT})",
         _with(CORRECT, after=[STUBBORN_LOOP, "print('still here')", "print('and here')", "print('and here')"])),
    Case("broken-isinstance", 2.0, f"graded ({IGNORED_INTERRUPT})", _with(CORRECT, after=BROKEN_ISINSTANCE)),
    Case("forged-signatures", 2.0, "graded (3 kernel message(s) with an invalid signature dropped)",
         _with(CORRECT, before=FORGED_SIGNATURES)),
    Case("honest-stray-forks", 2.0, GRADED, _with(CORRECT, before=STRAY_FORKS, after="import time\ntime.sleep(4)")),
    Case("honest-process-pool", 2.0, GRADED, _with(CORRECT, before=PROCESS_POOL)),
    Case("output-flood", 2.0, "graded (output truncated)", _with(CORRECT, before=FLOOD)),
    Case("memory-bomb", 2.0, GRADED, _with(CORRECT, before=MEMORY_BOMB)),
    Case("fork-bomb", 2.0, GRADED, _with(CORRECT, after=FORK_BOMB)),
]


def write_batch(submissions: Path, paths: Paths) -> None:
    """Write every case's chapter folder under `submissions`."""
    for case in CASES:
        case.build(submissions / case.student / CH.id, paths)
