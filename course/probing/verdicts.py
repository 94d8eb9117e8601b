"""How a check's recorded results are judged: comparisons, known mistakes, reports.

One implementation for both places a verdict is made:

* the grader's judge (`course.checks.framework.judge_record`), outside the
  sandbox, against the oracle's answers and the mistakes' outputs computed
  there, on the cases drawn from the grading secret;
* a student's own run (`course.probing.practice`), against the same answers
  on the visible cases, precomputed by the instructor's release as data.

Nothing here knows an answer: every function compares plain data (what
`plain` decodes) with an expected value it is given.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .cases import Case
from .pieces import piece_of
from .plain import Raised, decode, raised, to_plain
from .runner import input_names, inputs_snapshot


@dataclass(frozen=True)
class Raises:
    """Expected outcome: the call must raise one of these exception types."""

    names: tuple[str, ...]
    why: str  # what the student should report, e.g. "d_model must be even"


class _NotApplicable:
    def __repr__(self) -> str:
        return "NOT_APPLICABLE"


#: what a mistake's output is on a case it says nothing about
NOT_APPLICABLE = _NotApplicable()


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


#: the problem of a case the stub answered (its NotImplementedError)
STUB = "not implemented yet (the stub still raises NotImplementedError)"


def not_implemented(got: Any) -> bool:
    """Whether a recorded output is the stub's NotImplementedError."""
    return isinstance(got, Raised) and "NotImplementedError" in got.names


def mismatch(got: Any, want: Any, rtol: float, atol: float,
             exact_dtype: bool = False, where: str = "") -> str | None:
    """Describe how `got` differs from `want`, or None when they agree.

    `want` is an expected answer; `got` is decoded plain data (or converted
    to it), so the comparison runs no student code.
    """
    at = f" in {where}" if where else ""
    if not_implemented(got):  # the stub, whatever is expected (an exception too)
        return STUB
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
    raise TypeError(f"an expected answer of unsupported type {type(want).__name__}")


def _short(x: Any) -> str:
    if x is None or isinstance(x, np.ndarray):
        return _kind(x)
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _inputs_problem(case: Case, after: Any, expected: list | None = None) -> str | None:
    """How the inputs after the call differ from what they must be: as they were (`expected`: as the
    answer left them on the student's earlier pieces, in a replay), None if they do not."""
    before = inputs_snapshot(case) if expected is None else expected
    if not isinstance(after, list) or len(after) != len(before):
        return "the recorded inputs do not match the test's case"
    tolerance = 0.0 if expected is None else 1e-5
    for name, b, a in zip(input_names(case), before, after):
        if b is not None and mismatch(a, b, tolerance, tolerance, exact_dtype=True):
            return (f"your code changed its input ({name}) in place; the contract leaves its inputs "
                    "unchanged: compute new tensors/lists (x = x - m, not x -= m or x.sub_(m))")
    return None


# ------------------------------------------------------------ verdicts ---

@dataclass(frozen=True)
class Standard:
    """What a check asks of every case: tolerances, the general hint, the
    in-place clause, and `observe`, which turns a raw output into what the
    answers describe (None: the raw output itself)."""

    rtol: float = 1e-4
    atol: float = 1e-5
    exact_dtype: bool = True
    hint: str = ""
    inputs_unchanged: bool = True
    observe: Callable[[Case, Any], Any] | None = None
    guard: bool = False  # an error path or a property: counts once the cell's other checks pass
    builds_on: tuple[str, ...] = ()  # the chapter's earlier answers the exercise calls (`runner.Probe`)


@dataclass(frozen=True)
class CaseResult:
    label: str
    problem: str | None  # None: the case passed
    hint: str = ""  # for a failure a report shows: the matched mistake's hint, else the check's
    mistake: bool = False  # the hint is a known mistake's (not the check's general one)
    reached: tuple[str, ...] = ()  # the forbidden functions the call reached (`runner.watching`)
    replayed: bool = False  # passed on replay: the earlier pieces named in `hint` are at fault (`evaluate`)

    @property
    def passed(self) -> bool:
        return self.problem is None

    @property
    def text(self) -> str:
        return f"{self.problem}. {self.hint}" if self.hint else str(self.problem)


