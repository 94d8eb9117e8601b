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
   removed once read.

Whatever the kernel printed, raised or patched in a test cell is discarded.
Records are read without following links, and an output of any other cell
that echoes hidden-test code (the kernel ran it, so it can print it) is
replaced, so that feedback never shows hidden tests.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import shutil
import stat
from pathlib import Path

from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from course.checks import framework
from course.protocol import HIDDEN_BEGIN, HIDDEN_END, PROBE_DIRNAME, cell_score, record_name

MAX_RECORD_BYTES = 64 * 1024 * 1024
ECHO_REMOVED = NotebookNode(output_type="stream", name="stdout",
                            text="[output removed by the grader: it showed hidden test code]\n")


def checks_in_source(source: str) -> list[tuple[str, bool]]:
    """The ``check("name", obj, hidden=...)`` calls in a test cell's source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        fname = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if fname != "check" or not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        hidden = any(k.arg == "hidden" and isinstance(k.value, ast.Constant) and k.value.value is True
                     for k in node.keywords)
        found.append((str(node.args[0].value), hidden))
    return found


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


def hidden_lines(source: str) -> set[str]:
    """A test cell's hidden-test lines, markers included (stripped)."""
    lines, inside = set(), False
    for line in source.splitlines():
        if HIDDEN_BEGIN in line:
            inside = True
        if inside and line.strip():
            lines.add(line.strip())
        if HIDDEN_END in line:
            inside = False
    return lines


def _shows_any(output: NotebookNode, lines: set[str]) -> bool:
    """Whether an output's text holds one of `lines` (compared as JSON text)."""
    text = json.dumps(output, ensure_ascii=False)
    return any(json.dumps(line, ensure_ascii=False)[1:-1] in text for line in lines)


def _secret(path: str) -> bytes:
    return Path(path).read_bytes()


def _remove(probe: Path) -> None:
    if probe.is_symlink() or probe.is_file():
        probe.unlink()
    elif probe.exists():
        shutil.rmtree(probe)


class PrepareProbes(NbGraderPreprocessor):
    """Give the kernel a folder to record results in, holding the cases of
    every check the test cells call (their instructor source, restored by
    OverwriteCells)."""

    secret_file = Unicode("", help="File holding the grading secret").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        probe = Path(resources["metadata"]["path"]) / PROBE_DIRNAME
        _remove(probe)
        probe.mkdir()
        info = resources["nbgrader"]
        seed = framework.seed_for(_secret(self.secret_file), info["student"], info["assignment"])
        framework.write_cases(probe, graded_calls(nb), seed)
        return nb, resources


class JudgeChecks(NbGraderPreprocessor):
    """Replace every grade cell's outputs with the trusted judge's verdict.

    The kernel ran the hidden tests, so it could echo their code in a later
    cell's output (``print(In[-1])``): outputs that show a hidden-test line
    are removed too, so that feedback never shows them.
    """

    secret_file = Unicode("", help="File holding the grading secret").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        probe = Path(resources["metadata"]["path"]) / PROBE_DIRNAME
        info = resources["nbgrader"]
        seed = framework.seed_for(_secret(self.secret_file), info["student"], info["assignment"])
        secret_lines: set[str] = set()
        for cell in nb.cells:
            if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
                cell.outputs = cell_verdict(cell.source, float(cell.metadata.nbgrader["points"]), probe, seed,
                                            self.log)
                secret_lines |= hidden_lines(cell.source)
        for cell in nb.cells:
            if cell.cell_type == "code" and not utils.is_grade(cell):
                cell.outputs = [ECHO_REMOVED if _shows_any(out, secret_lines) else out for out in cell.outputs]
        _remove(probe)  # read: the graded notebook's folder keeps only what nbgrader writes
        return nb, resources


def cell_verdict(source: str, points: float, probe: Path, seed: int | None,
                 log: logging.Logger | None = None) -> list[NotebookNode]:
    """The outputs a test cell gets: the verdict on every check it calls.

    `source` is the cell's instructor source, `points` what it is worth,
    `probe` the folder the kernel recorded results in, and `seed` the hidden
    cases' seed (None: the fixed stand-in a student's own run uses). The
    outputs are a plain text report, then, when some checks failed, the
    partial score (`cell_score`) as the cell's result, or an error when
    none passed: what nbgrader's own scoring reads.
    """
    try:
        calls = checks_in_source(source)
    except SyntaxError:
        calls = []
    log = log or logging.getLogger(__name__)
    verdicts = [_judge(name, hidden, seed, probe, log) for name, hidden in calls]
    if not verdicts:
        verdicts = [(False, "✗ this test cell calls no check(...): it cannot be graded.")]
    passed = sum(ok for ok, _ in verdicts)
    report = "\n".join(text for _, text in verdicts) + "\n"
    outputs = [NotebookNode(output_type="stream", name="stdout", text=report)]
    if passed == len(verdicts):
        return outputs
    score = cell_score(points, passed, len(verdicts))
    if score:
        outputs.append(NotebookNode(output_type="execute_result", execution_count=None, metadata={},
                                    data={"text/plain": repr(score)}))
    else:
        outputs.append(NotebookNode(output_type="error", ename="CheckFailed",
                                    evalue="no check in this cell passed", traceback=[]))
    return outputs


def _judge(name: str, hidden: bool, seed: int | None, probe: Path, log: logging.Logger) -> tuple[bool, str]:
    record = _read_record(probe, record_name(name, hidden))
    try:
        return framework.judge_record(name, hidden, seed if hidden else None, record)
    except Exception:  # a bug in the course's own check must not stop the batch
        log.exception("check %s failed inside the judge", name)
        return False, f"✗ {name}: the grader could not evaluate this check (tell your instructor)."
