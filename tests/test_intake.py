"""`autograder.intake`: a student's notebook checked and repaired against the
release before nbgrader sees it. Pure: no nbgrader run, no sandbox, no root."""

from __future__ import annotations

import copy
import json
import os

import nbformat
import pytest

from autograder.intake import MAX_NOTEBOOK_BYTES, intake
from course.protocol import HIDDEN_BEGIN

CH = "07_example"
NAME = f"{CH}.ipynb"


def _meta(grade_id: str, **flags: object) -> dict:
    base = {"grade": False, "solution": False, "locked": False, "schema_version": 3, "grade_id": grade_id}
    return {"nbgrader": {**base, **flags}}


def release() -> nbformat.NotebookNode:
    """A small released notebook: prose, a locked setup cell, an answer and its test."""
    return nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}}, cells=[
        nbformat.v4.new_markdown_cell("# Exercise", id="prose"),
        nbformat.v4.new_code_cell("import torch", id="setup", metadata=_meta("setup", locked=True)),
        nbformat.v4.new_code_cell("def f(x):\n    raise NotImplementedError()", id="answer",
                                  metadata=_meta("answer", solution=True)),
        nbformat.v4.new_code_cell('check("example.f", f)', id="test",
                                  metadata=_meta("test", grade=True, locked=True, points=2.0)),
    ])


def student(answer: str = "def f(x):\n    return x") -> nbformat.NotebookNode:
    nb = copy.deepcopy(release())
    cell(nb, "answer").source = answer
    nb.cells.insert(3, nbformat.v4.new_code_cell("print('scratch')", id="scratch"))
    return nb


def cell(nb: nbformat.NotebookNode, grade_id: str) -> nbformat.NotebookNode:
    found = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    assert len(found) == 1, f"{len(found)} cells carry grade_id {grade_id}"
    return found[0]


def submit(tmp_path, nb: nbformat.NotebookNode, name: str = NAME):
    nbformat.write(nb, tmp_path / name)
    return intake(CH, tmp_path, release())


def test_untouched_notebook_passes_unchanged(tmp_path):
    got = submit(tmp_path, student())
    assert got.problem is None and got.notes == []
    assert [c.source for c in got.notebook.cells] == [c.source for c in student().cells]


def test_renamed_notebook_is_graded_if_it_is_the_only_one(tmp_path):
    got = submit(tmp_path, student(), "my work.ipynb")
    assert got.notes == [f"notebook renamed: graded my work.ipynb as {NAME}"]
    assert cell(got.notebook, "answer").source == "def f(x):\n    return x"


def test_extra_notebooks_are_ignored(tmp_path):
    submit(tmp_path, student("wrong = 1"), "scratch.ipynb")
    submit(tmp_path, student("wrong = 2"), "old copy.ipynb")
    got = submit(tmp_path, student())
    assert got.notes == ["ignored extra notebook(s): old copy.ipynb, scratch.ipynb"]
    assert cell(got.notebook, "answer").source == "def f(x):\n    return x"


def test_several_notebooks_none_with_the_right_name_is_missing(tmp_path):
    submit(tmp_path, student(), "a.ipynb")
    got = submit(tmp_path, student(), "b.ipynb")
    assert got.notebook is None
    assert got.problem == f"missing notebook: expected {CH}/{NAME}; found a.ipynb, b.ipynb"


def test_deleted_tracked_cells_are_restored_in_place(tmp_path):
    nb = student()
    nb.cells = [c for c in nb.cells if c.id not in ("setup", "test")]
    got = submit(tmp_path, nb)
    assert got.notes == ["deleted cell setup restored", "deleted cell test restored"]
    # after the tracked cell before it (the first one: at the top)
    assert [c.id for c in got.notebook.cells] == ["setup", "prose", "answer", "test", "scratch"]
    assert cell(got.notebook, "test").metadata == release().cells[3].metadata


def test_duplicate_grade_id_is_demoted_and_the_last_kept(tmp_path):
    nb = student()
    copied = copy.deepcopy(cell(nb, "test"))
    copied.id = "copied"
    nb.cells.insert(1, copied)  # before the original: the original (last) one stays tracked
    got = submit(tmp_path, nb)
    assert got.notes == ["grading metadata removed from a cell with duplicate grade_id 'test'"]
    assert "nbgrader" not in next(c for c in got.notebook.cells if c.id == "copied").metadata
    assert cell(got.notebook, "test").id == "test"


def test_unknown_grade_id_is_demoted(tmp_path):
    nb = student()
    nb.cells[3].metadata = _meta("my-own", grade=True, points=100.0)
    got = submit(tmp_path, nb)
    assert got.notes == ["grading metadata removed from a cell with unknown grade_id 'my-own'"]
    assert all(c.metadata.get("nbgrader", {}).get("grade_id") != "my-own" for c in got.notebook.cells)


def test_changed_cell_types_are_restored(tmp_path):
    nb = student()
    for grade_id, kind in (("answer", "raw"), ("test", "markdown")):
        c = cell(nb, grade_id)
        c.cell_type = kind
        del c["outputs"], c["execution_count"]
    got = submit(tmp_path, nb)
    assert got.notes == ["cell answer turned back into a code cell", "cell test turned back into a code cell"]
    assert cell(got.notebook, "answer").cell_type == cell(got.notebook, "test").cell_type == "code"
    assert cell(got.notebook, "answer").source == "def f(x):\n    return x"