SHOWN_FAILURES = 3  # failed cases a report details (with the mistake they match)

#: a known mistake's (hint, output on a case): plain data, a `Raised`, or NOT_APPLICABLE
Wrong = tuple[str, Any]


def observed(standard: Standard, case: Case, raw: Any) -> Any:
    """`standard.observe` of a raw output; a raw output it cannot read
    (recorded in another form) is reported, not raised."""
    if standard.observe is None or isinstance(raw, Raised):
        return raw
    try:
        return to_plain(standard.observe(copy.deepcopy(case), raw))
    except Exception as exc:
        return raised(exc)


def evaluate(standard: Standard, cases: Sequence[Case], entries: list[Any], want: Callable[[int], Any],
             wrongs: Callable[[int], Sequence[Wrong]],
             replay: Callable[[int, list], Any] | None = None) -> list[CaseResult]:
    """Compare recorded entries ``[output, inputs after the call, forbidden
    functions reached(, trace of the earlier pieces' calls)]`` (`runner.run_student`)
    with the answers: ``want(i)`` is case i's (plain data or `Raises`),
    ``wrongs(i)`` the known mistakes' outputs on it, asked only for the first
    `SHOWN_FAILURES` failed cases, which reports show with the hint of the
    mistake they match (or the check's general hint). ``replay(i, trace)``
    (the judge's, `course.probing.pieces`) is what the course's answer returns
    on case i with the student's earlier pieces' recorded outputs, and the
    case's inputs as it left them, or NOT_APPLICABLE: a failed case whose
    output (and inputs after the call) it matches is the earlier pieces' fault,
    not this exercise's, and passes (`CaseResult.replayed`)."""
    results: list[CaseResult] = []
    for i, (case, entry) in enumerate(zip(cases, entries)):
        if not isinstance(entry, list) or len(entry) not in (3, 4) or not isinstance(entry[2], list) \
                or not all(isinstance(name, str) for name in entry[2]):
            results.append(CaseResult(case.label, "the recorded result is not in the expected form"))
            continue
        got, after, reached = entry[:3]
        got = observed(standard, case, got)
        answer = want(i)
        problem = mismatch(got, answer, standard.rtol, standard.atol, standard.exact_dtype)
        changed = None if problem or not standard.inputs_unchanged else _inputs_problem(case, after)
        if (problem or changed) and replay is not None and len(entry) == 4 and isinstance(entry[3], list) and entry[3] \
                and not isinstance(answer, Raises):
            theirs = replay(i, entry[3])
            if theirs is not NOT_APPLICABLE and _same(standard, case, got, theirs[0]):
                problem = _inputs_problem(case, after, theirs[1]) if standard.inputs_unchanged else None
                pieces = " and ".join(at_fault(standard, case, got, entry[3], lambda only: replay(i, entry[3], only)))
                results.append(CaseResult(case.label, problem, f"your {pieces}", False, tuple(reached),
                                          replayed=problem is None))
                continue
        hint, mistake = "", False
        shown = sum(not r.passed for r in results) < SHOWN_FAILURES
        if problem and shown and not not_implemented(got):
            known = matching_mistake(standard, wrongs(i), got, answer)
            hint, mistake = (known, True) if known else (standard.hint, False)
            if standard.builds_on and replay is None:  # a student's own run: no answers to replay with
                hint += (f" (This exercise runs your {', '.join(standard.builds_on)}: if one of them fails its own "
                         "test, fix it first. The grader judges this exercise on what it adds.)")
        problem = problem or changed
        results.append(CaseResult(case.label, problem, hint, mistake, tuple(reached)))
    return results


