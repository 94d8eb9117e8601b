"""What runs a student's object on a case: the part of a check the kernel holds.

Every check has a `Probe` here, registered by its chapter's module in
`course.probing.calls` under the check's name (``"attention.softmax"``): how
to call the student's object on a case (`call`), which library functions it
may not use (`forbid`), and whether its inputs must be left unchanged. A
probe holds no expected answer: what a call returns is the student's raw
output (and what probe objects observed while it ran, such as the modes a
probe network saw); every comparison, statistic and hint is made by the
judge, outside the sandbox (`course.checks.framework`).

Under the autograder (``COURSE_PROBE_DIR`` set), `record` reads the cases
the grader wrote into the probe folder, runs the student's object on them
and writes the raw results there, as plain data (`plain`).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from course.protocol import ALLOW_FORBIDDEN_FILE, PROBE_DIR_ENV, cases_name, record_name

from .cases import Case, decode_cases
from .pieces import tracing
from .plain import Raised, encode, raised, to_plain


def default_call(obj: Any, case: Case) -> Any:
    return obj(*case.args, **case.kwargs)


@dataclass(frozen=True)
class Probe:
    """How the kernel runs one check's cases.

    call: ``call(obj, case)`` returns the student's raw output on the case.
    forbid: dotted names of library functions the exercise asks the student
    not to use (``"torch.softmax"``); they raise while the call runs.
    inputs_unchanged: the call must leave the case's arguments as they were
    (the arguments after the call are recorded for the judge to compare).
    observe: ``observe(case, raw)`` turns the raw output `call` recorded
    (decoded plain data) into what the check's answers describe: the
    frequencies of recorded samples, the facts of a masking. The judge runs
    it outside the sandbox (and a student's own run, here); None: the raw
    output is compared as it is.
    builds_on: the names of the chapter's earlier answers the exercise's
    object calls (``("RMSNorm", "GroupedQueryAttention")``): their calls are
    traced, so that the judge can tell a fault of theirs from one of this
    exercise (`course.probing.pieces`); `answer` is the name of this
    exercise's object among the chapter's answers, which the judge replays.
    """

    name: str  # "topic.name", the check's qualified name
    call: Callable[[Any, Case], Any] = default_call
    forbid: Sequence[str] = ()
    inputs_unchanged: bool = True
    observe: Callable[[Case, Any], Any] | None = None
    builds_on: Sequence[str] = ()
    answer: str = ""


_PROBES: dict[str, Probe] = {}


class CheckUnavailable(LookupError):
    """A check that does not exist, or whose chapter's module (probes,
    answers or, on the trusted side, oracles) failed to load."""


def register(*probes: Probe) -> None:
    for p in probes:
        if p.name in _PROBES:
            raise ValueError(f"probe {p.name} registered twice")
        _PROBES[p.name] = p


def import_chapter(package: str, topic: str, what: str) -> None:
    """Import the chapter module ``<package>.<topic>`` (its checks or its probes: `what`), so that
    a chapter that is missing or broken makes only its own checks `CheckUnavailable`."""
    if not topic.isidentifier():
        raise CheckUnavailable(f"no checks for {topic!r}")
    try:
        importlib.import_module(f"{package}.{topic}")
    except ModuleNotFoundError as err:
        if err.name == f"{package}.{topic}":
            raise CheckUnavailable(f"no checks for chapter topic {topic!r}") from None
        raise CheckUnavailable(f"the {what} of {topic!r} could not be loaded: {err}") from err
    except Exception as err:  # a broken chapter module breaks that chapter only
        raise CheckUnavailable(f"the {what} of {topic!r} could not be loaded: {type(err).__name__}: {err}") from err


def probes_of(topic: str) -> dict[str, Probe]:
    """Every probe of one chapter, importing its module if need be."""
    import_chapter(f"{__package__}.calls", topic, "probes")
    return {n: p for n, p in _PROBES.items() if n.partition(".")[0] == topic}


def probe_of(qualified: str) -> Probe:
    """The probe of the check called ``"topic.name"``."""
    found = probes_of(qualified.partition(".")[0]).get(qualified)
    if found is None:
        raise CheckUnavailable(f"no check named {qualified!r}: is the course package up to date?")
    return found


# --------------------------------------------------------------- running ---

def _resolve(dotted: str) -> tuple[Any, str]:
    """('torch.nn.functional.softmax') -> (the torch.nn.functional module, 'softmax')."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:-1]:
            owner = getattr(owner, attr)
        return owner, parts[-1]
    raise ValueError(f"cannot resolve {dotted!r}")


def refusal(name: str) -> RuntimeError:
    """The error a forbidden function raises while a check runs (`watching`)."""
    return RuntimeError(f"{name} is not allowed in this exercise: it does what the exercise asks you to write yourself")


#: the course's stand-ins (`course.standins`): their calls are the course's, not the student's
STANDINS = Path(__file__).resolve().parent.parent / "standins"
_TORCH = Path(torch.__file__).resolve().parent


