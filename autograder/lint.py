"""Rules every solution notebook follows, checked before each release."""

from __future__ import annotations


import nbformat

from course.cells import SOLUTION_BEGIN, checks_in_source, hidden_code, imports, is_answer_cell
from course.checks.framework import CheckUnavailable, get_check

from .chapters import Chapter, repository_url


def lint_solution(ch: Chapter) -> list[str]:
    """Problems with a chapter's solution notebook (empty list: none)."""
    nb = nbformat.read(ch.solution, as_version=4)
    problems: list[str] = []
    first_code = next((c.source for c in nb.cells if c.cell_type == "code"), "")
    if "git+" + repository_url() not in first_code:
        problems.append("the first code cell must be the setup cell installing the course from "
                        "_config.yml's repository.url (copy it from chapter 0, then release)")
    seen: set[str] = set()
    for i, cell in enumerate(nb.cells):
        where = f"cell {i}"
        if cell.cell_type == "code" and cell.get("outputs"):
            problems.append(f"{where}: commit solution notebooks without outputs")
        if cell.cell_type == "code" and (trusted := trusted_imports(cell.source)):
            problems.append(f"{where}: imports {', '.join(trusted)}, the checks' trusted side, which neither the "
                            "student edition nor the grading sandbox holds (only `from course.checks import check`)")
        meta = cell.metadata.get("nbgrader")
        if not meta:
            continue
        gid = meta.get("grade_id")
        where = f"cell {i} ({gid})"
        if meta.get("schema_version") != 3:
            problems.append(f"{where}: nbgrader schema_version must be 3")
        if not gid or gid in seen:
            problems.append(f"{where}: grade_id missing or duplicated")
        seen.add(gid)
        if is_answer_cell(cell) and SOLUTION_BEGIN not in cell.source:
            problems.append(f"{where}: solution cell without {SOLUTION_BEGIN}")
        if meta.get("grade") and cell.cell_type == "code":  # a graded code answer too: it fails as a test cell
            problems.extend(_lint_test_cell(where, cell, meta, ch.topic))
    return problems


def trusted_imports(source: str) -> list[str]:
    """What a cell imports from `course.checks` besides its `check` (the public entry point)."""
    return sorted({module if name is None else f"{module}.{name}" for module, name in imports(source)
                   if module.startswith("course.checks") and (module, name) != ("course.checks", "check")})


def _lint_test_cell(where: str, cell, meta: dict, topic: str) -> list[str]:
    problems = []
    if not meta.get("locked") or not meta.get("points"):
        problems.append(f"{where}: test cells must be locked and worth points")
    calls = checks_in_source(cell.source)
    hidden_calls = checks_in_source(hidden_code(cell.source))
    visible = [n for n, h in calls if not h]
    hidden = [n for n, h in calls if h]
    if not visible:
        problems.append(f"{where}: no visible check(...) for the student")
    if not hidden or not hidden_calls:
        problems.append(f"{where}: no hidden check(..., hidden=True) between HIDDEN TESTS markers")
    if any(not h for _, h in hidden_calls):
        problems.append(f"{where}: hidden block holds a check without hidden=True")
    for name, _ in calls:
        if not name.startswith(f"{topic}."):
            problems.append(f"{where}: check {name!r} is not one of this chapter's ({topic}.*)")
            continue
        try:
            get_check(name)
        except CheckUnavailable as err:
            problems.append(f"{where}: {err}")
    if "raises-exception" not in cell.metadata.get("tags", []):
        problems.append(f"{where}: tag test cells 'raises-exception' (the book runs unsolved stubs)")
    return problems