def at_fault(standard: Standard, case: Case, got: Any, trace: list, replay: Callable[[tuple], Any]) -> list[str]:
    """The earlier pieces a replayed case is the fault of: each piece whose recorded outputs alone,
    the others computing as the answer does, give what the student's exercise returned; if none
    does alone, every piece the trace holds (in `builds_on` order)."""
    traced = {piece_of(e[0]) for e in trace if isinstance(e, list) and e and isinstance(e[0], str)}
    held = [p for p in standard.builds_on if p in traced] or list(standard.builds_on)
    if len(held) == 1:
        return held
    alone = []
    for piece in held:
        theirs = replay((piece,))
        if theirs is not NOT_APPLICABLE and _same(standard, case, got, theirs[0]):
            alone.append(piece)
    return alone or held


def _same(standard: Standard, case: Case, got: Any, replayed: Any) -> bool:
    """Whether the student's (observed) output is what the answer's replay gave: the same exception
    (the earlier piece's fault made both fail alike), or the same value."""
    if isinstance(got, Raised) or isinstance(replayed, Raised):
        return isinstance(got, Raised) and isinstance(replayed, Raised) and got.names[0] == replayed.names[0]
    return mismatch(got, observed(standard, case, replayed), standard.rtol, standard.atol,
                    standard.exact_dtype) is None


def matching_mistake(standard: Standard, wrongs: Sequence[Wrong], got: Any, want: Any) -> str | None:
    """The hint of the first mistake whose output is the student's.

    A mistake whose output is the right answer on this case (scaling by 1,
    flattening a 1-D input) cannot be told apart here and is skipped.
    """
    for hint, wrong in wrongs:
        if wrong is NOT_APPLICABLE or (not isinstance(wrong, Raised)
                                       and not mismatch(wrong, want, 0.0, 0.0, exact_dtype=True)):
            continue
        if isinstance(wrong, Raised):
            # The contract's own errors (ValueError, ...) match by type. A RuntimeError is PyTorch's
            # for any failed operation: it is this mistake only with the same message (not a
            # forbidden call, nor another shape error, which the general hint speaks to).
            if isinstance(got, Raised) and got.names[0] == wrong.names[0] and (
                    wrong.names[0] != "RuntimeError" or got.message == wrong.message):
                return hint
        elif not isinstance(got, Raised) and mismatch(got, wrong, standard.rtol, standard.atol) is None:
            return hint
    return None


def summary(name: str, hidden: bool, results: list[CaseResult]) -> tuple[bool, str]:
    """(passed, report) for one check: one line, plus up to three failed cases."""
    kind = "hidden" if hidden else "visible"
    failed = [r for r in results if not r.passed]
    replayed = [r for r in results if r.replayed]
    blamed = (f"; {len(replayed)} of them judged on what this exercise adds, with what {replayed[0].hint} "
              "returned: that piece differs from the answer, and costs its points in its own exercise"
              if replayed else "")
    if not failed:
        return True, f"✓ {name}: {len(results)} {kind} case{'s' * (len(results) != 1)} pass{blamed}"
    lines = [f"✗ {name}: {len(failed)} of {len(results)} {kind} cases failed{blamed}"]
    for r in failed[:SHOWN_FAILURES]:
        lines.append(f"  - case '{r.label}': {r.text}")
    if len(failed) > SHOWN_FAILURES:
        lines.append(f"  - ... and {len(failed) - SHOWN_FAILURES} more")
    return False, "\n".join(lines)


# ------------------------------------------------- verdicts as data ---

#: a check's category in its `record`, beside a plain pass or fail (None):
NOT_IMPLEMENTED = "not implemented"  # its first failed case met the stub (`STUB`)
NO_RESULTS = "no results"  # nothing recorded: the test cell did not reach the check
UNREADABLE = "unreadable"  # the recorded results are unreadable, or not the test's cases
UNAVAILABLE = "unavailable"  # the check could not be judged here (not loaded; hidden in a self-check)
JUDGE_ERROR = "judge error"  # the judge itself failed on it (`autograder.judge`)


