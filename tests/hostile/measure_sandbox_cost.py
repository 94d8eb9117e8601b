"""Per-submission grading time with the sandbox on and off.

    /tmp/venv/bin/python tests/hostile/measure_sandbox_cost.py [N]

Grades N (default 4) copies of the honest, fully solved 00_introduction
notebook twice, with and without ``--unsafe-no-sandbox``, and prints the
time each notebook's run took (from the status notes `GuardedExecute`
writes: kernel start, every cell, judge) and each ``grade`` run's total.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: submissions, hostile

from hostile.cases import CH  # noqa: E402
from submissions import solved, write  # noqa: E402


def measure(submissions: Path, out: Path, *extra: str) -> tuple[float, list[float]]:
    """grade's wall time, and each notebook's run time, in seconds."""
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out), *extra],
                   check=True, capture_output=True)
    total = time.monotonic() - start
    notes = sorted((out / "nbgrader" / "status").glob("*.json"))
    return total, [json.loads(p.read_text())["seconds"] for p in notes]


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for i in range(n):
            write(solved(CH), base / "submitted", f"student-{i}", CH)
        for label, extra in (("sandbox on ", ()), ("sandbox off", ("--unsafe-no-sandbox",))):
            total, each = measure(base / "submitted", base / label.strip().replace(" ", "-"), *extra)
            print(f"{label}: {statistics.mean(each):5.2f} s per notebook "
                  f"(min {min(each):.2f}, max {max(each):.2f}); grade run {total:.1f} s for {n}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
