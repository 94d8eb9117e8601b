"""Names shared by the grader, the sandbox, the kernel and the judge.

Everything that crosses a process boundary while a notebook is graded is
named here once: environment variables, folder and file names, and the
partial-credit rule. This module lives in `course` (not `autograder`)
because the sandboxed kernel can import only the `course` package. It holds
constants and small pure functions only, and imports nothing.

The pieces, and who uses which:

* the grader (``autograder``) makes the probe folder (`PROBE_DIRNAME`) next
  to each notebook and writes there, per check, the cases its test cells
  run (`cases_name`): inputs only, made from the secret outside the sandbox;
  it also lays out the nbgrader course folder (`STATUS_DIR`,
  `SOCKETS_DIR`, ...) and names kernels (`kernel_name`);
* the kernel (``course.probing`` inside the sandbox) reads `PROBE_DIR_ENV`,
  runs the student's objects on those cases and writes one `record_name`
  file of raw results per check; `BOOK_ENV` changes how failures show;
* the judge (``autograder.judge``) reads the records back and scores each
  test cell with `cell_score`.
"""

from __future__ import annotations

# ------------------------------------------------- kernel <-> judge ---

#: set by the grader: the folder (relative to the notebook) where checks record results
PROBE_DIR_ENV = "COURSE_PROBE_DIR"
#: set while the book is built: failing checks print instead of raising
BOOK_ENV = "COURSE_BOOK_BUILD"
#: the probe folder's name, next to the notebook being graded
PROBE_DIRNAME = ".course-probes"
#: nbgrader's markers around hidden tests in a test cell
HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


#: in the probe folder when the instructor lets forbidden functions run (only noted, no points taken):
#: `grade --forbidden-calls flag`; without it they raise while a check runs (the default)
ALLOW_FORBIDDEN_FILE = "forbidden-calls-allowed"


def cases_name(name: str, hidden: bool) -> str:
    """The file (in the probe folder) holding the cases of check `name` the grader hands in."""
    return f"{name}.{'hidden' if hidden else 'visible'}.cases.json"


def record_name(name: str, hidden: bool) -> str:
    """The file (in the probe folder) where check `name` records its results."""
    return f"{name}.{'hidden' if hidden else 'visible'}.json"


def cell_score(points: float, passed: int, total: int) -> float:
    """A test cell's score: its points shared equally by the checks it calls."""
    if total == 0 or passed == 0:
        return 0.0
    if passed == total:
        return float(points)
    return round(points * passed / total, 2)


def counted(checks: list[tuple[bool, bool]]) -> list[bool]:
    """Which of a test cell's checks count as passed, from each one's ``(passed, guard)``.

    A guard checks an error path or a property that an answer doing no work can meet (raising
    ValueError for a bad argument, a parameter table, lengths kept): it counts only when every
    other check of the cell passes, so that an answer that always raises, or returns its input,
    earns nothing. A cell of guards only counts them as they are."""
    results_right = all(passed for passed, guard in checks if not guard)
    return [passed and (results_right or not guard) for passed, guard in checks]


# ---------------------------------------------------- the instructor ---

#: the grading secret's file (it seeds every student's hidden cases), if not given with --secret
SECRET_ENV = "COURSE_GRADING_SECRET"


# ------------------------------ the nbgrader course folder (OUT/nbgrader) ---

#: nbgrader's configuration, written by the grader for each chapter
CONFIG_FILE = "nbgrader_config.json"
#: what happened while each notebook ran (`status_name`), the grader's input stamps (`stamp_name`), and
#: the judge's verdicts as data (`verdicts_name`): the grader's own, never in a student's folder
STATUS_DIR = "status"
#: one private folder per kernel for its IPC sockets (the sandbox has no network)
SOCKETS_DIR = "sockets"
#: JUPYTER_PATH of nbgrader's processes: the grading kernelspecs are in its kernels/
JUPYTER_DIR = "jupyter"
#: JUPYTER_RUNTIME_DIR of nbgrader's processes: connection files, private to the grader
RUNTIME_DIR = "runtime"
#: per chapter, the copy of the `course` package its sandbox sees (LIB_DIR/<chapter>/course)
LIB_DIR = "lib"


def kernel_name(assignment: str) -> str:
    """The kernelspec a chapter's notebooks are graded in."""
    return f"course-{assignment}"


def status_name(student: str, assignment: str) -> str:
    """The file (in `STATUS_DIR`) noting how one notebook's run went."""
    return f"{student}--{assignment}.json"


def verdicts_name(student: str, assignment: str) -> str:
    """The file (in `STATUS_DIR`) where the judge records its verdict on every check of one
    notebook's test cells, as data (`autograder.judge.JudgeChecks`; the instructor's report reads it)."""
    return f"{student}--{assignment}.verdicts.json"


def stamp_name(student: str, assignment: str) -> str:
    """The file (in `STATUS_DIR`) holding the key of the inputs a notebook was last graded with."""
    return f"{student}--{assignment}.input"


def source_stamp_name(assignment: str) -> str:
    """The file (in nbgrader's source/) holding the digest of the instructor files last released."""
    return f".{assignment}.sha256"
