"""nbgrader preprocessors that take verdicts out of the student's hands.

`nbgrader autograde` runs the notebook, then awards a grade cell its points
when the cell's outputs hold no error. Those outputs come from the student's
process, which can forge them. The course's pipeline changes that:

1. `PrepareProbes` (before `Execute`) makes a folder for recorded results
   next to the notebook and writes into it the cases of every check the
   test cells call: inputs only, the hidden ones drawn from the grading
   secret here. No seed and no oracle reaches the kernel.
2. The notebook runs (in the sandbox); each ``check(...)`` in a test cell
   runs the student's object on its cases and records the raw results, as
   plain JSON, in that folder.
3. `JudgeChecks` (right after `Execute`, in the trusted grader process) reads
   which checks each grade cell calls from the cell's *instructor* source
   (restored by nbgrader's OverwriteCells), recomputes the cases and the
   expected answers, and **replaces** the cell's outputs with its own verdict:
   a plain text report, plus the partial score when some checks failed, or an
   error when all did (`cell_verdict`, which the self-check reuses).
   `SaveAutoGrades` then scores those outputs as usual. The probe folder is
   removed once read. The same verdicts, as data (`course.probing.verdicts.record`),
   go to a file of the grader's own (`verdicts_path`), which the instructor's
   report reads (`autograder.report`).

Whatever the kernel printed, raised or patched in a test cell is discarded.
Records are read without following links, and an output of any other cell
that echoes hidden-test code (the kernel ran it, so it can print it) is
replaced, so that feedback never shows hidden tests.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import stat
from pathlib import Path
from typing import Callable, Optional

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Unicode

from course.cells import checks_in_source, hidden_lines, is_test_cell, uses_of
from course.probing import runner, verdicts
from course.probing.verdicts import Verdict
from course.protocol import ALLOW_FORBIDDEN_FILE, PROBE_DIRNAME, cell_score, counted, record_name, verdicts_name

from .cleanup import remove_tree

MAX_RECORD_BYTES = 64 * 1024 * 1024
#: after a guard that passed but does not count yet (`course.protocol.counted`)
GUARD_WAITS = " (not counted yet: errors and properties count once this exercise's other checks pass)"
ECHO_REMOVED = NotebookNode(output_type="stream", name="stdout",
                            text="[output removed by the grader: it showed hidden test code]\n")


def graded_calls(nb: NotebookNode) -> list[tuple[str, bool]]:
    """The ``(check name, hidden)`` pairs the notebook's test cells call (from their source)."""
    calls = []
    for cell in nb.cells:
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            try:
                calls += [c for c in checks_in_source(cell.source) if c not in calls]
            except SyntaxError:
                continue
    return calls


def _read_record(probe: Path, filename: str) -> str | None:
    """Read a recorded result without following links or blocking on FIFOs."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        folder = os.open(probe, flags | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        fd = os.open(filename, flags, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_RECORD_BYTES:
            return None
        return f.read(MAX_RECORD_BYTES + 1).decode("utf-8", errors="replace")


def _shows_any(output: NotebookNode, lines: set[str]) -> bool:
    """Whether an output's text holds one of `lines` (compared as JSON text)."""
    text = json.dumps(output, ensure_ascii=False)
    return any(json.dumps(line, ensure_ascii=False)[1:-1] in text for line in lines)


def _remove(probe: Path) -> None:
    remove_tree(probe)  # what the kernel left there, whatever its depth (`autograder.cleanup`)


def _trusted_judge(name: str, hidden: bool, text: str | None, *, seed: int) -> tuple[bool, str]:
    from course.checks import framework  # the oracles: the instructor's side only (a student edition has none)
    return framework.judge_record(name, hidden, seed, text)


def _seed(secret_file: str, info: dict, nb: NotebookNode) -> int:
    from course.checks import framework
    return framework.seed_for(Path(secret_file).read_bytes(), info["student"], info["assignment"],
                              framework.submission_code(nb.cells))


class PrepareProbes(NbGraderPreprocessor):
    """Give the kernel a folder to record results in, holding the cases of
    every check the test cells call (their instructor source, restored by
    OverwriteCells), and, when the instructor lets forbidden functions run
    (``forbidden_calls: flag`` in schedule.yml), a file that says so."""

    secret_file = Unicode("", help="File holding the grading secret").tag(config=True)
    allow_forbidden = Bool(False, help="let functions an exercise forbids run in its checks (only noted)").tag(
        config=True)

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        probe = Path(resources["metadata"]["path"]) / PROBE_DIRNAME
        _remove(probe)
        probe.mkdir()
        from course.checks import framework
        framework.write_cases(probe, graded_calls(nb), _seed(self.secret_file, resources["nbgrader"], nb))
        if self.allow_forbidden:
            (probe / ALLOW_FORBIDDEN_FILE).write_text("")
        return nb, resources


