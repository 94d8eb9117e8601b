import os
import sys
import tempfile
from pathlib import Path

# `make test` runs two workers on two cores. With torch's default (one thread per core, each spinning
# while it waits) in both, every in-process test and every grading kernel beside them ran about six
# times slower (a chapter's student-mode test: 376 s against 58 s, two side by side on this 2-core
# machine). One thread per worker, set before torch is imported; a run on its own keeps the default.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"

import pytest

from course.protocol import SECRET_ENV

sys.path.insert(0, str(Path(__file__).parent))  # tests/submissions.py and tests/mutants/

# Grading runs in the tests use a secret of their own, never the instructor's
# (~/.config/transformer-course/grading-secret); `grade` creates it on first use.
os.environ.setdefault(SECRET_ENV, str(Path(tempfile.mkdtemp(prefix="course-tests-")) / "grading-secret"))

_DEEPEST_KEPT = 64  # folders below this depth in a test's tmp folder are cut at the end of the session


def _cut_deep_chains(top: Path, depth: int = 0) -> None:
    """Remove every folder deeper than `_DEEPEST_KEPT` below `top`, without recursion at the cut."""
    from autograder.cleanup import remove_tree

    with os.scandir(top) as entries:
        folders = [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    for folder in folders:
        if depth >= _DEEPEST_KEPT:
            remove_tree(folder)
        else:
            _cut_deep_chains(folder, depth + 1)


@pytest.fixture(scope="session", autouse=True)
def _no_deep_chains_left(tmp_path_factory):
    """The hostile tests build folder chains thousands deep; pytest later deletes old tmp folders
    with a recursive rmtree that dies on them (RecursionError), so each session cuts its own."""
    yield
    _cut_deep_chains(tmp_path_factory.getbasetemp())


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Keep each `xdist_group` on one worker under `--dist loadgroup`. pytest-xdist 3.8 names an
    item's group by rewriting `item._nodeid`, which pytest 9 no longer reads (an item's id is
    `item._id`), so every group was spread over both workers: each worker built the book, graded the
    hostile batch and waited on the other's chapter gradings. This names the group in the id the
    scheduler reads (`nodeid@group`), as pytest-xdist means to."""
    from _pytest.nodeid import NodeId

    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                 for m in item.iter_markers("xdist_group")}
        suffix = "@" + "_".join(sorted(names))
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)
