"""The course's grading secret: it seeds every student's hidden test cases.

Each submission's hidden cases come from the secret, the student id and the
chapter (`course.checks.framework.seed_for`), so they are unpredictable
without the secret and the same at every regrade with it. The secret
belongs to the course, not to one grading run: grading the same class
again, into any --out folder, gives the same grades as long as the secret
is the same file.

Where it is: ``grade --secret FILE``, else the file named by the
environment variable `course.protocol.SECRET_ENV` (COURSE_GRADING_SECRET),
else `DEFAULT_SECRET` under the user's configuration folder
(``$XDG_CONFIG_HOME`` or ``~/.config``). It is created there, private to
its owner, the first time it is needed; keep it, and keep it private:
with it, anyone can compute the hidden cases.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from course.protocol import SECRET_ENV

DEFAULT_SECRET = Path("transformer-course") / "grading-secret"
SECRET_BYTES = 32


def default_secret_path() -> Path:
    """Where the course's secret is when --secret does not say."""
    if os.environ.get(SECRET_ENV):
        return Path(os.environ[SECRET_ENV]).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config) / DEFAULT_SECRET


def course_secret(path: Path | None = None) -> Path:
    """The grading secret's file (default: `default_secret_path`); made, with
    mode 0600, if it does not exist yet. Raises SystemExit if it is unusable."""
    path = (path or default_secret_path()).absolute()
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(SECRET_BYTES))
        print(f"created the course's grading secret: {path}\n"
              "  Keep this file, and keep it private: every regrade needs it to give the same grades.",
              file=sys.stderr)
    if not path.is_file() or path.stat().st_size == 0:
        raise SystemExit(f"the grading secret {path} is not a file with a secret in it")
    return path
