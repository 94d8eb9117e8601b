"""Checks for every exercise; a test cell runs ``check("topic.name", obj)``.

Each chapter has one module here (``course.checks.<topic>``) that registers
its checks; it is imported when one of its checks is first used, so a
broken chapter module breaks only that chapter. `framework` is the harness,
`kit` the helpers chapter modules share, `plain` the data that travels from
a sandboxed kernel to the judge.
"""

from .framework import Case, Check, CheckUnavailable, Mistake, NOT_APPLICABLE, Raises, check, checks_of, get_check

__all__ = ["Case", "Check", "CheckUnavailable", "Mistake", "NOT_APPLICABLE", "Raises", "check", "checks_of",
           "get_check"]
