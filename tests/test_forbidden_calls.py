"""Functions an exercise forbids are detected where they run, not by their names.

`course.probing.runner.watching` sees every PyTorch function the student's code calls while a check
runs, by what is called: a name computed at run time, a reference kept from before the check, an
alias. By default (``forbidden_calls: refuse``) such a call raises and the case fails, naming it; with
``forbidden_calls: flag`` it runs and is only noted, for a person to read.
"""

from __future__ import annotations

import types

import pytest
import torch

from autograder import judge
from course.checks import framework
from course.probing import runner
from course.probing.cases import carried
from course.probing.plain import encode
from course.protocol import record_name

SOFTMAX = "attention.softmax"
WAYS = {
    "computed name": 'return vars(torch)["soft" + "max"](x, dim)',
    "kept reference": "return _kept(x, dim)",
    "alias": "return torch._C._VariableFunctions.softmax(x, dim)",
    "method": "return x.softmax(dim)",
    "functional": "return torch.nn.functional.softmax(x, dim)",
}


def answer(body: str) -> types.FunctionType:
    namespace = {"torch": torch, "_kept": torch.softmax}
    exec(f"def softmax(x, dim=-1):\n    {body}\n", namespace)
    return namespace["softmax"]


def judged(fn, refuse: bool):
    check_ = framework.get_check(SOFTMAX)
    cases = check_.make_cases(True, 11)
    entries = runner.run_student(check_.probe, fn, carried(cases), refuse)
    return framework.judge_record(SOFTMAX, True, 11, encode(entries))


@pytest.mark.parametrize("way", sorted(WAYS))
def test_a_forbidden_function_is_refused_however_it_is_reached(way):
    verdict = judged(answer(WAYS[way]), refuse=True)
    assert not verdict.passed and "is not allowed in this exercise" in verdict.text
    assert verdict.record["reached"], verdict.record


@pytest.mark.parametrize("way", sorted(WAYS))
def test_with_the_flag_policy_it_runs_and_is_noted_for_a_person(way, tmp_path):
    verdict = judged(answer(WAYS[way]), refuse=False)
    assert verdict.passed, verdict.text
    assert verdict.record["reached"], verdict.record
    note = judge.forbidden_note(f'check("{SOFTMAX}", softmax, hidden=True)', [], [verdict.record])
    assert "your code called" in note and "took no points" in note


def test_an_honest_answer_reaches_nothing():
    verdict = judged(answer("e = (x - x.amax(dim, keepdim=True)).exp()\n    return e / e.sum(dim, keepdim=True)"),
                     refuse=True)
    assert verdict.passed and verdict.record["reached"] == []


def test_the_grader_tells_the_kernel_the_policy(tmp_path, monkeypatch):
    """`PrepareProbes` leaves the policy in the probe folder; the kernel's `record` reads it there."""
    from course.protocol import ALLOW_FORBIDDEN_FILE
    fn = answer(WAYS["kept reference"])
    check_ = framework.get_check(SOFTMAX)
    for allowed in (False, True):
        framework.write_cases(tmp_path, [(SOFTMAX, False)], 11)
        (tmp_path / ALLOW_FORBIDDEN_FILE).unlink(missing_ok=True)
        if allowed:
            (tmp_path / ALLOW_FORBIDDEN_FILE).write_text("")
        runner.record(SOFTMAX, fn, False, tmp_path)
        verdict = framework.judge_record(SOFTMAX, False, 11, (tmp_path / record_name(SOFTMAX, False)).read_text())
        assert verdict.passed == allowed and verdict.record["reached"] == ["torch.softmax"], check_
