"""The Python code passes ruff with the repository's settings (pyproject.toml: line length 120,
pycodestyle and pyflakes); notebooks are linted by `release` (autograder/lint.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_the_code_passes_ruff():
    proc = ruff(".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_finds_what_the_settings_forbid(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import math\n\nx = '" + "a" * 130 + "'\nprint(undefined)\n")
    proc = ruff("--config", str(REPO / "pyproject.toml"), str(bad))
    assert proc.returncode == 1 and all(code in proc.stdout for code in ("F401", "E501", "F821")), proc.stdout
