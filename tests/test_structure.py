"""Every chapter is in the book and in the README; fast, no book build.

A chapter is a folder of ``solutions/`` named like ``04_attention``. Each must
be listed in ``_toc.yml`` (``chapters/<id>/<id>``) and in the README's
"Chapters" table, on the row of its number, linked to
``chapters/<id>/<id>.ipynb`` (planned chapters, which have no folder yet, have
a row without a link). The other way round, every file ``_toc.yml`` lists and
every notebook the table links to must exist, and every chapter they name
must have its folder in ``solutions/``. The book's "What you will learn" page
(``objectives.md``) must have a section for every chapter that has a folder,
not marked planned, linking its page.

``structure_problems(root)`` does the checking on any folder laid out like
the repository; the tests below run it on the repository and on broken
copies, so that it is seen to fail.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CHAPTER_ID = re.compile(r"^(\d\d)_([a-z][a-z0-9_]*)$")  # as autograder/chapters.py
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def chapter_ids(root: Path) -> list[str]:
    """The chapter folders of root/solutions, in order."""
    solutions = root / "solutions"
    return sorted(p.name for p in solutions.iterdir() if p.is_dir() and CHAPTER_ID.match(p.name))


def toc_files(root: Path) -> list[str]:
    """Every file of root/_toc.yml (root, chapters, parts, sections), as written there."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]] if toc.get("root") else []

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))
            for part in entry.get("parts", []):
                walk(part.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return files


def readme_chapters(root: Path) -> list[tuple[int, str | None]]:
    """The rows of the README's "## Chapters" table: (number, linked path or None)."""
    text = (root / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Chapters\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not match:
        return []
    rows = []
    for line in match.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].isdigit():
            link = LINK.search(cells[1])
            rows.append((int(cells[0]), link.group(1) if link else None))
    return rows


def _exists(root: Path, file: str) -> bool:
    path = root / file
    return path.is_file() or any(path.with_name(path.name + ext).is_file()
                                 for ext in (".ipynb", ".md", ".rst"))


def structure_problems(root: Path = REPO) -> list[str]:
    """What is wrong between root/solutions, root/_toc.yml and root/README.md."""
    ids = chapter_ids(root)
    toc = [re.sub(r"\.(ipynb|md)$", "", f) for f in toc_files(root)]
    rows = readme_chapters(root)
    problems = []

    for ch in ids:
        page = f"chapters/{ch}/{ch}"
        if page not in toc:
            problems.append(f"{ch}: not in _toc.yml (expected an entry `file: {page}`)")
        numbered = [link for number, link in rows if number == int(ch[:2])]
        if not numbered:
            problems.append(f"{ch}: no row {int(ch[:2])} in the README's chapter table")
        elif numbered == [None]:
            problems.append(f"{ch}: the README's row {int(ch[:2])} has no link "
                            f"(still planned?); expected [...]({page}.ipynb)")
        elif f"{page}.ipynb" not in numbered:
            problems.append(f"{ch}: the README's row {int(ch[:2])} links {numbered}, "
                            f"not {page}.ipynb")

    for file in toc_files(root):
        if not _exists(root, file):
            problems.append(f"_toc.yml lists {file}, which does not exist")
        parts = Path(re.sub(r"\.(ipynb|md)$", "", file)).parts
        if parts[0] == "chapters" and (len(parts) != 3 or parts[1] not in ids):
            problems.append(f"_toc.yml lists {file}, which is not a chapter of solutions/")

    for number, link in rows:
        if link is None:
            continue
        if not (root / link).is_file():
            problems.append(f"the README's row {number} links {link}, which does not exist")
        parts = Path(link).parts
        if parts[0] == "chapters" and (len(parts) != 3 or parts[1] not in ids
                                       or int(parts[1][:2]) != number):
            problems.append(f"the README's row {number} links {link}, "
                            "which is not that chapter's notebook")

    numbers = [number for number, _ in rows]
    if sorted(set(numbers)) != sorted(numbers):
        problems.append(f"the README's chapter table repeats a number: {numbers}")
    return problems


def objectives_problems(root: Path = REPO) -> list[str]:
    """objectives.md (the book's "What you will learn") must have a section for every
    chapter of solutions/, not marked planned, linking the chapter's page."""
    text = (root / "objectives.md").read_text(encoding="utf-8")
    problems = []
    for ch in chapter_ids(root):
        number = int(ch[:2])
        section = re.search(rf"^## Chapter {number}:(.*?)$(.*?)(?=^## |\Z)", text, re.M | re.S)
        if not section:
            problems.append(f"{ch}: objectives.md has no section '## Chapter {number}: ...'")
            continue
        if "planned" in section.group(1):
            problems.append(f"{ch}: objectives.md still marks chapter {number} as planned")
        if f"chapters/{ch}/{ch}" not in section.group(2):
            problems.append(f"{ch}: objectives.md's chapter {number} does not link its page")
    return problems


# --------------------------------------------------------------------------- the repository


def test_every_chapter_is_in_the_toc_and_the_readme():
    assert chapter_ids(REPO), "no chapter folders in solutions/"
    problems = structure_problems(REPO)
    assert not problems, "\n".join(problems)


def test_the_objectives_page_covers_every_chapter():
    problems = objectives_problems(REPO)
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- the check fails


@pytest.fixture()
def copy(tmp_path) -> Path:
    """A skeleton of the repository: _toc.yml, README.md, solutions/<id>/ and the
    files the toc and the table name (empty)."""
    shutil.copy(REPO / "_toc.yml", tmp_path / "_toc.yml")
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    shutil.copy(REPO / "objectives.md", tmp_path / "objectives.md")
    for ch in chapter_ids(REPO):
        (tmp_path / "solutions" / ch).mkdir(parents=True)
    for file in toc_files(REPO):
        source = next(p for p in [REPO / file, *(REPO / f"{file}{e}" for e in (".ipynb", ".md"))]
                      if p.is_file())
        target = tmp_path / source.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    for _, link in readme_chapters(REPO):
        if link:
            (tmp_path / link).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / link).touch()
    return tmp_path


