"""The course's importable code.

- `course.checks`: the tests behind every exercise (``check("name", obj)``).
- `course.reference`: the reference solutions, generated from solutions/ by
  ``python -m autograder release`` (never edit by hand). Later chapters
  import earlier chapters' pieces from here.
- `course.notebook`: small helpers the chapter notebooks share (figures,
  widgets, falling back to the reference until an exercise is solved).
"""
