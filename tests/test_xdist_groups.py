"""`make test` runs two workers with `--dist loadgroup`: each `xdist_group` must stay on one worker
(a chapter's class is graded once, the book built once). pytest-xdist 3.8 names the group in a way
pytest 9 ignores; tests/conftest.py names it again. A toy suite shows where its tests ran."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

TOY = '''
import os
import pytest

pytestmark = pytest.mark.xdist_group("{group}")


@pytest.mark.parametrize("i", range(4))
def test_{group}(i):
    print(os.environ["PYTEST_XDIST_WORKER"])
'''


def test_each_group_runs_on_one_worker(tmp_path):
    for group in ("a", "b"):
        (tmp_path / f"test_{group}.py").write_text(TOY.format(group=group))
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-n", "2", "--dist",
                           "loadgroup", "-c", str(tmp_path / "pytest.ini"), str(tmp_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran = re.findall(r"\[(gw\d)\] .*PASSED .*test_(\w)\.py::test_\w\[\d\]@(\w)", proc.stdout)
    assert len(ran) == 8 and all(file == group for _, file, group in ran), proc.stdout
    workers = {group: {w for w, _, g in ran if g == group} for group in ("a", "b")}
    assert all(len(w) == 1 for w in workers.values()), workers
