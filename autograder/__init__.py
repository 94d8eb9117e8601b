"""The course's instructor and student tooling: ``python -m autograder``.

- `release`: solutions/ -> chapters/ and course/reference/ (nbgrader generate_assignment)
- `selfcheck`: a student's check of their notebook's visible tests
- `collect`: LMS zip exports -> nbgrader's submitted/ layout
- `grade`: autograde a class. Its parts: `intake` (check and repair each
  notebook), `course_folder` (nbgrader's course folder), `nbconfig` and
  `nbgrader_commands` (nbgrader's configuration and commands), `execute`,
  `sandbox` and `judge` (run a notebook, decide its verdicts), `limits`,
  `secret` and `fingerprint` (what a grade depends on), `results` (the CSVs),
  `pool` and `worker` (students graded in parallel by long-lived nbgrader
  processes), `gradebook` (SQLite or any database, shared by shards),
  `shards` (`--shard I/N` and `merge`), `report` (the instructor's report),
  `late` and `schedule` (due dates), `manual` (the formgrader), `lms` (export)

Names shared with the student side (the sandboxed kernel) are in
`course.protocol`.
"""