def _drop_line(path: Path, needle: str):
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if needle not in line]
    assert len(kept) == len(lines) - 1, f"expected one line holding {needle!r} in {path.name}"
    path.write_text("".join(kept), encoding="utf-8")


def _replace(path: Path, old: str, new: str):
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_the_copy_is_clean(copy):
    assert structure_problems(copy) == []
    assert objectives_problems(copy) == []


def test_a_chapter_written_but_planned_on_the_objectives_page_fails(copy):
    _replace(copy / "objectives.md", "## Chapter 10: Training the transformer, on a GPU when there is one",
             "## Chapter 10: Training on a GPU (planned)")
    _drop_line(copy / "objectives.md", "chapters/10_training/10_training")
    assert objectives_problems(copy) == [
        "10_training: objectives.md still marks chapter 10 as planned",
        "10_training: objectives.md's chapter 10 does not link its page"]
    _replace(copy / "objectives.md", "## Chapter 4:", "## Attention:")
    assert "04_attention: objectives.md has no section '## Chapter 4: ...'" in (
        objectives_problems(copy))


def test_a_new_chapter_folder_must_be_listed(copy):
    # chapter 10 as it was before its notebook was written: in solutions/ only
    _drop_line(copy / "_toc.yml", "chapters/10_training/")
    _replace(copy / "README.md", "[Training the transformer, on a GPU when there is one]"
             "(chapters/10_training/10_training.ipynb)", "Training on a GPU")
    problems = structure_problems(copy)
    assert any("10_training: not in _toc.yml" in p for p in problems), problems
    # README row 10 is without a link: the new folder needs one.
    assert any("10_training: the README's row 10 has no link" in p for p in problems), problems


def test_a_chapter_missing_from_the_toc_fails(copy):
    _drop_line(copy / "_toc.yml", "chapters/03_positional_encoding/")
    assert structure_problems(copy) == [
        "03_positional_encoding: not in _toc.yml "
        "(expected an entry `file: chapters/03_positional_encoding/03_positional_encoding`)"]


def test_a_chapter_missing_from_the_readme_fails(copy):
    _drop_line(copy / "README.md", "(chapters/04_attention/04_attention.ipynb)")
    assert structure_problems(copy) == ["04_attention: no row 4 in the README's chapter table"]


def test_a_chapter_left_planned_in_the_readme_fails(copy):
    _replace(copy / "README.md", "[Attention](chapters/04_attention/04_attention.ipynb)",
             "Attention")
    problems = structure_problems(copy)
    assert problems == ["04_attention: the README's row 4 has no link (still planned?); "
                        "expected [...](chapters/04_attention/04_attention.ipynb)"], problems


def test_a_readme_link_to_another_chapter_fails(copy):
    _replace(copy / "README.md", "(chapters/04_attention/04_attention.ipynb)",
             "(chapters/05_multi_head_attention/05_multi_head_attention.ipynb)")
    problems = structure_problems(copy)
    assert any(p.startswith("04_attention: the README's row 4 links") for p in problems), problems
    assert any("row 4 links chapters/05_multi_head_attention" in p
               and "not that chapter's notebook" in p for p in problems), problems


def test_a_toc_file_that_does_not_exist_fails(copy):
    (copy / "chapters" / "02_embedding" / "02_embedding.ipynb").unlink()
    problems = structure_problems(copy)
    assert "_toc.yml lists chapters/02_embedding/02_embedding, which does not exist" in problems
    assert any("row 2 links chapters/02_embedding/02_embedding.ipynb, which does not exist" in p
               for p in problems), problems


def test_a_toc_chapter_without_a_solutions_folder_fails(copy):
    (copy / "solutions" / "05_multi_head_attention").rmdir()
    problems = structure_problems(copy)
    assert ("_toc.yml lists chapters/05_multi_head_attention/05_multi_head_attention, "
            "which is not a chapter of solutions/") in problems, problems


# --------------------------------------------------------------------------- `pytest -k <chapter>`


def _collected(*args: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 5), result.stdout + result.stderr  # 5: nothing selected
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_selecting_a_chapter_does_not_build_the_book():
    """`pytest -k <chapter id>` (CONTRIBUTING's before-you-commit command) selects no
    test of test_book.py, whose session fixture builds the whole book."""
    everything = _collected(str(REPO / "tests" / "test_book.py"))
    pages = [t for t in everything if "test_page_renders_offline[" in t]
    assert len(pages) >= len(chapter_ids(REPO)), everything  # the check below can select some
    assert _collected("-k", "page_renders", str(REPO / "tests" / "test_book.py")) == pages
    selected = _collected("-k", " or ".join(chapter_ids(REPO)), str(REPO / "tests" / "test_book.py"))
    assert not selected, f"-k <chapter id> selects book tests: {selected}"
