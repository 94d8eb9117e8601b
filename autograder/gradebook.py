"""Which gradebook a grading run writes, and what shards sharing one must agree on.

nbgrader keeps scores in a gradebook it opens by SQLAlchemy URL
(``CourseDirectory.db_url``). By default that is SQLite in the course folder
(``OUT/nbgrader/gradebook.db``: nothing to set up); ``grade --db URL`` names
any other database nbgrader supports, such as PostgreSQL
(``postgresql://user@host/db``, through the psycopg driver). Several ``grade
--shard`` runs, on one machine or many, may share one gradebook: each writes
only its own students' submissions, and a chapter's release is written to the
gradebook under `setup_lock`, by the first shard to get there; the others
find it done (`release_recorded`).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
from nbgrader import utils

from .chapters import Chapter

if TYPE_CHECKING:
    from nbgrader.api import Gradebook


def open_gradebook(url: str) -> Gradebook:
    """nbgrader's Gradebook at `url`. Opening one runs the ``alembic`` command, so the one installed
    next to this Python goes first on PATH (a venv's python run without activating the venv)."""
    from nbgrader.api import Gradebook

    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"
    return Gradebook(url)


#: how long a grading worker waits for another's write to the SQLite gradebook (SQLite's own default, 5 s,
#: is not enough for a loaded machine: a worker that gives up fails its student's notebook)
SQLITE_WAIT_SECONDS = 120


def gradebook_url(root: Path, db: str | None = None) -> str:
    """The gradebook's SQLAlchemy URL: `db`, else SQLite in the course folder `root`."""
    return db or f"sqlite:///{root / 'gradebook.db'}?timeout={SQLITE_WAIT_SECONDS}"


def _lock_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


@contextmanager
def setup_lock(url: str, name: str) -> Iterator[None]:
    """Hold a lock named `name` that every grading run on this gradebook sees: a
    PostgreSQL advisory lock, or a lock file next to a SQLite database. Other
    databases get no lock: run concurrent shards on PostgreSQL."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        with open(f"{parsed.database}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
    elif parsed.get_backend_name() == "postgresql":
        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _lock_key(name)})
                try:
                    yield
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _lock_key(name)})
        finally:
            engine.dispose()
    else:
        yield


def release_recorded(url: str, ch: Chapter) -> bool:
    """Whether the gradebook holds the chapter's graded cells as its solution
    notebook has them now (ids, points, and the sources of test cells): then
    the release need not be written to the gradebook again (nbgrader would
    remove and re-add the notebook while another shard grades it)."""
    from nbgrader.api import MissingEntry

    nb = nbformat.read(ch.solution, as_version=4)
    want = {(c.metadata.nbgrader["grade_id"], float(c.metadata.nbgrader["points"]),
             None if utils.is_solution(c) else c.source) for c in nb.cells if utils.is_grade(c)}
    with open_gradebook(url) as gb:
        try:
            notebook = gb.find_notebook(ch.id, ch.id)
        except MissingEntry:
            return False
        answers = {c.name for c in notebook.solution_cells}  # their source in the gradebook is the stub
        sources = {c.name: c.source for c in notebook.source_cells}
        have = {(c.name, float(c.max_score), None if c.name in answers else sources.get(c.name))
                for c in notebook.grade_cells}
    return have == want
