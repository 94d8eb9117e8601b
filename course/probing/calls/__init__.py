"""The probes of every chapter: one module per chapter topic
(``course.probing.calls.<topic>``), registering a `Probe` for each of the
chapter's checks, under the same name. A probe says how to call the
student's object on a case and nothing else: it holds no expected answer,
and its calls return the student's raw outputs."""
