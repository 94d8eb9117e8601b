"""The checks' half that runs beside a student's code, and holds no answer.

A test cell's ``check("topic.name", obj)`` has two halves. The trusted one,
`course.checks`, makes the cases and knows the answers (oracles, known
mistakes); it lives only on the instructor's side. This one is what a
sandboxed kernel and a student's own run may hold:

* `cases`: cases as data (what the grader hands a kernel);
* `runner`: each check's `Probe` (how to call the student's object on a
  case), running the cases and recording raw outputs (`plain`);
* `calls`: the probes of every chapter, one module per chapter topic;
* `kit`: helpers probes share to build and run a student's module;
* `verdicts`: comparisons, known mistakes and reports, one implementation
  for the grader's judge and a student's own run;
* `practice`: a student's own run, judged against the visible answers the
  release wrote as data (``course/visible/``).
"""
