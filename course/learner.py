"""The learner's own transformer: their answers, collected into a package that chapter 10 trains.

``python -m course.learner collect [chapters/] [--out my_transformer]`` (or `collect(...)` from a
notebook cell) reads the answer cells of the learner's chapter notebooks, the cells `release`
exports into `course.reference` (tagged ``export``), and writes one module per chapter topic, in
which ``from course.reference.<topic> import ...`` imports the learner's own module instead, so their
`EncoderLayer` uses their `MultiHeadAttention`. Only answer cells and the imports they need are
collected: importing the package runs no demonstration.

`learner_parts(folder)` loads that package and runs, in this process, the visible checks each answer
faces in its notebook (`course.checks`). An answer that fails one (a stub still raising
`NotImplementedError` included) is replaced by the course's reference, also inside the learner's
modules, so that their `Transformer` works with the reference `MultiHeadAttention` when theirs fails.
The result is a `course.parts.Parts`: each piece of `course.parts.PIECES` is the learner's where it
passes and the reference otherwise; ``parts.table()`` says whose each piece is and why.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import re
import shutil
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import torch

from course.cells import CHAPTER_ID, check_calls, exported_code, is_exported, is_test_cell
from course.probing import practice
from course.probing.runner import CheckUnavailable
from course.probing.verdicts import not_implemented
from course.parts import PIECES, Parts

MANIFEST = "collected.json"  # in the package: where each module came from, which checks its answers face
YOURS, REFERENCE = "yours", "reference"
NOT_FOUND = "notebook not found"
PIECE_TOPICS = list(dict.fromkeys(PIECES.values()))  # in chapter order: a topic's dependencies come first


# ------------------------------------------------------------- collect ---

@dataclass
class Collected:
    """What `collect` wrote: the package folder, the notebook of each module, and the chapters of
    the pieces whose notebook was not found (those pieces are the reference's)."""

    out: Path
    notebooks: dict[str, Path]  # topic -> the learner's notebook
    missing: list[str]          # topics of `PIECES` without a notebook

    def __str__(self) -> str:
        lines = [f"Collected your answers into {self.out}/:"]
        lines += [f"  {topic + '.py':<26} from {nb}" for topic, nb in self.notebooks.items()]
        if self.missing:
            lines.append(f"No notebook found for {', '.join(self.missing)}: the course's reference answers "
                         "stand in for those pieces.")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # how Jupyter shows it
        printer.text(str(self))


def find_notebooks(notebooks: str | Path | Sequence[str | Path]) -> dict[str, Path]:
    """Chapter id -> notebook, from folders (searched recursively) and .ipynb files named by chapter id."""
    paths = [notebooks] if isinstance(notebooks, (str, Path)) else notebooks
    found: dict[str, Path] = {}
    for path in map(Path, paths):
        if not path.exists():
            raise FileNotFoundError(f"no such notebook or folder: {path}")
        for nb in [path] if path.is_file() else sorted(path.rglob("*.ipynb")):
            if ".ipynb_checkpoints" in nb.parts or not CHAPTER_ID.match(nb.stem):
                continue
            if nb.stem in found:
                raise ValueError(f"two notebooks of chapter {nb.stem}: {found[nb.stem]} and {nb}; "
                                 "pass the one you mean")
            found[nb.stem] = nb
    return dict(sorted(found.items()))


def _defined(source: str) -> list[str]:
    """The functions and classes a cell defines at its top level."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return []
    return [node.name for node in body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]


def _visible_checks(source: str) -> list[tuple[str, str]]:
    """(check, name of the object it is given) of each visible `check_calls` call of a cell that is
    given an object by name (one given an expression cannot be looked up in the learner's module)."""
    try:
        calls = check_calls(source)
    except SyntaxError:
        return []
    return [(call.name, call.obj) for call in calls if not call.hidden and call.obj is not None]


def checks_by_answer(nb: nbformat.NotebookNode) -> dict[str, list[tuple[str, str]]]:
    """Each function or class the answer cells define -> the visible checks it faces: those the next
    test cell gives it by name, or all of that cell's checks (``greedy_decode`` is checked through
    ``generate``, defined in the same cell)."""
    out: dict[str, list[tuple[str, str]]] = {}
    pending: list[str] = []
    for cell in nb.cells:
        if is_exported(cell):
            pending += _defined(cell.source)
        elif is_test_cell(cell):
            calls = _visible_checks(cell.source)
            for name in pending:
                out.setdefault(name, []).extend([c for c in calls if c[1] == name] or calls)
            pending = []
    return out


def _needed_imports(nb: nbformat.NotebookNode, code: str) -> list[str]:
    """Top-level imports of the notebook's other code cells that bind names the answers use but do
    not bind themselves (a learner's answer may use the ``np`` that an earlier cell imported)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    bound = {alias.asname or alias.name.partition(".")[0] for node in tree.body
             if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    bound |= set(_defined(code))
    wanted = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} - bound
    lines = []
    for cell in nb.cells:
        if cell.cell_type != "code" or is_exported(cell):
            continue
        try:
            body = ast.parse(cell.source).body
        except SyntaxError:  # IPython magics (the setup cell's %pip) or a broken demonstration
            continue
        for node in body:
            names = ({alias.asname or alias.name.partition(".")[0] for alias in node.names}
                     if isinstance(node, (ast.Import, ast.ImportFrom)) else set())
            if names & wanted:
                lines.append(ast.get_source_segment(cell.source, node))
                wanted -= names
    return lines


def _rewrite_imports(code: str, own: str, mine: set[str]) -> str:
    """``from course.reference.<topic> import ...`` -> ``from .<topic> import ...`` for every topic of
    `mine` but the module's `own` (other import forms keep the reference)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:  # left as it is: importing it reports the error
        return code
    lines = code.splitlines(keepends=True)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                and node.module.startswith("course.reference.")):
            continue
        topic = node.module.split(".")[2]
        if topic in mine and topic != own:
            for i in range(node.lineno - 1, node.end_lineno):
                lines[i] = re.sub(rf"\bcourse\.reference\.{topic}\b", f".{topic}", lines[i])
    return "".join(lines)


def module_source(nb: nbformat.NotebookNode, chapter: str, notebook: Path, mine: set[str]) -> str:
    """The learner's module of one chapter: its answer cells, the imports they need, and imports of
    the course's reference rewritten to the learner's modules in `mine` (topics)."""
    code = exported_code(nb)
    imports = _needed_imports(nb, code)
    header = (f'"""Your answers of chapter {chapter}, collected from {notebook} by\n'
              "`python -m course.learner collect`. Do not edit: edit the notebook and collect again.\n"
              '"""\n')
    body = "\n".join(imports) + "\n\n" + code if imports else code
    return header + _rewrite_imports(body, chapter[3:], mine)


def collect(notebooks: str | Path | Sequence[str | Path] = "chapters", out: str | Path = "my_transformer") -> Collected:
    """Write the learner's package into `out`: one module per chapter notebook found in `notebooks`
    (folders or .ipynb files), and the manifest `learner_parts` reads. `out` is replaced if it holds
    an earlier collection; any other non-empty folder is refused."""
    out = Path(out)
    found = find_notebooks(notebooks)
    if out.exists() and any(out.iterdir()):
        if not (out / MANIFEST).is_file():
            raise FileExistsError(f"{out} is not empty and holds no earlier collection: choose another folder")
        shutil.rmtree(out)
    mine = {chapter[3:] for chapter in found}
    out.mkdir(parents=True, exist_ok=True)
    (out / "__init__.py").write_text(
        '"""A learner\'s own transformer, collected from their notebooks by `python -m course.learner collect`.\n\n'
        'Chapter 10 uses it through `course.learner.learner_parts(folder)`."""\n')
    manifest = {}
    for chapter, path in found.items():
        nb = nbformat.read(path, as_version=4)
        (out / f"{chapter[3:]}.py").write_text(module_source(nb, chapter, path, mine))
        manifest[chapter[3:]] = {"chapter": chapter, "notebook": str(path), "checks": checks_by_answer(nb)}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return Collected(out, {topic: Path(entry["notebook"]) for topic, entry in manifest.items()},
                     [topic for topic in PIECE_TOPICS if topic not in manifest])


# ------------------------------------------------------- learner_parts ---

@dataclass
class LearnerParts(Parts):
    """`Parts` that also say why a piece is not the learner's (``reasons``), and name the package."""

    reasons: dict[str, str] = field(default_factory=dict)
    package: str = ""  # the module name the learner's package was loaded as

    def table(self) -> str:
        """One line per piece: its chapter module, whose it is and, if not yours, why."""
        width = max(map(len, PIECES))
        lines = [f"{'piece':<{width}}  {'chapter':<20} {'whose':<10} why not yours"]
        for name, topic in PIECES.items():
            whose = self.owner(name) if name in self.objects else "none"
            lines.append(f"{name:<{width}}  {topic:<20} {whose:<10} {self.reasons.get(name, '')}".rstrip())
        mine = sum(owner == YOURS for owner in self.owners.values())
        return "\n".join(lines + [f"{mine} of {len(PIECES)} pieces are yours."])

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # how Jupyter shows it
        printer.text(self.table())


def _load_package(folder: Path) -> str:
    """Import the package in `folder` afresh (dropping an earlier collection's modules); its name."""
    name = folder.name
    if not name.isidentifier():
        raise ValueError(f"{folder}: a package folder needs a Python identifier as its name")
    loaded = sys.modules.get(name)
    if loaded is not None and not (Path(getattr(loaded, "__file__", "") or ".").parent / MANIFEST).is_file():
        raise ValueError(f"a module named {name!r} is already imported ({loaded!r}): collect into another folder")
    for key in [k for k in sys.modules if k == name or k.startswith(f"{name}.")]:
        del sys.modules[key]
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return name


def _reference(topic: str) -> types.ModuleType | None:
    """`course.reference.<topic>`, or None where it is not published yet (a student edition)."""
    try:
        return importlib.import_module(f"course.reference.{topic}")
    except ModuleNotFoundError:
        return None


def _import_modules(package: str, topics: list[str]) -> tuple[dict[str, types.ModuleType], dict[str, str]]:
    """The learner's modules of `topics`, in chapter order, and why the others did not import. A module
    that fails is replaced by the reference's, so the learner's later chapters still import."""
    modules, failures = {}, {}
    for topic in topics:
        try:
            modules[topic] = importlib.import_module(f"{package}.{topic}")
        except Exception as err:  # the learner's code: any error is theirs to see
            failures[topic] = f"your chapter's answers do not run: {type(err).__name__}: {err}"
            reference = _reference(topic)
            if reference is not None:
                sys.modules[f"{package}.{topic}"] = reference
                setattr(sys.modules[package], topic, reference)
    return modules, failures


def visible_problem(qualified: str, obj: Any) -> str | None:
    """Run the visible cases of check `qualified` on `obj` here, judged against the released
    visible answers (`course.probing.practice`); None if it passes, else why not."""
    try:
        passed, _, entries = practice.judge_visible(qualified, obj)
    except CheckUnavailable as err:
        return f"check {qualified} unavailable ({err})"
    if any(not_implemented(entry[0]) for entry in entries):
        return "not implemented"
    return None if passed else f"fails check {qualified}"


def _substitute(modules: list[types.ModuleType], mine: Any, reference: Any) -> None:
    """Make every learner module that refers to `mine` use `reference` instead."""
    for module in modules:
        for key, value in list(vars(module).items()):
            if value is mine:
                setattr(module, key, reference)


def _judge(modules: dict[str, types.ModuleType], manifest: dict) -> dict[tuple[str, str], str | None]:
    """(topic, name) -> why the learner's answer does not stand (None: it passes), for every answer
    that faces a check, in notebook order; a failing answer is replaced by the reference's at once,
    so the answers after it are judged with it."""
    problems: dict[tuple[str, str], str | None] = {}
    verdicts: dict[tuple[str, str], str | None] = {}  # (check, object name) -> problem
    with torch.random.fork_rng(devices=[]):  # cases reseed torch: leave the learner's RNG alone
        for topic, module in modules.items():
            for name, calls in manifest[topic]["checks"].items():
                problem = None
                for key in map(tuple, calls):
                    check_name, arg = key
                    if key not in verdicts:
                        obj = getattr(module, arg, None)
                        verdicts[key] = (f"{arg} is not defined" if obj is None
                                         else visible_problem(check_name, obj))
                    problem = problem or verdicts[key]
                problems[(topic, name)] = problem
                reference = getattr(_reference(topic), name, None)
                if problem and reference is not None and hasattr(module, name):
                    _substitute(list(modules.values()), getattr(module, name), reference)
    return problems


def learner_parts(package: str | Path = "my_transformer") -> LearnerParts:
    """Every piece of `PIECES`: the learner's (from the package `collect` wrote) where it passes its
    chapter's visible checks, else the course's reference. Pieces whose chapter has no reference
    module (a student edition before the due date) and no passing answer are left out."""
    folder = Path(package).resolve()
    if not (folder / MANIFEST).is_file():
        raise FileNotFoundError(f"{folder} holds no collected answers: run `python -m course.learner collect` first")
    manifest = json.loads((folder / MANIFEST).read_text())
    name = _load_package(folder)
    modules, failures = _import_modules(name, [t for t in PIECE_TOPICS if t in manifest])
    problems = _judge(modules, manifest)
    parts = LearnerParts({}, package=name)
    for piece, topic in PIECES.items():
        module = modules.get(topic)
        if module is None:
            problem = failures.get(topic, NOT_FOUND)
        elif not hasattr(module, piece):
            problem = "not defined in your notebook"
        else:
            problem = problems.get((topic, piece), "no visible check in your notebook")
        if problem is None:
            parts.objects[piece], parts.owners[piece] = getattr(module, piece), YOURS
            continue
        parts.reasons[piece] = problem
        reference = getattr(_reference(topic), piece, None)
        if reference is not None:
            parts.objects[piece], parts.owners[piece] = reference, REFERENCE
    return parts


# ----------------------------------------------------------------- CLI ---

def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m course.learner", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cmd = commands.add_parser("collect", help="collect your answer cells into a package chapter 10 trains")
    cmd.add_argument("notebooks", nargs="*", default=["chapters"],
                     help="your chapter notebooks, or folders holding them (default: chapters)")
    cmd.add_argument("--out", default="my_transformer", help="the package folder to write (default: my_transformer)")
    args = parser.parse_args(argv)
    print(collect(args.notebooks, args.out))
    print()
    print(learner_parts(args.out).table())


if __name__ == "__main__":
    main()
