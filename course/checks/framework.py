"""The check harness behind every test cell.

A test cell in a chapter notebook calls ``check("name", student_object)``.
What that does depends on where the notebook runs:

* **student mode** (the default, also `python -m autograder check`): the
  check runs its cases here, compares each result with a trusted oracle
  (a PyTorch built-in, a hand-computed value or the course's reference), and
  prints one line per check, or raises ``AssertionError`` naming the likely
  mistake ("did you divide by sqrt(d_k)?").
* **probe mode** (set by the autograder through ``COURSE_PROBE_DIR``): the
  check only *records* what the student's code returned, as plain data
  (see `plain`). The trusted grader process then recomputes the cases and the
  expected answers and decides, in `autograder.judge`. Nothing the student's
  process does (patched ``np.allclose``, objects whose ``__eq__`` is always
  true, silenced tracebacks) can change that verdict.
* **book mode** (``COURSE_BOOK_BUILD=1``, set when the book is built): like
  student mode, but a failure is printed instead of raised, so the rendered
  pages show what the tests check without tracebacks under unsolved stubs.

A `Check` is declarative: how to make cases (visible ones from a fixed seed,
hidden ones from the grader's secret seed), how to call the student's object
on a case, the oracle, and a list of known `Mistake`s whose outputs are
matched to name the error.
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from .plain import Raised, decode, encode, raised, to_plain

PROBE_DIR_ENV = "COURSE_PROBE_DIR"
PROBE_SEED_FILE = "seed"
BOOK_ENV = "COURSE_BOOK_BUILD"
VISIBLE_SEED = 20170612  # arXiv:1706.03762 went up on 12 June 2017


@dataclass
class Case:
    """One input to a student's function, with a human label for feedback.

    `label` appears in messages ("batch of 2, with a causal mask"): describe
    the input, never the expected answer.
    """

    label: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Raises:
    """Expected outcome: the call must raise one of these exception types."""

    names: tuple[str, ...]
    why: str  # what the student should report, e.g. "d_model must be even"


@dataclass(frozen=True)
class Mistake:
    """A known wrong implementation: if the student's output matches
    `output(case)`, `hint` is the feedback."""

    hint: str
    output: Callable[[Case], Any]


def default_call(obj: Any, case: Case) -> Any:
    return obj(*case.args, **case.kwargs)


@dataclass
class Check:
    """A named group of cases checking one property of one exercise."""

    name: str
    cases: Callable[[np.random.Generator, bool], list[Case]]
    expected: Callable[[Case], Any]
    call: Callable[[Any, Case], Any] = default_call
    mistakes: Sequence[Mistake] = ()
    hint: str = ""
    rtol: float = 1e-4
    atol: float = 1e-5
    exact_dtype: bool = False

    def make_cases(self, hidden: bool, seed: int | None = None) -> list[Case]:
        rng = np.random.default_rng(_case_seed(self.name, hidden, seed))
        # cases may draw torch tensors too: seed both
        torch.manual_seed(_case_seed(self.name, hidden, seed) % 2**63)
        return self.cases(rng, hidden)


def randn(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    """A float32 tensor of standard normal values drawn from `rng`."""
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


REGISTRY: dict[str, Check] = {}


def register(*checks: Check) -> None:
    for c in checks:
        if c.name in REGISTRY:
            raise ValueError(f"check {c.name!r} registered twice")
        REGISTRY[c.name] = c


def get_check(name: str) -> Check:
    if name not in REGISTRY:
        raise KeyError(f"no check named {name!r}: is the course package up to date?")
    return REGISTRY[name]


def _case_seed(name: str, hidden: bool, seed: int | None) -> int:
    base = VISIBLE_SEED if not hidden else (seed if seed is not None else VISIBLE_SEED + 1)
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
    return f"a {type(x).__name__}"


def mismatch(got: Any, want: Any, rtol: float, atol: float,
             exact_dtype: bool = False, where: str = "") -> str | None:
    """Describe how `got` differs from `want`, or None when they agree.

    `want` comes from a trusted oracle; `got` is decoded plain data (or, in
    student mode, converted to it), so the comparison runs no student code.
    """
    at = f" in {where}" if where else ""
    if isinstance(want, Raises):
        if isinstance(got, Raised) and set(got.names) & set(want.names):
            return None
        return (f"expected {' or '.join(want.names)} to be raised ({want.why}), "
                f"but got {_kind(got)}{at}")
    if isinstance(got, Raised):
        if "NotImplementedError" in got.names:
            return "not implemented yet (the stub still raises NotImplementedError)"
        return f"raised {got}{at}"
    if isinstance(want, np.ndarray):
        if not isinstance(got, np.ndarray):
            return f"expected an array/tensor of shape {tuple(want.shape)}, got {_kind(got)}{at}"
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
    if isinstance(want, bool) or want is None or isinstance(want, str):
        if type(got) is not type(want) or got != want:
            return f"expected {want!r}, got {_short(got)}{at}"
        return None
    if isinstance(want, (int, float)):
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return f"expected the number {want!r}, got {_kind(got)}{at}"
        if isinstance(want, int) and isinstance(got, int):
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
    text = repr(x) if not isinstance(x, np.ndarray) else _kind(x)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class CaseResult:
    label: str
    problem: str | None  # None: the case passed

    @property
    def passed(self) -> bool:
        return self.problem is None


def evaluate(check_: Check, cases: list[Case], outputs: list[Any]) -> list[CaseResult]:
    """Compare recorded outputs with the oracle, naming known mistakes."""
    results = []
    for case, got in zip(cases, outputs):
        want = check_.expected(case)
        want = want if isinstance(want, Raises) else to_plain(want)
        problem = mismatch(got, want, check_.rtol, check_.atol, check_.exact_dtype)
        if problem and not _not_implemented(got):
            hint = _matching_mistake(check_, case, got) or check_.hint
            if hint:
                problem = f"{problem}. {hint}"
        results.append(CaseResult(case.label, problem))
    return results


def _not_implemented(got: Any) -> bool:
    return isinstance(got, Raised) and "NotImplementedError" in got.names


def _matching_mistake(check_: Check, case: Case, got: Any) -> str | None:
    for m in check_.mistakes:
        try:
            wrong = to_plain(m.output(copy.deepcopy(case)))
        except Exception as exc:  # the mistake crashes on this case: so may the student's code
            if isinstance(got, Raised) and got.names[0] == type(exc).__name__:
                return m.hint
            continue
        if not isinstance(got, Raised) and mismatch(got, wrong, check_.rtol, check_.atol) is None:
            return m.hint
    return None


# --------------------------------------------------------- running cases ---

def run_student(check_: Check, obj: Any, cases: list[Case]) -> list[Any]:
    """Call the student's object on each case; exceptions become `Raised`."""
    outputs = []
    for case in cases:
        try:
            out = check_.call(obj, copy.deepcopy(case))
            outputs.append(to_plain(out))  # exactly what the judge would see
        except Exception as exc:  # the student's bug is the feedback, not a crash
            outputs.append(raised(exc))
    return outputs


