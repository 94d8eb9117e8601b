"""What a chapter notebook's cells mean: the one reading the grader, the lint, the
release, the student edition, the learner's collector and the tests share.

A chapter notebook (named by its chapter id, `CHAPTER_ID`) is made of cells whose
meaning comes from nbgrader's metadata and from markers in their source:

* a **test cell** (`is_test_cell`) is a code cell nbgrader grades that is not a
  solution: its ``check("topic.name", obj)`` calls are the exercise's tests, and
  the calls between the hidden-test markers (`course.protocol.HIDDEN_BEGIN` /
  `HIDDEN_END`) are removed from the student's copy;
* an **answer cell** (`is_answer_cell`) is a cell nbgrader marks as a solution:
  the student writes it; the reference answer sits between the solution markers
  (`SOLUTION_BEGIN` / `SOLUTION_END`), which `without_solution_markers` removes;
* a **written answer** (`is_written_answer`) is an answer cell nbgrader also
  grades: it is graded by hand;
* an **exported cell** (`is_exported`) is a code cell tagged ``export``: the
  answer cells, and the cells of the imports they need, which `exported_code`
  joins into the chapter's module (`course.reference.<topic>`, or the learner's
  own module).

The ``check(...)`` calls of a source (`check_calls`) are read with one rule, the
judge's, which decides what is graded:

* a call counts when what is called is a name or attribute named ``check``
  (``check(...)``, ``course.checks.check(...)``) and its first positional
  argument is a constant: the check's name is that constant, as a string. A call
  whose name is computed (``check(name, obj)``), or passed by keyword, is not a
  check call: the grader could not know which check it runs;
* the call is hidden when it is given ``hidden=True`` as a keyword with the
  constant ``True``; any other value (``hidden=flag``, ``hidden=1``) is visible;
* the object checked is the second positional argument; its name is recorded
  when it is a plain name (``check("attention.softmax", softmax)``), else None;
* calls come in the order `ast.walk` visits them (breadth first: a call inside a
  loop comes after the cell's top-level calls), with the line each starts on.

The student's self-check, the learner's collector, the grader and the tests all
read test cells through this module, so they agree on these edges.

Hidden-test markers are recognised as nbgrader does: any line that contains
`HIDDEN_BEGIN` opens a hidden block, the first line after it (or the same line)
that contains `HIDDEN_END` closes it (no ``### `` needed before the markers).
`hidden_lines` reads an unclosed block as
running to the end of the source (what must never be shown); `hidden_code` takes
closed blocks only (what the lint accepts as hidden tests), each dedented on its own.

This module is pure: it imports neither `autograder`, nor nbgrader, nor torch, and
takes cells as the dicts nbformat reads (`nbformat.NotebookNode` or plain dicts).
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from course.protocol import HIDDEN_BEGIN, HIDDEN_END

#: a chapter's id (``04_attention``): its solutions/ folder, its nbgrader assignment, its notebook's name
CHAPTER_ID = re.compile(r"^(\d\d)_([a-z][a-z0-9_]*)$")
#: the lines around the reference answer in an answer cell (nbgrader removes what is between)
SOLUTION_BEGIN, SOLUTION_END = "### BEGIN SOLUTION", "### END SOLUTION"
SOLUTION_MARKERS = (SOLUTION_BEGIN, SOLUTION_END)
#: the tag of the code cells the release exports into the chapter's module
EXPORT_TAG = "export"

Cell = Mapping[str, Any]  # a notebook cell as nbformat reads it


# ------------------------------------------------------------ cell kinds ---

def _nbgrader(cell: Cell) -> Mapping[str, Any]:
    return cell.get("metadata", {}).get("nbgrader") or {}


def grade_id(cell: Cell) -> str | None:
    """nbgrader's id of the cell (None: not one of nbgrader's cells)."""
    return _nbgrader(cell).get("grade_id")


def is_test_cell(cell: Cell) -> bool:
    """Whether the cell holds an exercise's tests: a code cell nbgrader grades that is not a solution."""
    meta = _nbgrader(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def is_answer_cell(cell: Cell) -> bool:
    """Whether the student writes the cell: nbgrader marks it a solution (code, or a written answer)."""
    return bool(_nbgrader(cell).get("solution"))


def is_written_answer(cell: Cell) -> bool:
    """Whether the cell is an answer graded by hand: nbgrader marks it both solution and graded."""
    meta = _nbgrader(cell)
    return bool(meta.get("grade")) and bool(meta.get("solution"))


def is_exported(cell: Cell) -> bool:
    """Whether the release copies the cell into the chapter's module: a code cell tagged ``export``
    (the answer cells, and the cells of imports they need)."""
    return cell.get("cell_type") == "code" and EXPORT_TAG in cell.get("metadata", {}).get("tags", [])


# ----------------------------------------------------------- check calls ---

@dataclass(frozen=True)
class CheckCall:
    """One ``check("topic.name", obj, hidden=...)`` call in a source."""

    name: str         # the check, e.g. "attention.softmax"
    obj: str | None   # the name of the object checked; None when it is not a plain name
    hidden: bool      # given hidden=True
    line: int         # the line the call starts on (1-based)


def check_calls(source: str) -> list[CheckCall]:
    """The ``check(...)`` calls in `source`, by the rule of the module docstring.
    Raises SyntaxError (or ValueError) when `source` is not Python."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if called != "check" or not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        hidden = any(k.arg == "hidden" and isinstance(k.value, ast.Constant) and k.value.value is True
                     for k in node.keywords)
        obj = node.args[1].id if len(node.args) > 1 and isinstance(node.args[1], ast.Name) else None
        calls.append(CheckCall(str(node.args[0].value), obj, hidden, node.lineno))
    return calls


def checks_in_source(source: str) -> list[tuple[str, bool]]:
    """The ``(check name, hidden)`` of each `check_calls` call in `source` (what the grader runs)."""
    return [(call.name, call.hidden) for call in check_calls(source)]


# ---------------------------------------------------------- hidden tests ---

def _hidden_blocks(lines: list[str]) -> list[tuple[int, int | None]]:
    """(index of the line opening, index of the line closing or None) of each hidden block."""
    blocks, start = [], None
    for i, line in enumerate(lines):
        if start is None and HIDDEN_BEGIN in line:
            start = i
        if start is not None and HIDDEN_END in line:
            blocks.append((start, i))
            start = None
    if start is not None:
        blocks.append((start, None))
    return blocks


def hidden_lines(source: str) -> set[str]:
    """A test cell's hidden-test lines, stripped, markers included; an unclosed block runs to the end."""
    lines = source.splitlines()
    return {line.strip() for start, end in _hidden_blocks(lines)
            for line in lines[start:len(lines) if end is None else end + 1] if line.strip()}


def hidden_code(source: str) -> str:
    """The code between the markers of each closed hidden block of `source`, each block dedented."""
    lines = source.splitlines()
    return "\n".join(textwrap.dedent("\n".join(lines[start + 1:end]))
                     for start, end in _hidden_blocks(lines) if end is not None)


# ------------------------------------------------------------- solutions ---

def without_solution_markers(source: str) -> str:
    """`source` without its solution marker lines (the reference answer, as it runs)."""
    return "\n".join(line for line in source.splitlines() if line.strip() not in SOLUTION_MARKERS)


def exported_code(nb: Mapping[str, Any]) -> str:
    """The code of a notebook's exported cells (`is_exported`), solution markers removed, as one module."""
    blocks = [without_solution_markers(cell["source"]).strip("\n") for cell in nb["cells"] if is_exported(cell)]
    return "\n\n\n".join(b for b in blocks if b) + "\n"


def imports(source: str) -> list[tuple[str, str | None]]:
    """What a cell's code imports, in order: ``(module, None)`` for ``import module`` and ``(module, name)``
    for ``from module import name``; nothing for a cell that is not Python (a magic, a syntax error)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [(node.module, a.name) for a in node.names]
    return found


def _root(node: ast.expr) -> str | None:
    """The name an attribute chain starts from (``torch`` for ``torch.nn.functional``)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def uses_of(source: str, dotted: Sequence[str]) -> list[str]:
    """The names in `dotted` (``"torch.softmax"``, ``"torch.Tensor.softmax"``) that `source` may
    call: an attribute or an imported name that contains that last name (``torch.softmax(x)``,
    ``F.softmax(x)``, ``x.softmax(-1)``, ``torch._softmax(x, -1, False)``, ``from torch import
    softmax as s``), whatever the module's alias; or, for any of them, PyTorch's low-level doors
    (``torch.ops``, ``torch._C``) and ``getattr`` on a module (``getattr(torch, "soft" + "max")``;
    ``getattr(head, name)`` on the student's own objects is not one). A function of the student's own of
    that name (``def softmax``, ``softmax(x)``) is not one, nor one imported from the course's own
    modules (``from course.reference.attention import scaled_dot_product_attention``). What the
    grader flags for a person to read: a name used is not proof of a forbidden call, nor its absence
    proof of none."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    names |= {a.name.rpartition(".")[2] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
              and not (isinstance(n, ast.ImportFrom) and (n.module or "").startswith("course."))
              for a in n.names}   # the course's own pieces (chapter 4's scaled_dot_product_attention) are not PyTorch's
    modules = {"torch", "nn", "F", "functional"} | {a.asname or a.name.partition(".")[0] for n in ast.walk(tree)
                                                    if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    doors = bool(names & {"ops", "_C"}) or any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr" and n.args
        and _root(n.args[0]) in modules for n in ast.walk(tree))
    return [name for name in dotted if doors or any(name.rpartition(".")[2] in n for n in names)]
