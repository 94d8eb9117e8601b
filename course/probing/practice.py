"""A student's own run of the visible checks, judged against answers shipped as data.

The package a student installs holds no oracle. For every check, the
instructor's release (`python -m autograder release`) writes the visible
cases, the oracle's answers on them and every known mistake's outputs on
them into ``course/visible/<topic>.json`` (`course.checks.framework.visible_data`).
A test cell's ``check(...)`` in Jupyter, the self-check of a learner's
pieces (`course.learner`) and the book all judge the student's object
against that file, with the same code the grader uses (`verdicts`): the
same verdicts, the same hints, on the same inputs.
"""

from __future__ import annotations

import functools
import json
import linecache
import os
from pathlib import Path
from typing import Any

from course.cells import check_calls
from course.protocol import BOOK_ENV, cases_name

from .cases import Case, decode_cases
from .plain import from_json_value, to_json_value, to_plain
from .runner import CheckUnavailable, probe_of, run_student
from .verdicts import (NOT_APPLICABLE, UNAVAILABLE, Raises, Standard, Verdict, Wrong, evaluate, judge_text, summary,
                       unjudged)

#: where the release writes each chapter's visible answers
VISIBLE = Path(__file__).resolve().parent.parent / "visible"


class NoVisibleAnswers(CheckUnavailable):
    """The chapter's visible answers are missing: the release was not run."""


# ----------------------------------------------------------- the format ---

def encode_answer(want: Any) -> Any:
    """An answer (plain data, or `Raises`) as JSON-ready data."""
    if isinstance(want, Raises):
        return {"raises": list(want.names), "why": want.why}
    return {"value": to_json_value(to_plain(want))}


def decode_answer(data: dict) -> Any:
    if "raises" in data:
        return Raises(tuple(data["raises"]), data["why"])
    return from_json_value(data["value"])


def encode_wrong(output: Any) -> Any:
    """A mistake's output on one case (plain data, a `Raised`, or NOT_APPLICABLE)."""
    return None if output is NOT_APPLICABLE else {"value": to_json_value(output)}


def decode_wrong(data: Any) -> Any:
    return NOT_APPLICABLE if data is None else from_json_value(data["value"])


@functools.cache
def _chapter(topic: str) -> dict:
    path = VISIBLE / f"{topic}.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise NoVisibleAnswers(f"{path} is missing: run `python -m autograder release` "
                               "(it writes every chapter's visible answers)") from None


@functools.cache
def visible(name: str) -> tuple[Standard, list[Case], list[Any], list[list[Wrong]]]:
    """Check `name`'s standard, visible cases, answers, and the known
    mistakes' (hint, output) on each case, from the chapter's file."""
    topic = name.partition(".")[0]
    try:
        data = _chapter(topic)["checks"][name]
    except KeyError:
        raise NoVisibleAnswers(f"no visible answers for check {name!r}: is the course package up to date?") from None
    probe = probe_of(name)
    standard = Standard(**data["standard"], inputs_unchanged=probe.inputs_unchanged, observe=probe.observe,
                        builds_on=tuple(probe.builds_on))
    cases = decode_cases(json.dumps(data["cases"]))
    answers = [decode_answer(a) for a in data["answers"]]
    wrongs = [[(m["hint"], decode_wrong(m["outputs"][i])) for m in data["mistakes"]] for i in range(len(cases))]
    return standard, cases, answers, wrongs


def judge_visible(name: str, obj: Any) -> tuple[bool, str, list[list]]:
    """Run the visible cases of check `name` on `obj` here and judge them:
    (passed, report, the recorded entries ``[output, inputs after]``)."""
    standard, cases, answers, wrongs = visible(name)
    entries = run_student(probe_of(name), obj, cases)
    ok, report = summary(name, False, evaluate(standard, cases, entries, answers.__getitem__, wrongs.__getitem__))
    return ok, report, entries


def write_visible_cases(probe: Path, calls: list[tuple[str, bool]]) -> None:
    """A student's self-check: hand the kernel the visible cases of each
    ``(check name, hidden)`` its test cells call, as the grader hands in its
    own (`course.protocol.cases_name`); hidden checks get none."""
    for name, hidden in calls:
        if hidden:
            continue
        try:
            cases = _chapter(name.partition(".")[0])["checks"][name]["cases"]
        except (KeyError, NoVisibleAnswers):
            continue
        (probe / cases_name(name, False)).write_text(json.dumps([{k: v for k, v in c.items() if k != "aid"}
                                                                 for c in cases]))


def judge_record(name: str, hidden: bool, text: str | None) -> Verdict:
    """A student's self-check: the verdict for check `name` from the JSON its
    kernel recorded on the visible cases (`write_visible_cases`), as the grader's
    (`course.checks.framework.judge_record`): ``(passed, report)`` with its ``record``."""
    if hidden:
        return unjudged(name, hidden, f"✗ {name}: hidden checks run only when your notebook is graded.",
                        UNAVAILABLE)
    try:
        standard, cases, answers, wrongs = visible(name)
    except CheckUnavailable as err:
        return unjudged(name, hidden, f"✗ {name}: {err}", UNAVAILABLE)
    return judge_text(name, False, text, cases,
                      lambda entries: evaluate(standard, cases, entries, answers.__getitem__, wrongs.__getitem__),
                      standard.guard)


# ------------------------------------------------------- in a test cell ---

def _check_lines(filename: str, module_globals: dict) -> list[int]:
    """Line numbers of the ``check(...)`` calls (`course.cells.check_calls`) in a cell's (or file's) source."""
    try:
        return [call.line for call in check_calls("".join(linecache.getlines(filename, module_globals)))]
    except (SyntaxError, ValueError):
        return []


_failed_in_cell: dict[str, list[str]] = {}


def _show(name: str, ok: bool, report: str, caller: Any) -> None:
    """Show a check's report; raise once the cell's last check ran.

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
    """A student's own run (Jupyter, the book): judge check `name` on `obj`,
    show the verdict, and raise once the test cell's last check ran if any
    failed. Hidden checks (only in an instructor's solution notebook) are
    judged against the oracle, which only an instructor's copy holds."""
    __tracebackhide__ = True
    if hidden:
        from course.checks.framework import judge_here  # the oracles: only an instructor's copy has them
        ok, report = judge_here(name, obj, hidden=True)
    else:
        ok, report, _ = judge_visible(name, obj)
    _show(name, ok, report, caller)
