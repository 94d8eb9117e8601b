"""Points only for work: answers that do nothing earn nothing, in every chapter.

For every answer cell, `degenerate.degenerate_answers` makes a family of answers from its reference
that keep its names and signatures and do none of its work (always raising ValueError or TypeError;
returning None, the input, a copy of it, or zeros, ones or random values of the right shape; a module
whose forward returns its input, an optimizer whose step does nothing). Each must score zero on every
test cell that checks the cell's objects, judged as the grader judges (`submissions.verdicts`, with
guards counted by `course.protocol.counted`).
"""

from __future__ import annotations

import ast

import pytest

from autograder.chapters import all_chapters
from course.cells import without_solution_markers
from degenerate import KINDS, degenerate
from submissions import (Bank, as_module, cell_fraction, cells_of, grader_seeds, solution_sources, student_notebook,
                         verdicts)

SEEDS = 1  # a degenerate answer fails on what every draw holds (the mutants' test covers many draws)


def defined_names(source: str) -> set[str]:
    return {n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def answer_cells():
    for ch in all_chapters():
        for gid, source in solution_sources(ch).items():
            try:
                names = defined_names(source)
            except SyntaxError:  # a written answer
                continue
            if names:
                yield pytest.param(ch, gid, id=f"{ch.id}-{gid}")


@pytest.mark.parametrize("ch,gid", list(answer_cells()))
def test_answers_that_do_no_work_score_zero(ch, gid):
    answers = solution_sources(ch)
    names = defined_names(answers[gid])
    tested = {cell: calls for cell, calls in cells_of(ch).items() if any(c.obj in names for c in calls)}
    assert tested, f"no test cell checks what {gid} defines"
    bank, earned = Bank(hints=False), []
    for kind in KINDS:
        source = degenerate(without_solution_markers(answers[gid]), kind)
        module = as_module(student_notebook(ch, {**answers, gid: source}), f"degenerate_{ch.topic}")
        for seed in grader_seeds(ch, SEEDS):
            for cell, calls in tested.items():
                judged = verdicts(calls, module, seed, bank)
                if cell_fraction(judged) > 0:
                    passed = [v.record["check"] + (" (hidden)" if v.record["hidden"] else "") for v in judged
                              if v.passed]
                    earned.append(f"{kind}: {cell} earned {cell_fraction(judged):.2f} ({', '.join(passed)})")
    assert not earned, "answers that do no work earned points:\n" + "\n".join(sorted(set(earned)))
