"""`python -m autograder check NOTEBOOK`: a student's self-check.

Runs the notebook top to bottom the way the grader does: nbgrader's own
Execute preprocessor, with the visible cases handed in as data and every
``check(...)`` in probe mode (recording what the student's code returned),
then a verdict for each test cell made as the judge makes it
(`autograder.judge.cell_verdict`), against the visible answers the release
shipped (`course.probing.practice`: no oracle is needed, so it runs in a
student edition), scored with nbgrader's rule. So each exercise gets the
points the grader's visible tests give it, partial credit included (the
grader draws the visible cases' numbers afresh); only the hidden tests
(absent from a student's copy) are left for grading. Written answers (nbgrader's manually
graded answer cells) are listed, answered or not, and left out of the score:
the instructor grades them by hand.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import nbformat
from nbgrader import utils
from nbgrader.preprocessors import Execute

from course.probing import practice
from course.protocol import PROBE_DIR_ENV

from .judge import cell_verdict, graded_calls


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


def score_cells(nb: nbformat.NotebookNode, probe: Path) -> list[tuple[str, float, float, str]]:
    """(grade id, score, points, verdict report) of each test cell, judged
    from the results recorded in `probe` (the cells' outputs are replaced)."""
    scores = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not utils.is_grade(cell) or utils.is_solution(cell):
            continue
        points = float(cell.metadata.nbgrader["points"])
        cell.outputs = cell_verdict(cell.source, points, probe, practice.judge_record)
        score, _ = utils.determine_grade(cell)
        scores.append((cell.metadata.nbgrader["grade_id"], float(score or 0), points, cell.outputs[0].text))
    return scores


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
    for gid, score, points, report in scores:
        status = "PASS" if score == points else "FAIL"
        print(f"  {status}  {gid:<32} {score:g}/{points:g}")
        if status == "FAIL":
            print("\n".join("        " + line for line in report.rstrip().splitlines()))
    written = written_answers(nb)
    for gid, points, answered in written:
        status, note = ("HAND", "answered: your instructor grades it by hand") if answered else \
            ("TODO", "a written answer, not answered yet")
        print(f"  {status}  {gid:<32} ?/{points:g}  {note}")
    got, total = sum(s[1] for s in scores), sum(s[2] for s in scores)
    by_hand = sum(points for _, points, _ in written)
    print(f"\nScore so far: {got:g} / {total:g} points"
          + (f"; written answers ({by_hand:g} more) are graded by hand" if written else ""))
    return got, total