#: the version of the verdicts file's layout (`JudgeChecks`)
VERDICTS_FORMAT = 1


def verdicts_path(verdicts_dir: str | Path, student: str, assignment: str) -> Path:
    """Where `JudgeChecks` writes its verdicts on one notebook as data."""
    return Path(verdicts_dir) / verdicts_name(student, assignment)


def report_digest(outputs: list) -> str:
    """The digest of a test cell's verdict report (its stream outputs' text), which ties a verdicts
    file's cell to the graded notebook's: a file left from another grading of it does not match."""
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    return hashlib.sha256(text.encode()).hexdigest()


class JudgeChecks(NbGraderPreprocessor):
    """Replace every grade cell's outputs with the trusted judge's verdict.

    The kernel ran the hidden tests, so it could echo their code in a later
    cell's output (``print(In[-1])``): outputs that show a hidden-test line
    are removed too, so that feedback never shows them.

    With `verdicts_dir` set (the course folder's status folder: see
    `autograder.nbconfig`), the same verdicts are written there as data, one
    JSON file per notebook (`verdicts_path`), never into the student's folder::

        {"format": 1, "student": ..., "assignment": ..., "notebook": ...,
         "cells": {grade id: {"digest": `report_digest` of the cell's outputs,
                              "checks": [`course.probing.verdicts.record` of each check it calls]}}}

    (``checks`` is empty for a cell that calls no check.)
    """

    secret_file = Unicode("", help="File holding the grading secret").tag(config=True)
    verdicts_dir = Unicode("", help="Where to write each notebook's verdicts as data (the grader's "
                                    "own folder, never the student's); empty: nowhere").tag(config=True)
    release_dir = Unicode("", help="nbgrader's release folder: a cell as released is the instructor's, "
                                   "not searched for forbidden functions").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        probe = Path(resources["metadata"]["path"]) / PROBE_DIRNAME
        seed = _seed(self.secret_file, resources["nbgrader"], nb)
        secret_lines: set[str] = set()
        cells = {}
        released = self._released(resources["nbgrader"])
        code = [c.source for c in nb.cells
                if c.cell_type == "code" and not is_test_cell(c) and c.source not in released]
        for cell in nb.cells:
            if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
                cell.outputs, records = judge_cell(cell.source, float(cell.metadata.nbgrader["points"]), probe,
                                                   functools.partial(_trusted_judge, seed=seed), self.log)
                cell.outputs[0].text += forbidden_note(cell.source, code, records)
                flagged = sorted({n for r in records for n in r.get("reached", [])} | set(forbidden_uses(cell.source,
                                                                                                           code)))
                cells[cell.metadata.nbgrader["grade_id"]] = {"digest": report_digest(cell.outputs),
                                                             "checks": records, "flagged": flagged}
                secret_lines |= hidden_lines(cell.source)
        for cell in nb.cells:
            if cell.cell_type == "code" and not utils.is_grade(cell):
                cell.outputs = [ECHO_REMOVED if _shows_any(out, secret_lines) else out for out in cell.outputs]
        _remove(probe)  # read: the graded notebook's folder keeps only what nbgrader writes
        if self.verdicts_dir:
            self._write_verdicts(resources["nbgrader"], cells)
        return nb, resources

    def _released(self, info: dict) -> set[str]:
        """The sources of the released notebook's code cells (none without a release folder)."""
        path = Path(self.release_dir) / info["assignment"] / f"{info['notebook']}.ipynb"
        try:
            return {c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"}
        except (OSError, ValueError):
            return set()

    def _write_verdicts(self, info: dict, cells: dict) -> None:
        path = verdicts_path(self.verdicts_dir, info["student"], info["assignment"])
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": VERDICTS_FORMAT, "student": info["student"], "assignment": info["assignment"],
                "notebook": info["notebook"], "cells": cells}
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(data, ensure_ascii=False, indent=1))
        os.replace(partial, path)  # a run stopped halfway leaves the old file or the new one, whole