def _students_call() -> bool:
    """Whether the forbidden function being called was called by the student's code: the first frame
    outside PyTorch and this module is not in a stand-in (an earlier chapter's answers, unpublished,
    stand in on the functions that chapter forbids; `course.standins`)."""
    frame = sys._getframe(2)
    while frame is not None:
        where = frame.f_code.co_filename
        if not where.startswith(str(_TORCH)) and where != __file__:
            return not where.startswith(str(STANDINS))
        frame = frame.f_back
    return True


class _Watch(TorchFunctionMode):
    """Sees every PyTorch function the student's code calls (however it got hold of it: a
    computed name, a reference captured before the check) and notes the forbidden ones."""

    def __init__(self, watched: dict[int, str], reached: list[str], refuse: bool) -> None:
        super().__init__()
        self.watched, self.reached, self.refuse = watched, reached, refuse

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = self.watched.get(id(func))
        if name is not None and _students_call():
            if name not in self.reached:
                self.reached.append(name)
            if self.refuse:
                raise refusal(name)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def watching(names: Sequence[str], reached: list[str], refuse: bool = True) -> Iterator[None]:
    """While the block runs, note in `reached` each of the named library functions the code
    calls and, with `refuse` (the default), make it raise `refusal`.

    Two nets: a `TorchFunctionMode` sees every call of a PyTorch function by what is called,
    not by its name (``vars(torch)["soft" + "max"]``, a reference kept from before, an alias
    such as ``torch._C._VariableFunctions.softmax``); and each name's attribute is replaced for
    the block, for what PyTorch's dispatch does not see (classes such as ``torch.optim.AdamW``,
    plain Python functions). A call made by a stand-in (`_students_call`) is let through."""
    spots = [(*_resolve(n), n) for n in names]
    saved = [(owner, attr, owner.__dict__.get(attr), attr in owner.__dict__) for owner, attr, _ in spots]
    originals = [(getattr(owner, attr), what) for owner, attr, what in spots]
    watched = {id(obj): what for obj, what in originals}

    def replaced(original: Any, what: str) -> Callable:
        def call(*args: Any, **kwargs: Any) -> Any:
            if _students_call():
                if what not in reached:
                    reached.append(what)
                if refuse:
                    raise refusal(what)
            return original(*args, **kwargs)
        return call

    try:
        for (owner, attr, what), (original, _) in zip(spots, originals):
            setattr(owner, attr, replaced(original, what))
        with _Watch(watched, reached, refuse) if watched else contextlib.nullcontext():
            yield
    finally:
        for owner, attr, old, had in saved:
            if had:
                setattr(owner, attr, old)
            else:
                delattr(owner, attr)


def _mutable_inputs(case: Case) -> list[tuple[str, Any]]:
    """(name, value) of the case's arguments a call could change in place."""
    named = [(f"argument {i + 1}", a) for i, a in enumerate(case.args)] + list(case.kwargs.items())
    return [(n, v) for n, v in named if isinstance(v, (torch.Tensor, np.ndarray, list, dict, set))]


def inputs_snapshot(case: Case) -> list:
    """The case's mutable arguments as plain data (what `inputs_unchanged` compares)."""
    snap = []
    for _, value in _mutable_inputs(case):
        try:
            snap.append(to_plain(sorted(value) if isinstance(value, set) else value))
        except (TypeError, ValueError):  # holds something that is not plain data: not compared
            snap.append(None)
    return snap


def input_names(case: Case) -> list[str]:
    """The names `inputs_snapshot` lists its values under ("argument 1", "x", ...)."""
    return [name for name, _ in _mutable_inputs(case)]


#: how much processor time the kernel's main thread may spend on one case of a check in the grader: a
#: reference answer takes milliseconds (tests/test_checks.py measures it), a loop that never ends is given
#: up after this. The main thread's processor time, not the clock's: on a loaded machine a kernel waits
#: for a core, and waiting costs the case nothing (a call that only waits is stopped by its test cell's
#: time limit); nor do other threads' (a notebook's own background work, PyTorch's worker threads)
CASE_SECONDS = 5.0
#: how often the watchdog reads the main thread's clock
_WATCH_SECONDS = 0.05


class _CaseTimeout(BaseException):
    """Raised in the student's code when a case runs past its time (not an Exception: a student's
    ``except Exception`` does not swallow it)."""


