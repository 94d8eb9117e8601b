"""One grading worker: ``python -m autograder.worker ROOT``, started by `pool`.

It imports nbgrader (and torch, for the judge) once, then grades one
student at a time with nbgrader's own Python API (`NbGraderAPI.autograde`,
`NbGraderAPI.generate_feedback`, what the formgrader uses) in the course
folder ROOT, with the configuration `grade` wrote there for the chapter,
read again for every task. Tasks come on stdin and results go to stdout,
one JSON object a line::

    {"chapter": "04_attention", "student": "alice", "autograde": true}
    {"student": "alice", "problem": null, "feedback": true}

`problem` says in plain words why nbgrader could not grade the notebook.
Anything else written to stdout (by nbgrader, a library) goes to stderr,
which `pool` sends to a log file.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from course.protocol import CONFIG_FILE

#: a traceback's last line: the exception that stopped nbgrader (indented in nbgrader's log, whose
#: formatter indents every line of a message after its first)
_EXCEPTION = re.compile(r"^\s*[\w.]+(Error|Exception|Exit|Interrupt)\b.*$", re.M)


def _problem(result: dict) -> str:
    """What went wrong, from nbgrader's captured log and traceback."""
    text = f"{result.get('log', '')}\n{result.get('error', '')}"
    causes = [m.group(0) for m in _EXCEPTION.finditer(text) if "NbGraderException" not in m.group(0)]
    if causes:
        return f"nbgrader autograde failed: {causes[0].strip()}"[:200]
    errors = [ln for ln in text.splitlines() if ln.startswith("[ERROR]")]
    return (errors[0][len("[ERROR] "):] if errors else "nbgrader autograde failed")[:200]


def run_task(root: Path, task: dict) -> dict:
    """Autograde (unless only feedback is asked for) and give feedback to one student."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import JSONFileConfigLoader

    config = JSONFileConfigLoader(CONFIG_FILE, path=str(root)).load_config()
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    chapter, student = task["chapter"], task["student"]
    if task["autograde"]:
        result = api.autograde(chapter, student, force=True, create=True)
        if not result["success"]:
            print(f"{chapter} {student}: nbgrader autograde failed\n{result.get('log', '')}\n{result.get('error', '')}",
                  file=sys.stderr)  # the whole story, in the pool's log
            return {"student": student, "problem": _problem(result), "feedback": False}
    feedback = api.generate_feedback(chapter, student, force=True)
    return {"student": student, "problem": None, "feedback": bool(feedback["success"])}


def main(argv: list[str] | None = None) -> None:
    root = Path((argv or sys.argv[1:])[0])
    results = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not garble the results
    for line in sys.stdin:
        task = json.loads(line)
        try:
            result = run_task(root, task)
        except Exception as err:  # one student's failure stays theirs: the worker goes on
            result = {"student": task["student"], "problem": f"grading failed: {type(err).__name__}: {err}"[:200],
                      "feedback": False}
        results.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