def forbidden_note(source: str, cells: list[str], records: list[dict]) -> str:
    """What a test cell's feedback adds about the functions its exercise forbids: those the student's
    code called while the checks ran and that ran (the instructor's ``forbidden_calls: flag``; refused,
    they failed their case, which says so), and those the notebook names (`forbidden_uses`)."""
    ran = sorted({n for r in records if r.get("passed") for n in r.get("reached", [])})
    named = [f for f in forbidden_uses(source, cells) if f not in ran]
    note = ""
    if ran:
        note += (f"⚠ For your instructor: while the checks ran, your code called {', '.join(ran)}, which this "
                 "exercise asks you not to use; your instructor's setting let it run and took no points. A person "
                 "will read it.\n")
    if named:
        note += (f"⚠ For your instructor: your notebook names {', '.join(named)}, which this exercise asks you "
                 "not to use. A person will read them; the grader takes no points for it.\n")
    return note


def forbidden_uses(source: str, cells: list[str]) -> list[str]:
    """The library functions that the checks a test cell calls forbid (their probes' `forbid`) and
    that the student's code names (`course.cells.uses_of`; `cells`: the sources of the notebook's
    code cells but its test cells and the cells as released, which are the instructor's). The
    sandbox makes them raise while a check runs, but a notebook can call one elsewhere (or under
    another name) and hand the check its result: the grader flags it, and a person decides."""
    forbid: list[str] = []
    try:
        names = checks_in_source(source)
    except SyntaxError:
        return []
    for name, _ in names:
        try:
            forbid += [f for f in runner.probe_of(name).forbid if f not in forbid]
        except runner.CheckUnavailable:
            continue
    found: list[str] = []
    for cell in cells:
        found += [f for f in uses_of(cell, forbid) if f not in found]
    return found


#: ``judge(name, hidden, recorded text or None) -> (passed, report)``: one check's verdict; a
#: `course.probing.verdicts.Verdict` (what the course's judges return) carries it as data too
Judge = Callable[[str, bool, Optional[str]], tuple[bool, str]]


def cell_verdict(source: str, points: float, probe: Path, judge: Judge,
                 log: logging.Logger | None = None) -> list[NotebookNode]:
    """The outputs a test cell gets (`judge_cell`, without the records)."""
    return judge_cell(source, points, probe, judge, log)[0]


def judge_cell(source: str, points: float, probe: Path, judge: Judge,
               log: logging.Logger | None = None) -> tuple[list[NotebookNode], list[dict]]:
    """The outputs a test cell gets: the verdict on every check it calls;
    and the same verdicts as data, one `course.probing.verdicts.record` per check.

    `source` is the cell's instructor source, `points` what it is worth,
    `probe` the folder the kernel recorded results in, and `judge` decides
    each check from its record (the grader's: `framework.judge_record` on
    the cases drawn from the secret; a self-check's: the visible answers,
    `course.probing.practice.judge_record`); a guard counts only when the
    cell's other checks pass (`course.protocol.counted`). The outputs are a plain text
    report, then, when some checks failed, the partial score (`cell_score`)
    as the cell's result, or an error when none passed: what nbgrader's own
    scoring reads.
    """
    try:
        calls = checks_in_source(source)
    except SyntaxError:
        calls = []
    log = log or logging.getLogger(__name__)
    judged = [_judge(name, hidden, judge, probe, log) for name, hidden in calls]
    records = [v.record for v in judged]
    if not judged:
        judged = [Verdict(False, "✗ this test cell calls no check(...): it cannot be graded.", {})]
    counts = counted([(v.passed, bool(v.record.get("guard"))) for v in judged])
    passed = sum(counts)
    report = "\n".join(v.text + (GUARD_WAITS if v.passed and not c else "") for v, c in zip(judged, counts)) + "\n"
    outputs = [NotebookNode(output_type="stream", name="stdout", text=report)]
    if passed == len(judged):
        return outputs, records
    score = cell_score(points, passed, len(judged))
    if score:
        outputs.append(NotebookNode(output_type="execute_result", execution_count=None, metadata={},
                                    data={"text/plain": repr(score)}))
    else:
        outputs.append(NotebookNode(output_type="error", ename="CheckFailed",
                                    evalue="no check in this cell earned points", traceback=[]))
    return outputs, records


def _judge(name: str, hidden: bool, judge: Judge, probe: Path, log: logging.Logger) -> Verdict:
    text = _read_record(probe, record_name(name, hidden))
    try:
        got = judge(name, hidden, text)
    except Exception:  # a bug in the course's own check must not stop the batch
        log.exception("check %s failed inside the judge", name)
        return verdicts.unjudged(name, hidden, f"✗ {name}: the grader could not evaluate this check "
                                 "(tell your instructor).", verdicts.JUDGE_ERROR)
    if isinstance(got, Verdict):
        return got
    passed, report = got  # a plain pair: its record says no more than whether it passed
    return Verdict(bool(passed), report, {**verdicts.record(name, hidden), "passed": bool(passed)})
