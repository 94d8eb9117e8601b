"""The course's instructor and student tooling: ``python -m autograder``.

- `release`: solutions/ -> chapters/ and course/reference/ (nbgrader generate_assignment)
- `selfcheck`: a student's check of their notebook's visible tests
- `collect`: LMS zip exports -> nbgrader's submitted/ layout
- `grade`: autograde a class (nbgrader autograde, the `judge`, the `sandbox`)
"""