def record(name: str, hidden: bool, results: Sequence[CaseResult] = (), category: str | None = None,
           cases: int | None = None, guard: bool = False) -> dict:
    """One check's verdict as JSON-ready data, what `summary` prints::

        {"check": name, "hidden": bool, "passed": bool, "category": None or one above,
         "cases": how many, "failed": how many, "guard": the check is a guard (`course.protocol.counted`),
         "reached": the forbidden functions its calls reached, whether refused or let run,
         "replayed": how many cases passed on the student's own earlier pieces' outputs (`evaluate`),
         "replayed_on": the earlier pieces at fault (`at_fault`: "merge_heads", "RMSNorm and
         GroupedQueryAttention"; "" when none was),
         "shown": [{"label", "problem", "hint", "mistake": the hint is a known mistake's}, ...]}

    `shown` holds the failed cases a report details (`SHOWN_FAILURES`); `cases`
    defaults to the number of `results` (none when nothing could be judged)."""
    failed = [r for r in results if not r.passed]
    if category is None and failed and failed[0].problem == STUB:
        category = NOT_IMPLEMENTED
    return {"check": name, "hidden": hidden, "passed": not failed and category is None, "category": category,
            "cases": len(results) if cases is None else cases, "failed": len(failed), "guard": guard,
            "reached": sorted({name for r in results for name in r.reached}),
            "replayed": sum(r.replayed for r in results),
            "replayed_on": next((r.hint.removeprefix("your ") for r in results if r.replayed), ""),
            "shown": [{"label": r.label, "problem": r.problem, "hint": r.hint, "mistake": r.mistake}
                      for r in failed[:SHOWN_FAILURES]]}


class Verdict(tuple):
    """A check's verdict: the pair ``(passed, report)`` it has always been,
    carrying the same verdict as data in `record` (see `record`)."""

    record: dict

    def __new__(cls, passed: bool, text: str, record_: dict) -> "Verdict":
        self = super().__new__(cls, (passed, text))
        self.record = record_
        return self

    def __getnewargs__(self) -> tuple:  # copy and pickle
        return (*self, self.record)

    @property
    def passed(self) -> bool:
        return self[0]

    @property
    def text(self) -> str:
        return self[1]


def unjudged(name: str, hidden: bool, text: str, category: str, cases: int | None = None,
             guard: bool = False) -> Verdict:
    """The verdict on a check no case of which could be judged, of `category`."""
    return Verdict(False, text, record(name, hidden, category=category, cases=cases, guard=guard))


def verdict(name: str, hidden: bool, results: list[CaseResult], guard: bool = False) -> Verdict:
    """`summary` with its `record`."""
    return Verdict(*summary(name, hidden, results), record(name, hidden, results, guard=guard))


def judge_text(name: str, hidden: bool, text: str | None, cases: Sequence[Case],
               judge: Callable[[list], list[CaseResult]], guard: bool = False) -> Verdict:
    """(passed, report) for one check from the JSON text a kernel recorded
    (None: no record), with ``judge(entries)`` judging well-formed entries
    of `cases`; its `record` is the same verdict as data (`guard`: the check's)."""
    kind = "hidden" if hidden else "visible"
    if text is None:
        return unjudged(name, hidden, f"✗ {name}: no {kind} results were recorded. The test cell did not reach "
                        "this check: an earlier line raised, or the kernel died or timed out.", NO_RESULTS, len(cases),
                        guard)
    try:
        entries = decode(text)
    except ValueError as err:
        return unjudged(name, hidden, f"✗ {name}: the recorded {kind} results are unreadable ({err}).",
                        UNREADABLE, len(cases), guard)
    if not isinstance(entries, list) or len(entries) != len(cases):
        return unjudged(name, hidden, f"✗ {name}: the recorded {kind} results do not match the test's cases.",
                        UNREADABLE, len(cases), guard)
    return verdict(name, hidden, judge(entries), guard)