def _summary(name: str, hidden: bool, results: list[CaseResult]) -> tuple[bool, str]:
    kind = "hidden" if hidden else "visible"
    failed = [r for r in results if not r.passed]
    if not failed:
        return True, f"✓ {name}: {len(results)} {kind} case{'s' * (len(results) != 1)} pass"
    lines = [f"✗ {name}: {len(failed)} of {len(results)} {kind} cases failed"]
    for r in failed[:3]:
        lines.append(f"  - case '{r.label}': {r.problem}")
    if len(failed) > 3:
        lines.append(f"  - ... and {len(failed) - 3} more")
    return False, "\n".join(lines)


def judge_record(name: str, hidden: bool, seed: int | None, text: str | None) -> tuple[bool, str]:
    """Trusted side: verdict for one check from the JSON a kernel recorded."""
    check_ = get_check(name)
    kind = "hidden" if hidden else "visible"
    if text is None:
        return False, (f"✗ {name}: no {kind} results were recorded. The test cell did not reach "
                       "this check: an earlier line raised, or the kernel died or timed out.")
    try:
        outputs = decode(text)
    except ValueError as err:
        return False, f"✗ {name}: the recorded {kind} results are unreadable ({err})."
    cases = check_.make_cases(hidden, seed)
    if not isinstance(outputs, list) or len(outputs) != len(cases):
        return False, f"✗ {name}: the recorded {kind} results do not match the test's cases."
    return _summary(name, hidden, evaluate(check_, cases, outputs))


# --------------------------------------------------------------- entry ---

def record_path(probe_dir: Path, name: str, hidden: bool) -> Path:
    return probe_dir / f"{name}.{'hidden' if hidden else 'visible'}.json"


def check(name: str, obj: Any, *, hidden: bool = False) -> None:
    """Run (or, under the autograder, record) the check called `name` on `obj`."""
    check_ = get_check(name)
    probe_dir = os.environ.get(PROBE_DIR_ENV)
    if probe_dir:
        probe = Path(probe_dir)
        seed = None
        if hidden:
            seed = int((probe / PROBE_SEED_FILE).read_text().strip())
        cases = check_.make_cases(hidden, seed)
        outputs = run_student(check_, obj, cases)
        record_path(probe, name, hidden).write_text(encode(outputs))
        print(f"recorded {len(outputs)} results of '{name}' for grading")
        return
    cases = check_.make_cases(hidden)
    ok, report = _summary(name, hidden, evaluate(check_, cases, run_student(check_, obj, cases)))
    if ok:
        print(report)
    elif os.environ.get(BOOK_ENV):
        print(report.splitlines()[0] + " (expected until the exercise is solved)")
    else:
        __tracebackhide__ = True  # IPython and pytest hide this frame: the message is the feedback
        raise AssertionError("\n" + report)
