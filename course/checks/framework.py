"""The check harness behind every test cell.

A test cell in a chapter notebook calls ``check("topic.name", obj)``, e.g.
``check("attention.softmax", softmax)``. The topic names the chapter's
module, `course.checks.attention`, which is imported on first use: one
chapter's checks never depend on another chapter's module loading. What a
check does depends on where the notebook runs:

* **student mode** (the default): the check runs its cases here, compares
  each result with a trusted oracle (a PyTorch built-in, a hand-computed value
  or the course's reference), and prints one report per check. When checks
  of a test cell fail, the cell's last check raises ``AssertionError`` after
  every check has shown its result, so the student sees them all.
* **probe mode** (the autograder and `python -m autograder check` set
  ``COURSE_PROBE_DIR``): the check only *records* what the student's code
  returned, as plain data (see `plain`). The trusted process then recomputes
  the cases and the expected answers and decides (`judge_record`). Nothing the
  student's process does (patched ``np.allclose``, objects whose ``__eq__`` is
  always true, silenced tracebacks) can change that verdict.
* **book mode** (``COURSE_BOOK_BUILD=1``, set when the book is built): like
  student mode, but failures are printed, never raised.

A `Check` is declarative: how to make cases (visible ones from a fixed seed,
hidden ones from the grader's secret seed), how to call the student's object
on a case, the oracle, and known `Mistake`s whose outputs name the error.
Every check also verifies, unless told not to, that the call left its inputs
unchanged and that results have the oracle's dtypes. Helpers chapters share
(masks, building modules, train/eval runs, labels) are in `course.checks.kit`.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import importlib
import linecache
import math
import os
import random
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from course.protocol import BOOK_ENV, PROBE_DIR_ENV, PROBE_SEED_FILE, cell_score, record_name

from .plain import Raised, decode, encode, raised, to_plain

VISIBLE_SEED = 20170612  # arXiv:1706.03762 went up on 12 June 2017
DEFAULT_HIDDEN_SEED = VISIBLE_SEED + 1  # hidden cases outside the grader (an instructor's own run)


# ------------------------------------------------------------ declaring ---

@dataclass
class Case:
    """One input to a student's object.

    `args` and `kwargs` are exactly what the student's object is called with
    (through the check's `call`); `meta` holds what the check itself needs
    (the wrong id planted in an input, the weights to copy in, ...).
    `label` appears in feedback: describe the input, never the answer.
    """

    label: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Raises:
    """Expected outcome: the call must raise one of these exception types."""

    names: tuple[str, ...]
    why: str  # what the student should report, e.g. "d_model must be even"


class _NotApplicable:
    def __repr__(self) -> str:
        return "NOT_APPLICABLE"


#: what a `Mistake`'s output returns for a case it says nothing about
NOT_APPLICABLE = _NotApplicable()


@dataclass(frozen=True)
class Mistake:
    """A known wrong implementation: if the student's output matches
    `output(case)`, `hint` is the feedback. `output` returns
    `NOT_APPLICABLE` on cases where the mistake does not show (a value of
    None is a real output: a function that forgot to return)."""

    hint: str
    output: Callable[[Case], Any]


def default_call(obj: Any, case: Case) -> Any:
    return obj(*case.args, **case.kwargs)


@dataclass
class Check:
    """A named group of cases checking one property of one exercise.

    forbid: dotted names of library functions the exercise asks the student
    not to use (``"torch.softmax"``, ``"torch.Tensor.softmax"``); they raise
    while the student's object runs.
    inputs_unchanged: the call must leave its arguments as they were.
    exact_dtype: results must have the oracle's dtypes.
    """

    name: str
    cases: Callable[[np.random.Generator, bool], list[Case]]
    expected: Callable[[Case], Any]
    call: Callable[[Any, Case], Any] = default_call
    mistakes: Sequence[Mistake] = ()
    hint: str = ""
    rtol: float = 1e-4
    atol: float = 1e-5
    exact_dtype: bool = True
    inputs_unchanged: bool = True
    forbid: Sequence[str] = ()
    topic: str = ""  # set by `register`

    @property
    def qualified_name(self) -> str:
        return f"{self.topic}.{self.name}"

    def make_cases(self, hidden: bool, seed: int | None = None) -> list[Case]:
        s = case_seed(self.name, hidden, seed)
        torch.manual_seed(s)  # cases may draw torch tensors too
        return self.cases(np.random.default_rng(s), hidden)


# ------------------------------------------------------------- registry ---

_CHECKS: dict[str, dict[str, Check]] = {}


class CheckUnavailable(LookupError):
    """A check that does not exist, or whose chapter module failed to load."""


def register(module_name: str, *checks: Check) -> None:
    """Register a chapter's checks: ``register(__name__, Check(...), ...)``.

    The chapter is the module ``course.checks.<topic>``, or a package of that
    name whose modules (one per exercise, say) each register their checks.
    """
    topic = module_name.removeprefix(f"{__package__}.").partition(".")[0]
    table = _CHECKS.setdefault(topic, {})
    for c in checks:
        if c.name in table:
            raise ValueError(f"check {topic}.{c.name} registered twice")
        c.topic = topic
        table[c.name] = c


def checks_of(topic: str) -> dict[str, Check]:
    """Every check of one chapter, importing its module if need be."""
    if topic not in _CHECKS:
        if not topic.isidentifier():
            raise CheckUnavailable(f"no checks for {topic!r}")
        try:
            importlib.import_module(f"{__package__}.{topic}")
        except ModuleNotFoundError as err:
            if err.name == f"{__package__}.{topic}":
                raise CheckUnavailable(f"no checks for chapter topic {topic!r}") from None
            raise CheckUnavailable(f"the checks of {topic!r} could not be loaded: {err}") from err
        except Exception as err:  # a broken chapter module breaks that chapter only
            raise CheckUnavailable(f"the checks of {topic!r} could not be loaded: "
                                   f"{type(err).__name__}: {err}") from err
    return _CHECKS.get(topic, {})


def get_check(qualified: str) -> Check:
    """The check called ``"topic.name"``."""
    topic, _, name = qualified.partition(".")
    table = checks_of(topic) if name else {}
    if name not in table:
        raise CheckUnavailable(f"no check named {qualified!r}: is the course package up to date?")
    return table[name]


def case_seed(name: str, hidden: bool, seed: int | None) -> int:
    base = VISIBLE_SEED if not hidden else (seed if seed is not None else DEFAULT_HIDDEN_SEED)
    return (base * 1_000_003 + zlib.crc32(name.encode())) % 2**32


def seed_for(secret: bytes, student: str, assignment: str) -> int:
    """The hidden-case seed for one submission: unpredictable without the
    instructor's secret, stable across re-runs (so re-grading changes nothing)."""
    digest = hashlib.sha256(secret + f"\0{student}\0{assignment}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


# ------------------------------------------------------------ comparing ---

def _kind(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return f"an array of shape {tuple(x.shape)} ({x.dtype})"
    if isinstance(x, Raised):
        return f"an exception ({x})"
    if x is None:
        return "None (did you forget to return the result?)"
    return f"a {type(x).__name__}"


def _compare_arrays(got: np.ndarray, want: np.ndarray, rtol: float, atol: float,
                    exact_dtype: bool, at: str) -> str | None:
    if got.shape != want.shape:
        return f"expected shape {tuple(want.shape)}, got {tuple(got.shape)}{at}"
    if exact_dtype and got.dtype != want.dtype:
        return f"expected dtype {want.dtype}, got {got.dtype}{at}"
    if want.dtype.kind in "biu" or got.dtype.kind in "biu" and want.dtype.kind != "f":
        if not np.array_equal(got, want):
            idx = tuple(int(i) for i in np.argwhere(got != want)[0])
            return f"values differ{at}: at index {idx} expected {want[idx]}, got {got[idx]}"
        return None
    g, w = got.astype(np.float64), want.astype(np.float64)
    if np.isnan(g).any() and not np.isnan(w).any():
        return f"the result contains NaN{at}"
    if np.isinf(g).any() and not np.isinf(w).any():
        return f"the result contains inf{at}"
    if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
        err = np.where(np.isnan(w) & np.isnan(g), 0.0, np.abs(g - w))
        err = np.where(np.isnan(err), np.inf, err)  # NaN on one side only: as bad as it gets
        idx = tuple(int(i) for i in np.unravel_index(np.argmax(err), err.shape))
        return (f"values differ{at}: largest error {float(err[idx]):.3g} at index {idx} "
                f"(expected {w[idx]:.6g}, got {g[idx]:.6g})")
    return None


def mismatch(got: Any, want: Any, rtol: float, atol: float,
             exact_dtype: bool = False, where: str = "") -> str | None:
    """Describe how `got` differs from `want`, or None when they agree.

    `want` comes from a trusted oracle; `got` is decoded plain data (or, in
    student mode, converted to it), so the comparison runs no student code.
    """
    at = f" in {where}" if where else ""
    if _not_implemented(got):  # the stub, whatever the oracle expects (an exception too)
        return "not implemented yet (the stub still raises NotImplementedError)"
    if isinstance(want, Raises):
        if isinstance(got, Raised) and set(got.names) & set(want.names):
            return None
        return (f"expected {' or '.join(want.names)} to be raised ({want.why}), "
                f"but got {_kind(got)}{at}")
    if isinstance(got, Raised):
        return f"raised {got}{at}"
    if isinstance(want, np.ndarray):
        if not isinstance(got, np.ndarray):
            return f"expected an array/tensor of shape {tuple(want.shape)}, got {_kind(got)}{at}"
        return _compare_arrays(got, want, rtol, atol, exact_dtype, at)
    if isinstance(want, bool) or want is None or isinstance(want, str):
        if type(got) is not type(want) or got != want:
            return f"expected {want!r}, got {_short(got)}{at}"
        return None
    if isinstance(want, (int, float)):
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return f"expected the number {want!r}, got {_kind(got)}{at}"
        if isinstance(want, int):  # a count or an id: a float, even 3.0, breaks the contract
            if not isinstance(got, int):
                return f"expected the whole number {want} (an int), got the float {got!r}{at}"
            return None if got == want else f"expected {want}, got {got}{at}"
        if not math.isclose(got, want, rel_tol=rtol, abs_tol=atol):
            return f"expected {want:.6g}, got {got:.6g}{at}"
        return None
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            return f"expected a {type(want).__name__} of length {len(want)}, got {_kind(got)}{at}"
        if len(got) != len(want):
            return f"expected {len(want)} items, got {len(got)}{at}"
        for i, (g, w) in enumerate(zip(got, want)):
            m = mismatch(g, w, rtol, atol, exact_dtype, f"{where}[{i}]" if where else f"item {i}")
            if m:
                return m
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"expected a dict, got {_kind(got)}{at}"
        if set(got) != set(want):
            missing, extra = set(want) - set(got), set(got) - set(want)
            parts = []
            if missing:
                parts.append(f"missing keys {sorted(map(repr, missing))[:5]}")
            if extra:
                parts.append(f"unexpected keys {sorted(map(repr, extra))[:5]}")
            return f"{' and '.join(parts)}{at}"
        for k in want:
            m = mismatch(got[k], want[k], rtol, atol, exact_dtype, f"{where}[{k!r}]" if where else f"key {k!r}")
            if m:
                return m
        return None
    raise TypeError(f"oracle returned an unsupported {type(want).__name__}")


def _short(x: Any) -> str:
    if x is None or isinstance(x, np.ndarray):
        return _kind(x)
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


# --------------------------------------------------------------- inputs ---

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


def _inputs_problem(check_: Check, case: Case, after: Any) -> str | None:
    before = inputs_snapshot(case)
    if not isinstance(after, list) or len(after) != len(before):
        return "the recorded inputs do not match the test's case"
    for (name, _), b, a in zip(_mutable_inputs(case), before, after):
        if b is not None and mismatch(a, b, 0.0, 0.0, exact_dtype=True):
            return (f"your code changed its input ({name}) in place; the contract leaves its inputs "
                    "unchanged: compute new tensors/lists (x = x - m, not x -= m or x.sub_(m))")
    return None


# ------------------------------------------------------------ verdicts ---

@dataclass
class CaseResult:
    label: str
    problem: str | None  # None: the case passed

    @property
    def passed(self) -> bool:
        return self.problem is None


SHOWN_FAILURES = 3  # failed cases a report details (with the mistake they match)


def evaluate(check_: Check, cases: list[Case], entries: list[Any]) -> list[CaseResult]:
    """Compare recorded entries ``[output, inputs after the call]`` with the
    oracle. The first `SHOWN_FAILURES` failed cases, which reports show, name
    the known mistake they match (or the check's general hint)."""
    results = []
    for case, entry in zip(cases, entries):
        if not isinstance(entry, list) or len(entry) != 2:
            results.append(CaseResult(case.label, "the recorded result is not in the expected form"))
            continue
        got, after = entry
        want = check_.expected(case)
        want = want if isinstance(want, Raises) else to_plain(want)
        problem = mismatch(got, want, check_.rtol, check_.atol, check_.exact_dtype)
        shown = sum(not r.passed for r in results) < SHOWN_FAILURES
        if problem and shown and not _not_implemented(got):
            hint = _matching_mistake(check_, case, got, want) or check_.hint
            if hint:
                problem = f"{problem}. {hint}"
        if problem is None and check_.inputs_unchanged:
            problem = _inputs_problem(check_, case, after)
        results.append(CaseResult(case.label, problem))
    return results


def _not_implemented(got: Any) -> bool:
    return isinstance(got, Raised) and "NotImplementedError" in got.names


def mistake_output(m: Mistake, case: Case) -> Any:
    """A mistake's output on a case as plain data, NOT_APPLICABLE, or the
    `Raised` it raises (so may the student's code, making the same mistake)."""
    try:
        out = m.output(copy.deepcopy(case))
    except Exception as exc:
        return raised(exc)
    return out if out is NOT_APPLICABLE else to_plain(out)


def _matching_mistake(check_: Check, case: Case, got: Any, want: Any) -> str | None:
    """The hint of the first mistake whose output on `case` is the student's.

    A mistake whose output is the right answer on this case (scaling by 1,
    flattening a 1-D input) cannot be told apart here and is skipped.
    """
    for m in check_.mistakes:
        wrong = mistake_output(m, case)
        if wrong is NOT_APPLICABLE or (not isinstance(wrong, Raised)
                                       and not mismatch(wrong, want, 0.0, 0.0, exact_dtype=True)):
            continue
        if isinstance(wrong, Raised):
            # The contract's own errors (ValueError, ...) match by type. A RuntimeError is PyTorch's
            # for any failed operation: it is this mistake only with the same message (not a
            # forbidden call, nor another shape error, which the general hint speaks to).
            if isinstance(got, Raised) and got.names[0] == wrong.names[0] and (
                    wrong.names[0] != "RuntimeError" or got.message == wrong.message):
                return m.hint
        elif not isinstance(got, Raised) and mismatch(got, wrong, check_.rtol, check_.atol) is None:
            return m.hint
    return None


def summary(check_: Check, hidden: bool, results: list[CaseResult]) -> tuple[bool, str]:
    """(passed, report) for one check: one line, plus up to three failed cases."""
    kind, name = ("hidden" if hidden else "visible"), check_.qualified_name
    failed = [r for r in results if not r.passed]
    if not failed:
        return True, f"✓ {name}: {len(results)} {kind} case{'s' * (len(results) != 1)} pass"
    lines = [f"✗ {name}: {len(failed)} of {len(results)} {kind} cases failed"]
    for r in failed[:SHOWN_FAILURES]:
        lines.append(f"  - case '{r.label}': {r.problem}")
    if len(failed) > SHOWN_FAILURES:
        lines.append(f"  - ... and {len(failed) - SHOWN_FAILURES} more")
    return False, "\n".join(lines)


def judge_record(name: str, hidden: bool, seed: int | None, text: str | None) -> tuple[bool, str]:
    """Trusted side: the verdict for one check from the JSON a kernel recorded."""
    kind = "hidden" if hidden else "visible"
    try:
        check_ = get_check(name)
    except CheckUnavailable as err:
        return False, f"✗ {name}: {err} (tell your instructor)."
    if text is None:
        return False, (f"✗ {name}: no {kind} results were recorded. The test cell did not reach "
                       "this check: an earlier line raised, or the kernel died or timed out.")
    try:
        entries = decode(text)
    except ValueError as err:
        return False, f"✗ {name}: the recorded {kind} results are unreadable ({err})."
    cases = check_.make_cases(hidden, seed)
    if not isinstance(entries, list) or len(entries) != len(cases):
        return False, f"✗ {name}: the recorded {kind} results do not match the test's cases."
    return summary(check_, hidden, evaluate(check_, cases, entries))


# --------------------------------------------------------- running cases ---

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


@contextlib.contextmanager
def forbidden(names: Sequence[str]) -> Iterator[None]:
    """Make the named library functions raise while the block runs."""
    spots = [(*_resolve(n), n) for n in names]
    saved = [(owner, attr, owner.__dict__.get(attr), attr in owner.__dict__) for owner, attr, _ in spots]

    def refuse(what: str) -> Callable:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"{what} is not allowed in this exercise: write it with basic tensor operations")
        return refused

    try:
        for owner, attr, what in spots:
            setattr(owner, attr, refuse(what))
        yield
    finally:
        for owner, attr, old, had in saved:
            if had:
                setattr(owner, attr, old)
            else:
                delattr(owner, attr)


def run_student(check_: Check, obj: Any, cases: list[Case]) -> list[list]:
    """Call the student's object on each case. Each entry is
    ``[output, inputs after the call]`` as plain data; exceptions become
    `Raised`."""
    entries = []
    for case in cases:
        mine = copy.deepcopy(case)
        try:
            with forbidden(check_.forbid):
                out = to_plain(check_.call(obj, mine))  # exactly what the judge would see
        except Exception as exc:  # the student's bug is the feedback, not a crash
            out = raised(exc)
        entries.append([out, inputs_snapshot(mine) if check_.inputs_unchanged else []])
    return entries


# --------------------------------------------------------------- entry ---

def _check_lines(filename: str, module_globals: dict) -> list[int]:
    """Line numbers of the ``check(...)`` calls in a cell's (or file's) source."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename, module_globals)))
    except (SyntaxError, ValueError):
        return []
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
            and getattr(n.func, "id", getattr(n.func, "attr", None)) == "check"]


_failed_in_cell: dict[str, list[str]] = {}


def _report_student(name: str, ok: bool, report: str, caller: Any) -> None:
    """Show a student-mode report; raise once the cell's last check ran.

    A test cell calls several checks; each prints its result, and the last
    one raises if any of them failed, so that a failing cell shows them all.
    """
    if os.environ.get(BOOK_ENV):  # the book shows unsolved stubs: say so, never raise
        print(report if ok else report.splitlines()[0] + " (expected until the exercise is solved)")
        return
    print(report)
    where = caller.f_code.co_filename
    lines = _check_lines(where, caller.f_globals)
    if not lines or caller.f_lineno <= min(lines):
        _failed_in_cell[where] = []
    failed = _failed_in_cell.setdefault(where, [])
    if not ok:
        failed.append(name)
    if failed and (not lines or caller.f_lineno >= max(lines)):
        _failed_in_cell.pop(where, None)
        __tracebackhide__ = True  # IPython and pytest hide this frame: the reports are the feedback
        raise AssertionError(f"{len(failed)} check(s) failed: {', '.join(failed)} (details above)")


@contextlib.contextmanager
def checking_state() -> Iterator[None]:
    """Run a check in the state its cases assume, and leave the process as it was.

    A notebook may change process-wide settings before a test cell (a
    float64 default dtype to check gradients by hand, gradients switched
    off): the check builds its cases and probe networks in float32 with
    gradients on all the same, so that its verdict does not depend on them,
    in the grader as in the student's own run. Afterwards the default dtype,
    the grad mode and the random generators (torch, NumPy's and Python's
    global ones, which cases reseed) are as the notebook left them.
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


def check(name: str, obj: Any, *, hidden: bool = False) -> None:
    """Run (or, under the autograder, record) the check ``"topic.name"`` on `obj`."""
    __tracebackhide__ = True
    with checking_state():
        _check(name, obj, hidden, sys._getframe(1))


def _check(name: str, obj: Any, hidden: bool, caller: Any) -> None:
    __tracebackhide__ = True
    check_ = get_check(name)
    probe_dir = os.environ.get(PROBE_DIR_ENV)
    if probe_dir:
        probe = Path(probe_dir)
        seed = int((probe / PROBE_SEED_FILE).read_text().strip()) if hidden else None
        entries = run_student(check_, obj, check_.make_cases(hidden, seed))
        (probe / record_name(name, hidden)).write_text(encode(entries))
        print(f"recorded {len(entries)} results of '{name}' for grading")
        return
    cases = check_.make_cases(hidden)
    ok, report = summary(check_, hidden, evaluate(check_, cases, run_student(check_, obj, cases)))
    _report_student(name, ok, report, caller)


__all__ = ["Case", "Check", "CheckUnavailable", "Mistake", "NOT_APPLICABLE", "Raises", "cell_score",
           "check", "checks_of", "forbidden", "get_check", "judge_record", "register"]
