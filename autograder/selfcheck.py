"""`python -m autograder check NOTEBOOK`: a student's self-check.

Runs the notebook top to bottom with nbgrader's own Execute preprocessor
(as ``nbgrader validate`` does), then scores each test cell with nbgrader's
own rule. Only the visible tests are in a student's copy, so the score is
what the visible tests give; the hidden tests run when the work is graded.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbgrader import utils
from nbgrader.preprocessors import Execute


def _first_line(cell) -> str:
    for out in cell.outputs:
        if out.output_type == "error":
            text = out.evalue.strip().splitlines()
            return text[1].strip() if len(text) > 1 else (text[0] if text else out.ename)
    return ""


def self_check(notebook: Path, timeout: int = 120) -> tuple[float, float]:
    """Execute `notebook`, print each exercise's status; return (score, max)."""
    nb = nbformat.read(notebook, as_version=4)
    env = {"NBGRADER_EXECUTION": "validate", "NBGRADER_VALIDATING": "1"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        quiet = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]
        Execute(timeout=timeout, extra_arguments=quiet).preprocess(nb, {"metadata": {"path": str(notebook.parent.resolve())}})
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    total = got = 0.0
    print(f"Self-check of {notebook.name} (visible tests only; hidden tests run when it is graded)\n")
    for cell in nb.cells:
        if cell.cell_type != "code" or not utils.is_grade(cell) or utils.is_solution(cell):
            continue
        score, points = utils.determine_grade(cell)
        total += points
        got += score or 0
        status = "PASS" if score == points else "FAIL"
        detail = "" if status == "PASS" else f"  {_first_line(cell)}"
        print(f"  {status}  {cell.metadata.nbgrader['grade_id']:<32} {score or 0:g}/{points:g}{detail}")
    print(f"\nScore so far: {got:g} / {total:g} points")
    return got, total
