"""Checks for every exercise; a test cell runs ``check("topic.name", obj)``.

Each chapter has one module here (``course.checks.<topic>``) that registers
its checks (cases, oracle, known mistakes); it is imported when one of its
checks is first used, so a broken chapter module breaks only that chapter.
`framework` is the harness and the judge, `kit` the helpers chapter modules
share. The kernel's half of every check (how the student's object is
called) is in `course.probing`.

Under the autograder the sandboxed kernel sees this file but none of the
modules beside it: `check` then only records (`course.probing.runner`), and
imports nothing that knows an answer. In a student's own run it judges the
visible checks against the answers the release shipped as data
(`course.probing.practice`).
"""

from __future__ import annotations

import sys
from typing import Any

from course.probing import practice, runner


def check(name: str, obj: Any, *, hidden: bool = False) -> None:
    """Run (or, under the autograder, record) the check ``"topic.name"`` on `obj`."""
    __tracebackhide__ = True
    with runner.checking_state():
        probe = runner.probe_dir()
        if probe is not None:
            runner.record(name, obj, hidden, probe)
        else:
            practice.check_here(name, obj, hidden, sys._getframe(1))


__all__ = ["check"]