def _importing(frame: Any) -> bool:
    """Whether `frame` or one of its callers is executing a module's import."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib."):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def _deadline(seconds: float | None) -> Iterator[None]:
    """Raise `_CaseTimeout` in the block once the main thread has used `seconds` of processor time (None,
    or off the main thread: no deadline). A watchdog thread reads the main thread's clock and signals
    it (SIGPROF). Never in the middle of an import (torch imports torch._dynamo, seconds of work, the
    first time an optimiser is built): a module stopped half-way would break every later call. Nor is an
    import's work charged to the case: each time the watchdog looks, the time since it last looked goes
    to the import if the main thread is importing (a module that loops forever as it is imported is
    stopped by its test cell's time limit)."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    main = threading.get_ident()
    clock = time.pthread_getcpuclockid(main)
    done = threading.Event()

    def watch() -> None:
        charged, last = 0.0, time.clock_gettime(clock)
        while not done.wait(_WATCH_SECONDS):
            now = time.clock_gettime(clock)
            frame = sys._current_frames().get(main)
            if frame is None or not _importing(frame):
                charged += now - last
            last = now
            if charged > seconds:
                signal.pthread_kill(main, signal.SIGPROF)

    def out_of_time(signum: int, frame: Any) -> None:
        if not done.is_set() and not _importing(frame):
            raise _CaseTimeout()
    previous = signal.signal(signal.SIGPROF, out_of_time)
    watchdog = threading.Thread(target=watch, name="case-deadline", daemon=True)
    watchdog.start()
    try:
        yield
    finally:
        done.set()
        watchdog.join()
        signal.signal(signal.SIGPROF, previous)


def timed_out(seconds: float) -> Any:
    """The recorded output of a case given up after `seconds`."""
    return raised(TimeoutError(f"this call computed for more than {seconds:g} s and was stopped: "
                               "does it loop forever?"))


def run_student(probe: Probe, obj: Any, cases: list[Case], refuse: bool = True,
                case_seconds: float | None = None) -> list[list]:
    """Call the student's object on each case. Each entry is
    ``[output, inputs after the call, the forbidden functions the call reached]``
    as plain data, and for a probe that `builds_on` earlier pieces, the trace
    of their calls (`pieces.tracing`) last; exceptions become `Raised`. A forbidden function raises
    (`refusal`) unless `refuse` is off (`ALLOW_FORBIDDEN_FILE`): then it runs,
    and is only noted. With `case_seconds` (the grader's kernel), a case that
    runs longer is stopped, and so are the check's later cases (`timed_out`)."""
    entries: list[list] = []
    gave_up = False
    for case in cases:
        traced: list[list] = []
        if gave_up:  # it loops: the next case would too
            entries.append([timed_out(case_seconds), [], [], *([traced] if probe.builds_on else [])])
            continue
        mine = copy.deepcopy(case)
        reached: list[str] = []
        try:
            with watching(probe.forbid, reached, refuse), tracing(obj, probe.builds_on, traced), \
                    _deadline(case_seconds):
                out = to_plain(probe.call(obj, mine))  # exactly what the judge will see
        except _CaseTimeout:
            out, gave_up = timed_out(case_seconds), True
        except Exception as exc:  # the student's bug is the feedback, not a crash
            out = raised(exc)
        entries.append([out, inputs_snapshot(mine) if probe.inputs_unchanged else [], reached,
                        *([traced] if probe.builds_on else [])])
    return entries


@contextlib.contextmanager
def checking_state() -> Iterator[None]:
    """Run a check in the state its cases assume, and leave the process as it was.

    A notebook may change process-wide settings before a test cell (a
    float64 default dtype to check gradients by hand, gradients switched
    off): the check runs its cases and probe networks in float32 with
    gradients on all the same, so that its verdict does not depend on them,
    in the grader as in the student's own run. Afterwards the default dtype,
    the grad mode and the random generators (torch, NumPy's and Python's
    global ones, which calls reseed) are as the notebook left them.
    """
    dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
    states = torch.get_rng_state(), np.random.get_state(), random.getstate()
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        torch.set_rng_state(states[0])
        np.random.set_state(states[1])
        random.setstate(states[2])


#: (check, id of the object) whose cases ran out of time in this kernel
#: (each object is held, so that its id is not given to a later object, a redefined answer)
_looping: dict[tuple[str, int], Any] = {}


def record(name: str, obj: Any, hidden: bool, probe_dir: Path) -> None:
    """Probe mode: run the student's object on the cases the grader handed
    in for check `name` and write the raw results beside them."""
    kind = "hidden" if hidden else "visible"
    try:
        text = (probe_dir / cases_name(name, hidden)).read_text()
    except OSError:
        print(f"no {kind} cases of '{name}' were handed in: this check is not graded here")
        return
    refuse = not (probe_dir / ALLOW_FORBIDDEN_FILE).exists()
    cases = decode_cases(text)
    if (name, id(obj)) in _looping:  # its visible cases ran out of time: so would these
        entries = [[timed_out(CASE_SECONDS), [], [], *([[]] if probe_of(name).builds_on else [])] for _ in cases]
    else:
        entries = run_student(probe_of(name), obj, cases, refuse, CASE_SECONDS)
        if entries and isinstance(entries[-1][0], Raised) and entries[-1][0] == timed_out(CASE_SECONDS):
            _looping[(name, id(obj))] = obj
    (probe_dir / record_name(name, hidden)).write_text(encode(entries))
    print(f"recorded {len(entries)} results of '{name}' for grading")


def probe_dir() -> Path | None:
    """The probe folder when the grader runs this kernel (None in a student's own run)."""
    where = os.environ.get(PROBE_DIR_ENV)
    return Path(where) if where else None