def test_grading_and_notebook_metadata_are_restored(tmp_path):
    nb = student()
    cell(nb, "test").metadata.nbgrader.update(points=200.0, locked=False)
    cell(nb, "answer").metadata.nbgrader.update(grade=True, points=50.0)
    nb.metadata = {"kernelspec": {"name": "evil", "display_name": "evil"}}
    got = submit(tmp_path, nb)
    assert got.notes == ["grading metadata of cell answer restored", "grading metadata of cell test restored"]
    assert cell(got.notebook, "test").metadata.nbgrader.points == 2.0
    assert cell(got.notebook, "answer").metadata.nbgrader.grade is False
    assert got.notebook.metadata == release().metadata


def test_hidden_test_markers_in_student_cells_are_disabled(tmp_path):
    nb = student()
    nb.cells[3].source = f"### {HIDDEN_BEGIN}\nprint(In)"
    got = submit(tmp_path, nb)
    assert got.notes == ["hidden-test markers in a student cell disabled"]
    assert all(HIDDEN_BEGIN not in c.source for c in got.notebook.cells)


def test_invalid_json_is_refused(tmp_path):
    (tmp_path / NAME).write_text('{"cells": [ not json')
    got = intake(CH, tmp_path, release())
    assert (got.notebook, got.problem) == (None, "invalid notebook: NotJSONError")


def test_json_that_is_no_notebook_is_refused(tmp_path):
    (tmp_path / NAME).write_text(json.dumps({"cells": [{"cell_type": "spreadsheet"}], "nbformat": 4}))
    got = intake(CH, tmp_path, release())
    assert got.notebook is None and got.problem.startswith("invalid notebook: ")


def test_oversized_notebook_is_refused_unread(tmp_path):
    with open(tmp_path / NAME, "wb") as f:
        f.truncate(MAX_NOTEBOOK_BYTES + 1)  # sparse: nothing is really written
    got = intake(CH, tmp_path, release())
    assert (got.notebook, got.problem) == (None, "invalid notebook: larger than 20 MB")


def test_symlinked_notebook_is_ignored(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    nbformat.write(student(), elsewhere / "someone else's.ipynb")
    folder = tmp_path / "submission"
    folder.mkdir()
    os.symlink(elsewhere / "someone else's.ipynb", folder / NAME)
    got = intake(CH, folder, release())
    assert (got.notebook, got.problem) == (None, f"missing notebook: expected {CH}/{NAME}")


def test_cell_ids_are_made_unique_and_valid(tmp_path):
    raw = json.loads(nbformat.writes(student()))
    raw["cells"][0]["id"] = raw["cells"][3]["id"] = "same"
    raw["cells"][4]["id"] = "not a valid id!"
    del raw["cells"][1]["id"]
    (tmp_path / NAME).write_text(json.dumps(raw))
    got = intake(CH, tmp_path, release())
    ids = [c.id for c in got.notebook.cells]
    assert len(set(ids)) == len(ids) and ids[0] == "same" and ids[3] != "same", ids
    assert all(i and " " not in i and "!" not in i for i in ids), ids
    nbformat.validate(got.notebook)


def test_notebook_without_cell_ids_is_graded(tmp_path):
    """nbformat before 4.5 has no cell ids: Colab and older Jupyter save that."""
    raw = json.loads(nbformat.writes(student()))
    raw["nbformat_minor"] = 0
    for c in raw["cells"]:
        del c["id"]
    (tmp_path / NAME).write_text(json.dumps(raw))
    got = intake(CH, tmp_path, release())
    assert got.problem is None and got.notes == []
    assert cell(got.notebook, "answer").source == "def f(x):\n    return x"
    nbformat.validate(got.notebook)


@pytest.mark.parametrize("name", ["notes.txt", "folder.ipynb"])
def test_no_notebook_at_all_is_missing(tmp_path, name):
    if name.endswith(".ipynb"):
        (tmp_path / name).mkdir()
    else:
        (tmp_path / name).write_text("x @ W + b")
    got = intake(CH, tmp_path, release())
    assert got.problem == f"missing notebook: expected {CH}/{NAME}"


def test_metadata_cannot_change_what_runs_while_the_draw_stays(tmp_path):
    """The grader's seed hashes the code cells' sources (`framework.submission_code`); whatever else could
    change what runs is removed here. Two submissions with the same code but other tags (nbclient skips
    cells tagged `skip-execution`) and other metadata become the same notebook: the same draw, and the
    same run."""
    from autograder.execute import GuardedExecute
    from course.checks.framework import submission_code

    plain = student()
    steered = student()
    steered.metadata["kernelspec"] = {"name": "other", "display_name": "other"}
    for c in steered.cells:
        c.metadata["tags"] = ["skip-execution", "raises-exception"]
        c.metadata["execution"] = {"timeout": 1}
        c.metadata["anything"] = {"the": "student's"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = submit(tmp_path / "a", plain), submit(tmp_path / "b", steered)
    assert nbformat.writes(a.notebook) == nbformat.writes(b.notebook)
    assert submission_code(a.notebook.cells) == submission_code(b.notebook.cells)
    assert not any(c.metadata.get("tags") for c in b.notebook.cells)
    assert GuardedExecute().skip_cells_with_tag not in ("skip-execution", "")
