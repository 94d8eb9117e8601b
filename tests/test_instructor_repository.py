"""The instructor's own copy of the repository: README's paths for student work are never committed."""

import shutil
import subprocess

import pytest

from autograder.chapters import ROOT

# The paths README's "One term, step by step" puts students' work and names in.
STUDENT_DATA = ["submitted/1001/04_attention/04_attention.ipynb", "grading/grades.csv",
                "grading/feedback/1001/04_attention/04_attention.html", "submissions.zip", "roster.csv"]

# What an instructor gets from an LMS, under the LMS's own names, and where they are likely to unzip it.
MOODLE = "Alice Smith_1001_assignsubmission_file_"  # one student's folder in Moodle's zip
DOWNLOADS = [
    # Moodle: "<course short name>-<assignment name>-<course-module id>.zip", again " (1)" when downloaded twice
    "CS101-Assignment 4-12345.zip", "CS101-Assignment 4-12345 (1).zip", "CS101-Assignment 4-Group A-12345.zip",
    f"CS101-Assignment 4-12345/{MOODLE}/04_attention.ipynb",  # unzipped into a folder named as the zip
    f"CS101-Assignment 4-12345 (1)/{MOODLE}/notes.txt",
    f"{MOODLE}/04_attention.ipynb",  # unzipped where the zip was
    f"term/ch4/{MOODLE}/work/04_attention.ipynb",  # unzipped anywhere else
    "Alice Smith_1001_assignsubmission_file_04_attention.ipynb",  # "Download submissions in folders" off
    "Alice Smith_1001_assignsubmission_onlinetext_/onlinetext.html",
    "downloads/CS101-Assignment 4-12345.zip",
    # Canvas: submissions.zip, "submissions (1).zip" the second time; flat "<name>_<ids>_<file>" inside
    "submissions.zip", "submissions (1).zip", "downloads/submissions (2).zip",
    "submissions/lovelaceada_1001_555_04_attention.ipynb",  # unzipped into a folder named as the zip
    "submissions (1)/lovelaceada_late_1001_556_04_attention.ipynb",
    "lovelaceada_1001_555_04_attention.ipynb", "lovelaceada_1001_557_notes.pdf",  # unzipped where the zip was
    # the course's own paths for student work and names
    *STUDENT_DATA, "roster-2026.csv", "submitted/1002/04_attention/timestamp.txt",
]
# What the instructor writes in their copy: never ignored.
OWN_WORK = ["notes.md", "chapters/04_attention/04_attention.ipynb", "solutions/12_new/12_new.ipynb",
            "course/checks/new.py", "autograder/new_command.py", "tests/test_new.py"]


def test_student_data_is_git_ignored():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    proc = subprocess.run(["git", "check-ignore", "--no-index", *STUDENT_DATA], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.stdout.split() == STUDENT_DATA, proc.stderr


def test_lms_downloads_under_their_default_names_are_never_committed(tmp_path):
    """In a repository with this .gitignore, files under Moodle's and Canvas's default download names,
    and what unzipping them makes, are invisible to `git add -A`; the instructor's own files are not."""
    if shutil.which("git") is None:
        pytest.skip("no git")
    repo = tmp_path / "copy"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    for name in DOWNLOADS + OWN_WORK:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("student work\n")
    proc = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "-z"], cwd=repo,
                          capture_output=True, text=True, check=True)
    listed = sorted(entry[3:] for entry in proc.stdout.split("\0") if entry)
    assert listed == sorted([".gitignore", *OWN_WORK])


def test_no_tracked_file_is_ignored():
    """The patterns for student work catch none of the repository's own files."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    proc = subprocess.run(["git", "check-ignore", "--no-index", "--stdin", "-z"], cwd=ROOT, input=tracked,
                          capture_output=True)
    assert proc.stdout.decode().split("\0") == [""], proc.stdout.decode()


def test_readme_names_every_pattern_for_student_work():
    """README's sentence about `git add -A` says exactly what .gitignore keeps out."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    block = lines[next(i for i, line in enumerate(lines) if line.startswith("# An instructor's student data")):]
    patterns = [line for line in block if line and not line.startswith("#")]
    readme = (ROOT / "README.md").read_text()
    paragraph = readme[readme.index("### One term, step by step"):readme.index("1. **Before the term")]
    assert [p for p in patterns if f"`{p}`" not in paragraph] == []
