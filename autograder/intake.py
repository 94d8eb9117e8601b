"""Check and repair one student's notebook before nbgrader sees it.

Pure: this module reads the student's folder and returns a repaired
notebook (or why there is none) with notes on what was repaired; it runs
nothing and writes nothing. `autograder.grade` stages what it returns.

A student's notebook is untrusted: it may be renamed, not JSON, huge, a
link, or have its grading structure edited (cells deleted, retyped or
duplicated, grading metadata changed, hidden-test markers planted). After
`intake` the notebook has the release's grading structure, so that one
broken notebook costs only its own student.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from course.protocol import HIDDEN_BEGIN, HIDDEN_END

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024


@dataclass
class Intake:
    """One submission after `intake`: a repaired notebook, or why there is none."""

    notebook: NotebookNode | None = None
    problem: str | None = None
    notes: list[str] = field(default_factory=list)


def _names(names: list[str]) -> str:
    shown = ", ".join(n[:60] for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def intake(chapter_id: str, folder: Path, release: NotebookNode) -> Intake:
    """Find one student's notebook for a chapter in `folder`, check it, and repair it.

    A notebook under another name is graded if it is the only one; extra
    notebooks are ignored. Links are never followed. The repaired notebook
    has the release's notebook metadata and, for every cell the release
    tracks (answer, test and locked cells), the release's cell type and
    grading metadata; see `repair`.
    """
    expected = f"{chapter_id}.ipynb"
    found = sorted(p.name for p in folder.iterdir()
                   if p.suffix == ".ipynb" and p.is_file() and not p.is_symlink())
    notes = []
    if expected in found:
        name = expected
        extra = [n for n in found if n != expected]
        if extra:
            notes.append(f"ignored extra notebook(s): {_names(extra)}")
    elif len(found) == 1:
        name = found[0]
        notes.append(f"notebook renamed: graded {_names(found)} as {expected}")
    else:
        others = f"; found {_names(found)}" if found else ""
        return Intake(problem=f"missing notebook: expected {chapter_id}/{expected}{others}")
    path = folder / name
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        return Intake(problem=f"invalid notebook: larger than {MAX_NOTEBOOK_BYTES // 2**20} MB")
    try:
        raw = nbformat.convert(nbformat.reader.reads(path.read_bytes().decode("utf-8")), 4)
        nb = nbformat.v4.new_notebook(metadata=copy.deepcopy(release.metadata))
        nb.cells = [_plain_cell(c) for c in raw.cells]  # not validated yet: ids may be missing until `repair`
        notes += repair(nb, release)
        nbformat.validate(nb)
    except Exception as err:  # not JSON, not a notebook, not even after repair
        return Intake(problem=f"invalid notebook: {type(err).__name__}")
    return Intake(nb, None, notes)


def _plain_cell(cell: dict) -> NotebookNode:
    """A well-formed cell with the student's type, source and id.

    Outputs are dropped (nbgrader clears them anyway), and so is metadata
    other than nbgrader's (which `repair` checks), tags included: a tag can
    change what runs (nbclient skips a cell tagged ``skip-execution``)
    without changing the code the grader's seed is drawn from
    (`course.checks.framework.submission_code`), and a notebook that kept
    its code and changed which cells run would keep its draw.
    """
    make = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
            "raw": nbformat.v4.new_raw_cell}[cell["cell_type"]]
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else source
    if not isinstance(source, str):
        raise TypeError("cell source is not text")
    meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
    keep = {}
    if "nbgrader" in meta:
        keep["nbgrader"] = meta["nbgrader"]
    new = make(source=source, metadata=keep)
    new["id"] = cell.get("id") if isinstance(cell.get("id"), str) else ""
    return new


def _grade_id(cell: NotebookNode) -> str | None:
    meta = cell.metadata.get("nbgrader")
    gid = meta.get("grade_id") if isinstance(meta, dict) else None
    return gid if isinstance(gid, str) else None


def repair(nb: NotebookNode, release: NotebookNode) -> list[str]:
    """Make `nb`'s grading structure the release's; return what was changed.

    For each grade_id of the release, the last cell carrying it (as
    nbgrader's DeduplicateIds decides) gets the release's cell type and
    metadata back (points, schema_version, locked, ...); earlier cells
    carrying it, and cells with unknown grading metadata, become ordinary
    cells; a deleted one is put back (with the release's source) after the
    tracked cell that precedes it. Test cells' sources are restored later by
    nbgrader (OverwriteCells). Hidden-test markers in the student's own cells
    are disabled (nbgrader's feedback step rejects them there). Cell ids are
    made unique, deterministically.
    """
    tracked = {_grade_id(c): c for c in release.cells if _grade_id(c)}
    keep = {_grade_id(c): i for i, c in enumerate(nb.cells) if _grade_id(c) in tracked}
    notes = []
    for i, cell in enumerate(nb.cells):
        gid = _grade_id(cell)
        if keep.get(gid) != i:
            if "nbgrader" in cell.metadata:
                kind = "duplicate" if gid in keep else "unknown"
                notes.append(f"grading metadata removed from a cell with {kind} grade_id {_short(gid)}")
                del cell.metadata["nbgrader"]
            continue
        want = tracked[gid]
        if cell.cell_type != want.cell_type:
            notes.append(f"cell {gid} turned back into a {want.cell_type} cell")
            cell = nb.cells[i] = _plain_cell({**cell, "cell_type": want.cell_type})
        if cell.metadata.get("nbgrader") != want.metadata.nbgrader:
            notes.append(f"grading metadata of cell {gid} restored")
        cell.metadata = copy.deepcopy(want.metadata)
    order = list(tracked)
    for k, gid in enumerate(order):
        if gid not in keep:
            at = 0 if k == 0 else 1 + next(i for i, c in enumerate(nb.cells) if _grade_id(c) == order[k - 1])
            nb.cells.insert(at, copy.deepcopy(tracked[gid]))
            notes.append(f"deleted cell {gid} restored")
    for cell in nb.cells:
        if not cell.metadata.get("nbgrader", {}).get("locked") and HIDDEN_BEGIN in cell.source:
            for marker in (HIDDEN_BEGIN, HIDDEN_END):
                cell.source = cell.source.replace(marker, marker.replace(" ", "-"))
            notes.append("hidden-test markers in a student cell disabled")
    used: set[str] = set()
    for i, cell in enumerate(nb.cells):
        if not CELL_ID.match(cell.get("id", "")) or cell.id in used:
            cell.id = next(f"cell-{i}-{n}" for n in range(len(nb.cells) + 1) if f"cell-{i}-{n}" not in used)
        used.add(cell.id)
    return list(dict.fromkeys(notes))
