"""Chapters' check modules load one at a time: a broken one (an import-time
error, a check registered twice), on the trusted side (`course.checks`) or the
kernel's (`course.probing.calls`), breaks only its own chapter's test cells, not
another chapter's self-check or grading."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

from autograder.chapters import ROOT

BROKEN = {
    "checks/attention.py": "raise RuntimeError('a bug in chapter 4 checks')\n",
    "checks/embedding.py": textwrap.dedent("""\
        from .framework import Check, register
        register(__name__, Check("twice", cases=list, expected=id), Check("twice", cases=list, expected=id))
        """),
    "probing/calls/positional_encoding.py": "raise RuntimeError('a bug in chapter 3 probes')\n",
}

SCRIPT = textwrap.dedent("""\
    import tempfile
    from pathlib import Path

    from autograder.judge import cell_verdict
    from course.checks import check, framework
    from course.probing.plain import encode
    from course.probing.runner import CheckUnavailable
    from course.protocol import record_name
    from course.reference.introduction import linear_rows

    assert framework.__file__.startswith(LIB), framework.__file__  # the broken copy is the one in use

    # student mode: chapter 0's test cell still passes; chapter 3's says why it cannot run
    check("introduction.linear_rows", linear_rows)
    try:
        check("positional_encoding.sinusoidal_encoding", print)
    except CheckUnavailable as err:
        print("unavailable:", err)
    else:
        raise SystemExit("positional_encoding should be unavailable")

    # grading: the judge credits chapter 0's recorded results, and reports the broken chapters
    judge = lambda name, hidden, text: framework.judge_record(name, hidden, None, text)
    probe = Path(tempfile.mkdtemp())
    intro = framework.get_check("introduction.linear_rows")
    entries = framework.student_entries(intro, linear_rows, intro.make_cases(False))
    (probe / record_name("introduction.linear_rows", False)).write_text(encode(entries))
    good = cell_verdict('check("introduction.linear_rows", linear_rows)', 2.0, probe, judge)
    assert len(good) == 1 and good[0].text.startswith("✓"), good
    for source in ('check("attention.softmax", softmax)', 'check("embedding.one_hot", one_hot)'):
        bad = cell_verdict(source, 2.0, probe, judge)
        assert bad[-1].output_type == "error" and "could not be loaded" in bad[0].text, bad
        print(bad[0].text)
    print("isolated")
    """)


def test_a_broken_chapter_module_breaks_only_its_own_checks(tmp_path):
    lib = tmp_path / "lib"
    shutil.copytree(ROOT / "course", lib / "course", ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in BROKEN.items():
        (lib / "course" / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": f"{lib}{os.pathsep}{ROOT}"}
    env.pop("COURSE_PROBE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", f"LIB = {str(lib)!r}\n" + SCRIPT], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "✓ introduction.linear_rows" in proc.stdout
    assert "a bug in chapter 3 probes" in proc.stdout
    assert "a bug in chapter 4 checks" in proc.stdout and "registered twice" in proc.stdout
    assert proc.stdout.rstrip().endswith("isolated")
