"""The trusted side of the checks behind every test cell: cases, oracles, verdicts.

A test cell in a chapter notebook calls ``check("topic.name", obj)``, e.g.
``check("attention.softmax", softmax)``. The topic names the chapter's
module, `course.checks.attention`, which is imported on first use: one
chapter's checks never depend on another chapter's module loading. A check
has two halves:

* the `Check` here (trusted side): how to make cases (visible ones from a
  fixed seed, hidden ones from the grader's secret seed), the oracle, and
  known `Mistake`s whose outputs name the error;
* its `Probe` in `course.probing` (the kernel's side): how to call the
  student's object on a case, and nothing else.

Under the autograder (and `python -m autograder check`), `write_cases` hands
the kernel each check's cases as data; the kernel, in the sandbox, sees
neither the seed nor this module, runs the student's object and records its
raw outputs (`course.probing.runner.record`); `judge_record` then remakes the
cases here and decides. Nothing the student's process does (patched
``np.allclose``, objects whose ``__eq__`` is always true, records written by
hand) can reach an oracle or change that verdict. In a student's own run
(Jupyter, or the book with ``COURSE_BOOK_BUILD=1``, where failures print
instead of raising), `check_here` does the same in one process.

Every check also verifies, unless its probe says otherwise, that the call
left its inputs unchanged, and that results have the oracle's dtypes.
Helpers chapters share (masks, mistakes as knobs, labels) are in
`course.checks.kit`.
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

from course.probing import runner
from course.probing.cases import Case, carried, encode_cases
from course.probing.plain import Raised, decode, raised, to_plain
from course.protocol import BOOK_ENV, cases_name, cell_score

VISIBLE_SEED = 20170612  # arXiv:1706.03762 went up on 12 June 2017
DEFAULT_HIDDEN_SEED = VISIBLE_SEED + 1  # hidden cases outside the grader (an instructor's own run)


# ------------------------------------------------------------ declaring ---

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


@dataclass
class Check:
    """A named group of cases checking one property of one exercise: the
    trusted side's half (cases, oracle, known mistakes).

    The kernel's half, how the student's object is called on a case, is the
    `Probe` of the same name in `course.probing.calls` (`probe`).
    observe: turns the raw output the kernel recorded into what `expected`
    and the mistakes describe (a statistic of samples, the facts of a
    masking, ...), on the trusted side; None: compare the raw output itself.
    exact_dtype: results must have the oracle's dtypes.
    """

    name: str
    cases: Callable[[np.random.Generator, bool], list[Case]]
    expected: Callable[[Case], Any]
    mistakes: Sequence[Mistake] = ()
    hint: str = ""
    rtol: float = 1e-4
    atol: float = 1e-5
    exact_dtype: bool = True
    observe: Callable[[Case, Any], Any] | None = None
    topic: str = ""  # set by `register`

    @property
    def qualified_name(self) -> str:
        return f"{self.topic}.{self.name}"

    @property
    def probe(self) -> runner.Probe:
        return runner.probe_of(self.qualified_name)

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

def _inputs_problem(case: Case, after: Any) -> str | None:
    before = runner.inputs_snapshot(case)
    if not isinstance(after, list) or len(after) != len(before):
        return "the recorded inputs do not match the test's case"
    for name, b, a in zip(runner.input_names(case), before, after):
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
    inputs_unchanged = check_.probe.inputs_unchanged
    for case, entry in zip(cases, entries):
        if not isinstance(entry, list) or len(entry) != 2:
            results.append(CaseResult(case.label, "the recorded result is not in the expected form"))
            continue
        got, after = entry
        if check_.observe is not None and not isinstance(got, Raised):
            got = observed(check_, case, got)
        want = check_.expected(case)
        want = want if isinstance(want, Raises) else to_plain(want)
        problem = mismatch(got, want, check_.rtol, check_.atol, check_.exact_dtype)
        shown = sum(not r.passed for r in results) < SHOWN_FAILURES
        if problem and shown and not _not_implemented(got):
            hint = _matching_mistake(check_, case, got, want) or check_.hint
            if hint:
                problem = f"{problem}. {hint}"
        if problem is None and inputs_unchanged:
            problem = _inputs_problem(case, after)
        results.append(CaseResult(case.label, problem))
    return results


def observed(check_: Check, case: Case, raw: Any) -> Any:
    """`check_.observe` of a raw output, on the trusted side; a raw output
    it cannot read (recorded in another form) is reported, not raised."""
    try:
        return to_plain(check_.observe(copy.deepcopy(case), raw))
    except Exception as exc:
        return raised(exc)


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

def write_cases(probe: Path, calls: Sequence[tuple[str, bool]], seed: int | None) -> None:
    """Trusted side: hand the kernel the cases of each ``(check name,
    hidden)`` a notebook's test cells call, as data in the probe folder
    (hidden ones drawn from `seed`). A name with no check gets no file."""
    for name, hidden in calls:
        try:
            check_ = get_check(name)
        except CheckUnavailable:
            continue
        text = encode_cases(check_.make_cases(hidden, seed if hidden else None))
        (probe / cases_name(name, hidden)).write_text(text)


def student_entries(check_: Check, obj: Any, cases: list[Case]) -> list[list]:
    """What the kernel would record for `obj` on `cases`: the cases make the
    same trip as under the grader, then the check's probe runs them."""
    return runner.run_student(check_.probe, obj, carried(cases))


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


def check_here(name: str, obj: Any, hidden: bool, caller: Any) -> None:
    """A student's own run: run check `name`'s cases on `obj`, show the
    verdict, and raise once the test cell's last check ran if any failed."""
    __tracebackhide__ = True
    check_ = get_check(name)
    cases = check_.make_cases(hidden)
    ok, report = summary(check_, hidden, evaluate(check_, cases, student_entries(check_, obj, cases)))
    _report_student(name, ok, report, caller)


__all__ = ["Case", "Check", "CheckUnavailable", "Mistake", "NOT_APPLICABLE", "Raises", "cell_score",
           "checks_of", "get_check", "judge_record", "register", "student_entries", "write_cases"]
