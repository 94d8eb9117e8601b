"""`python -m autograder check NOTEBOOK`: a student's self-check.

Runs the notebook top to bottom the way the grader does: nbgrader's own
Execute preprocessor, with the visible cases handed in as data and every
``check(...)`` in probe mode (recording what the student's code returned),
then a verdict for each test cell made as the judge makes it
(`autograder.judge.judge_cell`), against the visible answers the release
shipped (`course.probing.practice`: no oracle is needed, so it runs in a
student edition), scored with nbgrader's rule. So each exercise gets the
points the grader's visible tests give it, partial credit included (the
grader draws the visible cases' numbers afresh); only the hidden tests
(absent from a student's copy) are left for grading. An exercise that fails only where it runs
the student's earlier pieces, below one that fails, is WAIT, not FAIL: the grader replays it on
the earlier answers (`course.probing.pieces`), which a student's copy may not hold yet. Written
answers (nbgrader's manually graded answer cells) are listed, answered or not, and left out of the score:
the instructor grades them by hand.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader import utils
from nbgrader.preprocessors import Execute

from course.probing import practice, runner
from course.probing.verdicts import NOT_IMPLEMENTED
from course.protocol import PROBE_DIR_ENV

from .judge import graded_calls, judge_cell

#: what a WAIT line says
WAIT_NOTE = ("this exercise runs your earlier pieces, and an exercise above fails: fix that one first. "
             "The grader judges this one on what it adds: it runs the course's answer to this exercise on what "
             "your earlier pieces returned, so a mistake up there costs points only up there.")


def _run_recording(nb: nbformat.NotebookNode, folder: Path, probe: Path, timeout: int) -> None:
    """Execute `nb` in `folder` with checks recording into `probe`."""
    env = {"NBGRADER_EXECUTION": "validate", "NBGRADER_VALIDATING": "1", PROBE_DIR_ENV: str(probe)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        quiet = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]
        Execute(timeout=timeout, extra_arguments=quiet).preprocess(nb, {"metadata": {"path": str(folder)}})
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass(frozen=True)
class CellScore:
    """A test cell's self-check: its grade id, score and points, the verdicts' report, and whether
    every check it failed runs the student's earlier pieces (`runner.Probe.builds_on`)."""

    grade_id: str
    score: float
    points: float
    report: str
    fails_on_earlier_pieces: bool  # and is implemented


def _builds_on(check: str) -> bool:
    """Whether the check runs the student's earlier pieces (False for a name no probe has)."""
    try:
        return bool(runner.probe_of(check).builds_on)
    except runner.CheckUnavailable:
        return False


def score_cells(nb: nbformat.NotebookNode, probe: Path) -> list[CellScore]:
    """Each test cell's `CellScore`, judged from the results recorded in `probe` (the cells'
    outputs are replaced)."""
    scores = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not utils.is_grade(cell) or utils.is_solution(cell):
            continue
        points = float(cell.metadata.nbgrader["points"])
        cell.outputs, records = judge_cell(cell.source, points, probe, practice.judge_record)
        score, _ = utils.determine_grade(cell)
        failed = [r for r in records if not r["passed"]]  # an exercise not implemented yet is its own fault
        on_earlier = bool(failed) and all(_builds_on(r["check"]) and r["category"] != NOT_IMPLEMENTED for r in failed)
        scores.append(CellScore(cell.metadata.nbgrader["grade_id"], float(score or 0), points,
                                cell.outputs[0].text, on_earlier))
    return scores


def statuses(scores: list[CellScore]) -> list[str]:
    """PASS, FAIL or WAIT for each cell: WAIT where the cell fails only checks that run the student's
    earlier pieces and an exercise above it does not pass. The student's own run has no answers to
    replay it with; the grader judges such an exercise on what it adds (`course.probing.pieces`)."""
    shown, earlier_fails = [], False
    for cell in scores:
        if cell.score == cell.points:
            shown.append("PASS")
            continue
        shown.append("WAIT" if earlier_fails and cell.fails_on_earlier_pieces else "FAIL")
        earlier_fails = True
    return shown


def cells_that_raised(nb: nbformat.NotebookNode) -> list[str]:
    """A line for each executed cell outside the tests that raised: its first line and the error, for
    the student to see. Left out: an unfinished exercise's NotImplementedError, and a NameError after
    an earlier cell raised (what that cell did not define)."""
    lines, earlier = [], False
    for cell in nb.cells:
        if cell.cell_type != "code" or (utils.is_grade(cell) and not utils.is_solution(cell)):
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") != "error":
                continue
            if out.get("ename") != "NotImplementedError" and not (earlier and out.get("ename") == "NameError"):
                first = next((line for line in cell.source.splitlines() if line.strip()), "")
                lines.append(f"{first[:60]!r}: {out.get('ename')}: {str(out.get('evalue'))[:120]}")
            earlier = True
    return lines


def written_answers(nb: nbformat.NotebookNode) -> list[tuple[str, float, bool]]:
    """(grade id, points, answered) of each written answer: a cell nbgrader grades by hand. It is
    unanswered while it holds the released text (nbgrader's checksum, as the grader decides)."""
    return [(cell.metadata.nbgrader["grade_id"], float(cell.metadata.nbgrader["points"]),
             utils.compute_checksum(cell) != cell.metadata.nbgrader.get("checksum"))
            for cell in nb.cells if utils.is_grade(cell) and utils.is_solution(cell)]


def self_check(notebook: Path, timeout: int = 120) -> tuple[float, float]:
    """Execute `notebook`, print each exercise's verdict; return the autograded (score, max)."""
    nb = nbformat.read(notebook, as_version=4)
    with tempfile.TemporaryDirectory(prefix="course-self-check-") as tmp:
        probe = Path(tmp)
        practice.write_visible_cases(probe, graded_calls(nb))
        _run_recording(nb, notebook.parent.resolve(), probe, timeout)
        scores = score_cells(nb, probe)
    print(f"Self-check of {notebook.name} (visible tests only; hidden tests run when it is graded)\n")
    shown = statuses(scores)
    for cell, status in zip(scores, shown):
        print(f"  {status}  {cell.grade_id:<32} {cell.score:g}/{cell.points:g}")
        if status == "WAIT":
            print(f"        {WAIT_NOTE}")
        if status != "PASS":
            print("\n".join("        " + line for line in cell.report.rstrip().splitlines()))
    written = written_answers(nb)
    for gid, points, answered in written:
        status, note = ("HAND", "answered: your instructor grades it by hand") if answered else \
            ("TODO", "a written answer, not answered yet")
        print(f"  {status}  {gid:<32} ?/{points:g}  {note}")
    got, total = sum(c.score for c in scores), sum(c.points for c in scores)
    waiting = sum(c.points - c.score for c, status in zip(scores, shown) if status == "WAIT")
    by_hand = sum(points for _, points, _ in written)
    raised = cells_that_raised(nb)
    if raised:
        print("\n  Cells outside the tests that raised (not graded, but the cells after them may fail too):")
        print("\n".join(f"    {line}" for line in raised))
    print(f"\nScore so far: {got:g} / {total:g} points"
          + (f"; {waiting:g} of the points missing wait on an exercise above (WAIT)" if waiting else "")
          + (f"; written answers ({by_hand:g} more) are graded by hand" if written else ""))
    return got, total
