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

import copy
import hashlib
import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from course.probing import pieces, practice, runner, verdicts
from course.probing.cases import Case, carried, encode_cases
from course.probing.runner import CheckUnavailable
from course.probing.plain import raised, to_plain
from course.probing.verdicts import NOT_APPLICABLE, Raises, mismatch
from course.protocol import cases_name, cell_score

VISIBLE_SEED = 20170612  # arXiv:1706.03762 went up on 12 June 2017
DEFAULT_HIDDEN_SEED = VISIBLE_SEED + 1  # hidden cases outside the grader (an instructor's own run)


# ------------------------------------------------------------ declaring ---

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
    exact_dtype: results must have the oracle's dtypes.
    guard: the check tests an error path or a property that an answer doing
    no work can meet (ValueError for a bad argument, a parameter table,
    lengths kept): it earns its share of the cell only when the cell's other
    checks pass (`course.protocol.counted`). A check whose every case
    expects an exception must be one (tests/test_checks.py).
    """

    name: str
    cases: Callable[[np.random.Generator, bool], list[Case]]
    expected: Callable[[Case], Any]
    mistakes: Sequence[Mistake] = ()
    hint: str = ""
    rtol: float = 1e-4
    atol: float = 1e-5
    exact_dtype: bool = True
    guard: bool = False
    topic: str = ""  # set by `register`

    @property
    def qualified_name(self) -> str:
        return f"{self.topic}.{self.name}"

    @property
    def probe(self) -> runner.Probe:
        return runner.probe_of(self.qualified_name)

    def make_cases(self, hidden: bool, seed: int | None = None) -> list[Case]:
        """The cases of `seed`, the same bits whatever the process: on one thread, since a case may hold
        what a model computed (a cache), and a float32 matrix product's last bits depend on how many
        threads share it (the released visible cases and the grader's must agree)."""
        s = case_seed(self.name, hidden, seed)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            torch.manual_seed(s)  # cases may draw torch tensors too
            return self.cases(np.random.default_rng(s), hidden)
        finally:
            torch.set_num_threads(threads)


# ------------------------------------------------------------- registry ---

_CHECKS: dict[str, dict[str, Check]] = {}


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
        runner.import_chapter(__package__, topic, "checks")
    return _CHECKS.get(topic, {})


def get_check(qualified: str) -> Check:
    """The check called ``"topic.name"``."""
    topic, _, name = qualified.partition(".")
    table = checks_of(topic) if name else {}
    if name not in table:
        raise CheckUnavailable(f"no check named {qualified!r}: is the course package up to date?")
    return table[name]


def case_seed(name: str, hidden: bool, seed: int | None) -> int:
    """The seed check `name`'s cases are drawn from. Without a `seed` (a
    student's own run) visible cases come from the fixed `VISIBLE_SEED`,
    so they are the same everywhere. The grader passes the submission's
    seed, and draws the visible cases afresh from it too (the same shapes,
    other numbers, independent of the hidden ones): answers written down
    for the fixed visible inputs earn nothing."""
    if seed is None:
        key = f"{DEFAULT_HIDDEN_SEED if hidden else VISIBLE_SEED}"
    else:
        key = f"{seed}\0{'hidden' if hidden else 'visible'}"
    return int.from_bytes(hashlib.sha256(f"{key}\0{name}".encode()).digest()[:4], "big")


def seed_for(secret: bytes, student: str, assignment: str, code: str = "") -> int:
    """The cases' seed for one submission: unpredictable without the
    instructor's secret; stable across re-runs of the same notebook (so
    re-grading changes nothing), and another for a notebook whose `code` (its
    code cells, `submission_code`) changed, so that expected values a
    student read in feedback cannot be written back into a resubmission."""
    digest = hashlib.sha256(secret + f"\0{student}\0{assignment}\0".encode()
                            + hashlib.sha256(code.encode()).digest()).digest()
    return int.from_bytes(digest[:4], "big")


def submission_code(cells: Sequence[Any]) -> str:
    """What `seed_for` reads of a notebook: its code cells' sources, in order."""
    return "\0".join(c.source for c in cells if c.cell_type == "code")


# ------------------------------------------------------------ verdicts ---

def standard(check_: Check) -> verdicts.Standard:
    """What `check_` asks of every case (its probe says whether inputs must be left unchanged)."""
    probe = check_.probe
    return verdicts.Standard(check_.rtol, check_.atol, check_.exact_dtype, check_.hint, probe.inputs_unchanged,
                             probe.observe, check_.guard, tuple(probe.builds_on))


def answer(check_: Check, case: Case) -> Any:
    """The oracle's answer on `case`, as plain data (or `Raises`)."""
    want = check_.expected(case)
    return want if isinstance(want, Raises) else to_plain(want)


def mistake_output(m: Mistake, case: Case) -> Any:
    """A mistake's output on a case as plain data, NOT_APPLICABLE, or the
    `Raised` it raises (so may the student's code, making the same mistake)."""
    try:
        out = m.output(copy.deepcopy(case))
    except Exception as exc:
        return raised(exc)
    return out if out is NOT_APPLICABLE else to_plain(out)


def evaluate(check_: Check, cases: list[Case], entries: list[Any], replay: bool = True) -> list[verdicts.CaseResult]:
    """Judge recorded entries (`runner.run_student`) against the oracle, naming
    the known mistake a failure matches, and (with `replay`) crediting a case
    the student's earlier pieces explain (`replayer`)."""
    return verdicts.evaluate(standard(check_), cases, entries, lambda i: answer(check_, cases[i]),
                             lambda i: [(m.hint, mistake_output(m, cases[i])) for m in check_.mistakes],
                             replayer(check_, cases) if replay else None)


def replayer(check_: Check, cases: list[Case]) -> Callable[[int, list], Any] | None:
    """For a check whose exercise builds on the chapter's earlier answers (its probe's `builds_on`):
    ``replay(i, trace, only=None)``, what the course's answer to the exercise returns on case i with each
    earlier piece (or each of `only`) returning what the student's did on the same inputs
    (`course.probing.pieces`), and the case's inputs as it leaves them; NOT_APPLICABLE where the
    student's exercise fed its pieces other inputs.
    None for other checks."""
    probe = check_.probe
    if not probe.builds_on or not probe.answer:
        return None
    module = importlib.import_module(f"course.reference.{check_.topic}")

    def replay(i: int, trace: list, only: tuple[str, ...] | None = None) -> Any:
        case = carried([cases[i]])[0]
        with pieces.replaying(module.__dict__, probe.builds_on, trace, only) as done:
            try:
                out = to_plain(probe.call(getattr(module, probe.answer), case))
            except Exception as exc:  # the student's earlier piece made the answer fail too, or the replay did
                out = raised(exc)
        return NOT_APPLICABLE if done.diverged else (out, runner.inputs_snapshot(case))
    return replay


def visible_data(topic: str) -> dict:
    """Instructor side: what a student's own run judges a chapter's visible
    checks against (`course.probing.practice`): per check, its standard, the
    visible cases, the oracle's answers and every known mistake's outputs on
    them. The release writes it to ``course/visible/<topic>.json``."""
    checks = {}
    for check_ in checks_of(topic).values():
        cases = check_.make_cases(False)
        checks[check_.qualified_name] = {
            "standard": {"rtol": check_.rtol, "atol": check_.atol, "exact_dtype": check_.exact_dtype,
                         "hint": check_.hint, "guard": check_.guard},
            "cases": json.loads(encode_cases(cases, aid=True)),
            "answers": [practice.encode_answer(answer(check_, c)) for c in cases],
            "mistakes": [{"hint": m.hint, "outputs": [practice.encode_wrong(mistake_output(m, c)) for c in cases]}
                         for m in check_.mistakes]}
    return {"checks": checks}


def summary(check_: Check, hidden: bool, results: list[verdicts.CaseResult]) -> tuple[bool, str]:
    """(passed, report) for one check (`verdicts.summary`)."""
    return verdicts.summary(check_.qualified_name, hidden, results)


def judge_record(name: str, hidden: bool, seed: int | None, text: str | None,
                 replay: bool = True) -> verdicts.Verdict:
    """Trusted side: the verdict for one check from the JSON a kernel recorded: ``(passed, report)``,
    with the same verdict as data in its ``record`` (`verdicts.record`); `replay`: as `evaluate`."""
    try:
        check_ = get_check(name)
    except CheckUnavailable as err:
        return verdicts.unjudged(name, hidden, f"✗ {name}: {err} (tell your instructor).", verdicts.UNAVAILABLE)
    cases = check_.make_cases(hidden, seed)
    return verdicts.judge_text(name, hidden, text, cases, lambda entries: evaluate(check_, cases, entries, replay),
                               check_.guard)


# --------------------------------------------------------- running cases ---

def write_cases(probe: Path, calls: Sequence[tuple[str, bool]], seed: int | None) -> None:
    """Trusted side: hand the kernel the cases of each ``(check name,
    hidden)`` a notebook's test cells call, as data in the probe folder,
    drawn from `seed` (`case_seed`). A name with no check gets no file."""
    for name, hidden in calls:
        try:
            check_ = get_check(name)
        except CheckUnavailable:
            continue
        text = encode_cases(check_.make_cases(hidden, seed))
        (probe / cases_name(name, hidden)).write_text(text)


def student_entries(check_: Check, obj: Any, cases: list[Case]) -> list[list]:
    """What the kernel would record for `obj` on `cases`: the cases make the
    same trip as under the grader, then the check's probe runs them."""
    return runner.run_student(check_.probe, obj, carried(cases))


# ------------------------------------------------------ an instructor's run ---

def judge_here(name: str, obj: Any, hidden: bool) -> tuple[bool, str]:
    """(passed, report) of check `name` on `obj`, run in this process against
    the oracle: what an instructor's own run of a solution notebook shows for
    its hidden checks (a student's copy has none; `course.probing.practice`
    judges the visible ones from the released answers)."""
    check_ = get_check(name)
    cases = check_.make_cases(hidden)
    return summary(check_, hidden, evaluate(check_, cases, student_entries(check_, obj, cases)))


__all__ = ["Case", "Check", "CheckUnavailable", "Mistake", "NOT_APPLICABLE", "Raises", "cell_score", "checks_of",
           "get_check", "judge_here", "judge_record", "mismatch", "register", "seed_for", "student_entries",
           "submission_code", "visible_data", "write_cases"]
