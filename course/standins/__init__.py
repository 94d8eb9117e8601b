"""Stand-ins: what a chapter needs of an earlier chapter whose answers are not published yet.

Later chapters build on earlier ones (`course.reference.<topic>`): chapter 7's encoder layer holds
chapter 5's `MultiHeadAttention`, chapter 11's grouped-query attention calls chapter 4's
`scaled_dot_product_attention`. A student edition holds a chapter's reference answers only once the
chapter is due (plus the longest extension), and so does the sandbox a notebook is graded in. Until
then `course/reference/<topic>.py` is the stand-in `shim(topic)`: it imports the module of the same
name here, which has the same names, signatures, parameters and behaviour, but holds no answer:

* each is written on PyTorch's own functions that its own exercise forbids (`torch.softmax`,
  `F.layer_norm`, `F.embedding`, ...), so that copied into an answer it earns nothing there
  (tests/test_standins.py grades each as its exercise's answer), and shares no line with the answer
  (the edition's audit reads them as it reads every published file);
* the course's own calls are not the student's: a forbidden function that a stand-in calls while a
  student's code runs is allowed (`course.probing.runner.watching`), so a chapter built on a stand-in
  is graded as on the answers.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def topics() -> list[str]:
    """The chapter topics that have a stand-in."""
    return sorted(p.stem for p in HERE.glob("*.py") if p.name != "__init__.py")


def shim(topic: str) -> str:
    """The text of `course/reference/<topic>.py` while the chapter's answers are not published."""
    return (f'"""Stand-in for the answers of the chapter on {topic.replace("_", " ")}: they are published once '
            "that chapter is due.\n\n"
            f"This module holds the same names, built on PyTorch's own functions (course/standins/{topic}.py);\n"
            'your own exercises in that chapter are yours to write."""\n'
            f"from course.standins.{topic} import *  # noqa: F401,F403\n"
            f"from course.standins.{topic} import __all__  # noqa: F401\n")
