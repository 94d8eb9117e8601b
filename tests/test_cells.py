"""`course.cells`: the one reading of a notebook's cells (check calls, hidden tests, solutions,
nbgrader's cell kinds) that the judge, the lint, the release, the edition, the learner's
collector, the student-mode check and the tests share."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from autograder import judge
from course import cells, learner
from course.cells import CheckCall, check_calls, checks_in_source, hidden_code, hidden_lines
from course.protocol import HIDDEN_BEGIN, HIDDEN_END


def code(source: str = "", tags: tuple[str, ...] = (), **nbgrader) -> nbformat.NotebookNode:
    metadata = {"tags": list(tags)} if tags else {}
    if nbgrader:
        metadata["nbgrader"] = {"grade_id": "c", "schema_version": 3, **nbgrader}
    return nbformat.v4.new_code_cell(source, metadata=metadata)


def markdown(source: str = "", **nbgrader) -> nbformat.NotebookNode:
    metadata = {"nbgrader": {"grade_id": "m", **nbgrader}} if nbgrader else {}
    return nbformat.v4.new_markdown_cell(source, metadata=metadata)


# ------------------------------------------------------------ check calls ---

def test_check_calls_read_name_object_hidden_and_line():
    source = 'x = 1\ncheck("topic.a", f)\ncheck("topic.b", g, hidden=True)\n'
    assert check_calls(source) == [CheckCall("topic.a", "f", False, 2), CheckCall("topic.b", "g", True, 3)]
    assert checks_in_source(source) == [("topic.a", False), ("topic.b", True)]


@pytest.mark.parametrize("source,expected", [
    # an attribute call is a check call (the learner's collector and the tests' reader ignored it)
    ('course.checks.check("topic.a", f)', [CheckCall("topic.a", "f", False, 1)]),
    # hidden=False is a visible call (the collector ignored any call with a keyword)
    ('check("topic.a", f, hidden=False)', [CheckCall("topic.a", "f", False, 1)]),
    # only the constant True hides (the tests' reader crashed on a non-constant value)
    ('check("topic.a", f, hidden=flag)', [CheckCall("topic.a", "f", False, 1)]),
    ('check("topic.a", f, hidden=1)', [CheckCall("topic.a", "f", False, 1)]),
    # a computed name is not a check call (the student-mode check counted it; the tests' reader crashed)
    ("check(name, f)", []),
    ('check(name="topic.a", obj=f)', []),
    ("check()", []),
    # other callables named otherwise, or called through an expression, are not
    ('checker("topic.a", f)\nchecks[0]("topic.a", f)\nget()("topic.a", f)', []),
    # the object's name only when it is a plain name (the tests' reader crashed, the collector skipped it)
    ('check("topic.a", model.forward)', [CheckCall("topic.a", None, False, 1)]),
    ('check("topic.a")', [CheckCall("topic.a", None, False, 1)]),
    # more positional arguments (the collector ignored the call)
    ('check("topic.a", f, g)', [CheckCall("topic.a", "f", False, 1)]),
    # a non-string constant is its text
    ("check(3, f)", [CheckCall("3", "f", False, 1)]),
    # a multi-line call is on the line it starts on; a nested one comes after the outer one
    ('check(\n    "topic.a",\n    f,\n)', [CheckCall("topic.a", "f", False, 1)]),
    ('for f in fs:\n    check("topic.a", f)\ncheck("topic.b", f)',
     [CheckCall("topic.b", "f", False, 3), CheckCall("topic.a", "f", False, 2)]),
])
def test_check_calls_follow_the_judges_rule(source, expected):
    assert check_calls(source) == expected


def test_check_calls_raise_on_code_that_is_not_python():
    with pytest.raises(SyntaxError):
        check_calls("%pip install x\ncheck('topic.a', f)")


def test_every_reader_agrees_with_the_judge(tmp_path):
    """The judge, the lint, the student-mode check, the learner's collector and the tests' reader
    all see the same calls, where they used to disagree."""
    from course.probing import practice

    source = ('course.checks.check("topic.a", f)\ncheck("topic.b", g, hidden=False)\ncheck(name, f)\n'
              '### BEGIN HIDDEN TESTS\ncheck("topic.a", f, hidden=True)\n### END HIDDEN TESTS\n')
    assert judge.checks_in_source(source) == [("topic.a", False), ("topic.b", False), ("topic.a", True)]
    assert learner._visible_checks(source) == [("topic.a", "f"), ("topic.b", "g")]
    cell_file = tmp_path / "cell.py"
    cell_file.write_text(source)
    assert practice._check_lines(str(cell_file), {}) == [1, 2, 5]


def test_the_judge_and_a_students_run_use_this_module():
    from course.probing import practice

    assert judge.checks_in_source is cells.checks_in_source and judge.hidden_lines is cells.hidden_lines
    assert practice.check_calls is cells.check_calls


# ---------------------------------------------------------- hidden tests ---

CELL = (f'check("topic.a", f)\n### {HIDDEN_BEGIN}\ncheck("topic.a", f, hidden=True)\n\n'
        f'    check("topic.b", g, hidden=True)\n### {HIDDEN_END}\nprint("done")\n')


def test_hidden_lines_are_the_stripped_lines_of_each_block_markers_included():
    assert hidden_lines(CELL) == {f"### {HIDDEN_BEGIN}", 'check("topic.a", f, hidden=True)',
                                  'check("topic.b", g, hidden=True)', f"### {HIDDEN_END}"}
    assert hidden_lines('check("topic.a", f)\n') == set()


def test_an_unclosed_hidden_block_hides_to_the_end_but_is_no_hidden_code():
    source = f'check("topic.a", f)\n# {HIDDEN_BEGIN}\ncheck("topic.a", f, hidden=True)\n'
    assert hidden_lines(source) == {f"# {HIDDEN_BEGIN}", 'check("topic.a", f, hidden=True)'}
    assert hidden_code(source) == ""


def test_an_end_marker_outside_a_block_is_ignored():
    assert hidden_lines(f"x = 1\n# {HIDDEN_END}\n") == set()


def test_hidden_code_is_the_dedented_code_between_the_markers_of_each_closed_block():
    """Each block is dedented on its own (the lint dedented them together: an IndentationError
    when one block sat in a loop and another did not)."""
    assert hidden_code(CELL) == 'check("topic.a", f, hidden=True)\n\n    check("topic.b", g, hidden=True)'
    indented = (f'for f in fs:\n    ### {HIDDEN_BEGIN}\n    check("topic.a", f, hidden=True)\n    ### {HIDDEN_END}\n'
                f'### {HIDDEN_BEGIN}\ncheck("topic.b", g, hidden=True)\n### {HIDDEN_END}\n')
    assert checks_in_source(hidden_code(indented)) == [("topic.a", True), ("topic.b", True)]


def test_a_marker_is_recognised_wherever_it_is_on_its_line():
    """As nbgrader reads it (the lint used to want ``### `` in front)."""
    source = f'# {HIDDEN_BEGIN}\ncheck("topic.a", f, hidden=True)\n# {HIDDEN_END}\n'
    assert checks_in_source(hidden_code(source)) == [("topic.a", True)]


# ------------------------------------------------------------- solutions ---

def test_solution_markers_are_removed_wherever_they_are_indented():
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    assert cells.without_solution_markers(source) == "def f(x):\n    return x"
    assert cells.without_solution_markers("x = 1  # ### BEGIN SOLUTION") == "x = 1  # ### BEGIN SOLUTION"


def test_exported_code_joins_the_exported_cells_without_markers():
    nb = nbformat.v4.new_notebook(cells=[
        code("import math", tags=("export",)),
        code("print('demo')"),
        code("### BEGIN SOLUTION\ndef f():\n    return 1\n### END SOLUTION\n", tags=("export",), solution=True),
        code("### BEGIN SOLUTION\n### END SOLUTION", tags=("export",)),
        markdown("text tagged export"),
    ])
    nb.cells[-1].metadata["tags"] = ["export"]
    assert cells.exported_code(nb) == "import math\n\n\ndef f():\n    return 1\n"
    assert cells.exported_code(nbformat.v4.new_notebook()) == "\n"


# ------------------------------------------------------------ cell kinds ---

@pytest.mark.parametrize("cell,test,answer,written,exported", [
    (code("check('topic.a', f)", grade=True, solution=False, locked=True, points=1), True, False, False, False),
    (code("### BEGIN SOLUTION", tags=("export",), grade=False, solution=True), False, True, False, True),
    (markdown("YOUR ANSWER HERE", grade=True, solution=True, points=2), False, True, True, False),
    (code("x", grade=True, solution=True, points=2), False, True, True, False),
    (markdown("a test?", grade=True, solution=False), False, False, False, False),
    (code("import torch", tags=("export",)), False, False, False, True),
    (code("import torch", locked=True), False, False, False, False),
    (code("print(1)"), False, False, False, False),
])
def test_cell_kinds_come_from_nbgraders_metadata(cell, test, answer, written, exported):
    assert (cells.is_test_cell(cell), cells.is_answer_cell(cell), cells.is_written_answer(cell),
            cells.is_exported(cell)) == (test, answer, written, exported)


def test_grade_id():
    assert cells.grade_id(code(grade=True)) == "c"
    assert cells.grade_id(code()) is None


def test_chapter_id():
    assert cells.CHAPTER_ID.match("04_attention").groups() == ("04", "attention")
    assert not cells.CHAPTER_ID.match("4_attention") and not cells.CHAPTER_ID.match("04_Attention")


# ----------------------------------------------------------- the module ---

def test_course_imports_nothing_of_the_autograder_and_this_module_nothing_heavy():
    code_ = ("import sys, course.cells, course.learner\n"
             "assert not [m for m in sys.modules if m.split('.')[0] == 'autograder'], 'autograder imported'\n")
    subprocess.run([sys.executable, "-c", code_], check=True)
    light = ("import sys, course.cells\n"
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'numpy', 'nbgrader', 'nbformat'}))\n")
    out = subprocess.run([sys.executable, "-c", light], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("source,found", [
    ("def softmax(x, dim):\n    return torch.softmax(x, dim)\n", ["torch.softmax", "torch.Tensor.softmax"]),
    ("def softmax(x, dim):\n    return x.softmax(dim)\n", ["torch.softmax", "torch.Tensor.softmax"]),
    ("import torch.nn.functional as F\n\ndef f(x):\n    return F.softmax(x, -1)\n",
     ["torch.softmax", "torch.Tensor.softmax"]),
    ("from torch import softmax as s\n\ndef f(x):\n    return s(x, -1)\n", ["torch.softmax", "torch.Tensor.softmax"]),
    ("def softmax(x, dim):\n    e = (x - x.max(dim, keepdim=True).values).exp()\n"
     "    return e / e.sum(dim, keepdim=True)\n\n\ny = softmax(torch.ones(3), 0)\n", []),
    ("this is not python(", []),
    ("from course.reference.attention import softmax\n\ny = softmax(torch.ones(3), 0)\n", []),  # the course's own
    ("from course.reference.attention import softmax\nfrom torch import softmax as s\n",
     ["torch.softmax", "torch.Tensor.softmax"]),
])
def test_uses_of_finds_a_named_function_whatever_its_alias_but_not_the_students_own(source, found):
    assert cells.uses_of(source, ["torch.softmax", "torch.Tensor.softmax"]) == found


def test_the_solutions_name_no_function_their_checks_forbid_and_a_forbidden_call_is_flagged():
    """The judge flags a notebook that names a function its checks forbid (for a person to read):
    never the solution notebooks; one calling torch.softmax, or a private alias, anywhere, yes."""
    from autograder.chapters import all_chapters

    for ch in all_chapters():
        nb = nbformat.read(ch.solution, as_version=4)
        released = {c.source for c in nbformat.read(ch.student, as_version=4).cells}  # the judge leaves these out
        code = [c.source for c in nb.cells if c.cell_type == "code" and not cells.is_test_cell(c)
                and c.source not in released]
        for cell in (c for c in nb.cells if cells.is_test_cell(c)):
            assert judge.forbidden_uses(cell.source, code) == [], (ch.id, cells.grade_id(cell))
    test = 'check("attention.softmax", softmax)'
    assert "torch.softmax" in judge.forbidden_uses(test, ["x = 1",
                                                          "def softmax(x, dim):\n    return torch.softmax(x, dim)"])
    assert "torch.softmax" in judge.forbidden_uses(test, ["_sm = torch.softmax", "softmax = lambda x, d: _sm(x, d)"])
    assert "torch.softmax" in judge.forbidden_uses(test, ["def softmax(x, d):\n    return torch._softmax(x, d, False)"])
    assert "torch.softmax" in judge.forbidden_uses(test, ["f = torch.ops.aten.something"])
    assert "torch.softmax" in judge.forbidden_uses(test, ['f = getattr(torch, "soft" + "max")'])
    assert "torch.softmax" in judge.forbidden_uses(test, ['import torch as t\nf = getattr(t.special, "soft" + "max")'])
    assert judge.forbidden_uses(test, ["w = [getattr(head, name).weight for head in heads]"]) == []
    assert judge.forbidden_uses('check("introduction.linear_rows", f)', ["def softmax(x, d):\n    return x"]) == []
