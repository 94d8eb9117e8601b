"""Chapters' check modules load one at a time: a broken one (an import-time
error, a check registered twice) breaks only its own chapter's test cells,
not another chapter's self-check or grading."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

from autograder.chapters import ROOT

BROKEN = {
    "attention.py": "raise RuntimeError('a bug in chapter 4 checks')\n",
    "embedding.py": textwrap.dedent("""\
        from .framework import Check, register
        register(__name__, Check("twice", cases=list, expected=id), Check("twice", cases=list, expected=id))
        """),
}

SCRIPT = textwrap.dedent("""\
    import tempfile
    from pathlib import Path

    from autograder.judge import cell_verdict
    from course.checks import check, framework
    from course.checks.framework import CheckUnavailable
    from course.probing.plain import encode
    from course.protocol import record_name
    from course.reference.introduction import linear_rows

    assert framework.__file__.startswith(LIB), framework.__file__  # the broken copy is the one in use

    # student mode: chapter 0's test cell still passes; chapter 4's says why it cannot run
    check("introduction.linear_rows", linear_rows)
    for name in ("attention.softmax", "embedding.twice"):
        try:
            check(name, print)
        except CheckUnavailable as err:
            print("unavailable:", err)
        else:
            raise SystemExit(name + " should be unavailable")

    # grading: the judge credits chapter 0's recorded results, and reports the broken chapter
    probe = Path(tempfile.mkdtemp())
    intro = framework.get_check("introduction.linear_rows")
    entries = framework.student_entries(intro, linear_rows, intro.make_cases(False))
    (probe / record_name("introduction.linear_rows", False)).write_text(encode(entries))
    good = cell_verdict('check("introduction.linear_rows", linear_rows)', 2.0, probe, None)
    assert len(good) == 1 and good[0].text.startswith("✓"), good
    bad = cell_verdict('check("attention.softmax", softmax)', 2.0, probe, None)
    assert bad[-1].output_type == "error" and "could not be loaded" in bad[0].text, bad
    print("isolated")
    """)


def test_a_broken_chapter_module_breaks_only_its_own_checks(tmp_path):
    lib = tmp_path / "lib"
    shutil.copytree(ROOT / "course", lib / "course", ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in BROKEN.items():
        (lib / "course" / "checks" / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": f"{lib}{os.pathsep}{ROOT}"}
    env.pop("COURSE_PROBE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", f"LIB = {str(lib)!r}\n" + SCRIPT], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "✓ introduction.linear_rows" in proc.stdout
    assert "a bug in chapter 4 checks" in proc.stdout and "registered twice" in proc.stdout
    assert proc.stdout.rstrip().endswith("isolated")
