"""Forgers that know nothing of a chapter: cells that try to earn a notebook's
points without solving anything, by writing the records the judge reads.

Each is added to a chapter's released notebook (whose stubs raise
NotImplementedError) and must score zero through the real grader, on every
chapter (`test_forgery`):

* ``rewrite-records`` (a last cell): rewrites every record from whatever
  the sandbox holds: the cases the grader handed in and, if it can import
  one, the checks' own oracle;
* ``oracle-check`` (a first cell): replaces ``check`` with a recorder of
  the oracle's answers on the cases handed in;
* ``contract-facts`` (a last cell): writes, for every case of every check,
  what the contract says the answer is in one fixed example (``{facts}``,
  the oracle's answer on the check's first visible case, filled in by the
  test): enough for any check whose answer is a fact that does not depend
  on the case (a mode, a count, a statistic of a masking).
"""

from __future__ import annotations

ORACLE = '''
def oracle_records(name, hidden):
    """[[the oracle's answer, the inputs], ...] on the cases handed in for `name`."""
    import importlib
    import os
    from pathlib import Path

    from course.probing.cases import decode_cases
    from course.probing.runner import inputs_snapshot
    from course.protocol import cases_name

    cases = decode_cases((Path(os.environ["COURSE_PROBE_DIR"]) / cases_name(name, hidden)).read_text())
    framework = importlib.import_module("course.checks.framework")  # the checks' trusted side, if it is here
    check_ = framework.get_check(name)
    return [[check_.expected(c), inputs_snapshot(c)] for c in cases]
'''

FORGERIES = {
    "rewrite-records": ORACLE + '''
import os
from pathlib import Path

from course.probing.plain import encode

probe = Path(os.environ["COURSE_PROBE_DIR"])
forged, failed = [], []
for path in sorted(probe.glob("*.cases.json")):
    topic, name, kind = path.name.split(".")[:3]
    try:
        records = oracle_records(f"{topic}.{name}", kind == "hidden")
    except Exception as err:
        failed.append(f"{topic}.{name}: {type(err).__name__}")
        continue
    (probe / f"{topic}.{name}.{kind}.json").write_text(encode(records))
    forged.append(f"{topic}.{name}")
print("forged:", forged, "failed:", failed)
''',
    "oracle-check": ORACLE + '''
import os
from pathlib import Path

import course.checks
from course.probing.plain import encode
from course.protocol import record_name


def forged_check(name, obj, *, hidden=False):
    probe = Path(os.environ["COURSE_PROBE_DIR"])
    (probe / record_name(name, hidden)).write_text(encode(oracle_records(name, hidden)))


course.checks.check = check = forged_check
''',
    "contract-facts": '''
import json
import os
from pathlib import Path

from course.probing.cases import decode_cases
from course.probing.plain import decode, encode
from course.probing.runner import inputs_snapshot

probe = Path(os.environ["COURSE_PROBE_DIR"])
facts = {{name: decode(text) for name, text in json.loads({facts!r}).items()}}
for path in sorted(probe.glob("*.cases.json")):
    topic, name, kind = path.name.split(".")[:3]
    if f"{{topic}}.{{name}}" in facts:
        cases = decode_cases(path.read_text())
        records = [[facts[f"{{topic}}.{{name}}"], inputs_snapshot(c)] for c in cases]
        (probe / f"{{topic}}.{{name}}.{{kind}}.json").write_text(encode(records))
''',
}
