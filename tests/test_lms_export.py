"""`python -m autograder export`: grades.csv in Canvas's and Moodle's import formats,
checked on generated classes."""

import csv
import datetime as dt
import random
import subprocess
import sys

import pytest

from autograder import lms
from autograder.collect import NAMES, add_names, read_names
from autograder import grade as grading
from autograder.chapters import all_chapters
from autograder.results import Row, write_csvs
from autograder.schedule import Schedule

CHAPTERS = [ch.id for ch in all_chapters()]


def generated_class(out, seed, ids=None):
    """A grades.csv as `grade` writes it, for a random class; returns its rows."""
    rng = random.Random(seed)
    students = ids or [str(rng.randrange(1000, 99999)) for _ in range(rng.randint(3, 12))]
    chapters = sorted(rng.sample(CHAPTERS, rng.randint(1, 3)), key=CHAPTERS.index)
    rows = []
    for ch in chapters:
        top = rng.choice([4, 10, 17.5])
        for s in students:
            if rng.random() < 0.2:
                rows.append(Row(s, ch, 0.0, top, rng.choice(["missing notebook: expected ...",
                                                             "missing: nothing submitted"])))
            else:
                rows.append(Row(s, ch, round(rng.uniform(0, top) * 4) / 4, top, "graded"))
    out.mkdir(parents=True, exist_ok=True)
    write_csvs(out, rows, [])
    return rows


NO_NOTEBOOK = "No notebook named 01_tokenizing.ipynb was found in what you handed in."
PAST = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
NOW = dt.datetime(2026, 10, 10, 12, tzinfo=dt.timezone.utc)


@pytest.fixture
def all_due(monkeypatch):
    """A schedule in which every chapter is past its due date."""
    monkeypatch.setattr(lms, "load_schedule", lambda: Schedule(due={c: PAST for c in CHAPTERS}))


def handed_in(row):
    return not row.status.startswith("missing")


def read(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("seed", range(4))
def test_canvas_gradebook_import_format(tmp_path, seed, monkeypatch):
    rows = generated_class(tmp_path, seed)
    chapters = sorted({r.assignment for r in rows}, key=CHAPTERS.index)
    with_id = chapters[0]
    monkeypatch.setattr(lms, "load_schedule", lambda: Schedule(due={c: PAST for c in CHAPTERS},
                                                               canvas_ids={with_id: "4711"}))
    (path,) = lms.export(tmp_path, "canvas")
    assert path == tmp_path / "lms" / "canvas.csv"
    table = read(path)
    header, points, body = table[0], table[1], table[2:]
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert header[5:] == [f"{with_id} (4711)"] + chapters[1:]
    assert points[0] == "Points Possible" and points[1:5] == ["", "", "", ""]
    tops = {r.assignment: r.max_score for r in rows}
    assert [float(p) for p in points[5:]] == [tops[c] for c in chapters]
    assert sorted(line[1] for line in body) == sorted({r.student_id for r in rows})
    want = {(r.student_id, r.assignment): r for r in rows}
    for line in body:
        assert len(line) == len(header)
        for c, cell in zip(chapters, line[5:]):
            row = want[(line[1], c)]
            assert cell == "" if not handed_in(row) else float(cell) == row.score, (line[1], c)


@pytest.mark.parametrize("seed", range(4))
def test_moodle_offline_grading_worksheet(tmp_path, seed, all_due):
    rows = generated_class(tmp_path, seed)
    roster = tmp_path / "roster.csv"
    people = sorted({r.student_id for r in rows})
    with open(roster, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student_id", "name", "email"])
        w.writerows([s, f"Student {s}", f"s{s}@example.org"] for s in people)
    written = lms.export(tmp_path, "moodle", roster=roster)
    chapters = sorted({r.assignment for r in rows})
    assert written == [tmp_path / "lms" / "moodle" / f"{c}.csv" for c in chapters]
    for ch, path in zip(chapters, written):
        table = read(path)
        assert table[0] == ["Identifier", "Full name", "Email address", "Grade", "Maximum Grade",
                            "Feedback comments"]
        mine = {r.student_id: r for r in rows if r.assignment == ch}
        assert len(table) == 1 + len(mine)
        for ident, name, email, grade, top, note in table[1:]:
            s = ident.removeprefix("Participant ")
            assert ident == f"Participant {s}" and name == f"Student {s}" and email == f"s{s}@example.org"
            assert (grade == "" if not handed_in(mine[s]) else float(grade) == mine[s].score)
            assert float(top) == mine[s].max_score
            assert note == lms.comment({"status": mine[s].status})


def test_names_collect_read_fill_what_the_roster_leaves_blank(tmp_path, all_due):
    """Without --roster, the Moodle worksheet's "Full name" and Canvas's "Student" are the names the LMS
    wrote in its download (`collect.NAMES`, carried into OUT by `grade`); a roster's name wins."""
    rows = generated_class(tmp_path, 3, ids=["1001", "1002", "1003"])
    add_names(tmp_path / NAMES, {"1001": "Alice Smith", "1002": "Bob Jones"})
    ch = sorted({r.assignment for r in rows})[0]
    named = {t[0]: t[1] for t in read(lms.export(tmp_path, "moodle", chapters=[ch])[0])[1:]}
    assert named == {"Participant 1001": "Alice Smith", "Participant 1002": "Bob Jones", "Participant 1003": ""}
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\n1002,Robert Jones,bob@example.org\n")
    table = read(lms.export(tmp_path, "canvas", roster=roster)[0])
    assert {t[1]: t[0] for t in table[2:]} == {"1001": "Alice Smith", "1002": "Robert Jones", "1003": "1003"}


def test_students_are_told_about_lateness_and_repairs_not_the_graders_bookkeeping():
    row = {"status": "graded (notebook renamed: graded x.ipynb as 01_tokenizing.ipynb; graded by hand; "
                     "late by 2 h: 5 points less a penalty of 0.5)"}
    assert lms.comment(row) == ("Handed in 2 h late: a late penalty of 0.5 of the 5 points earned. "
                                "Your notebook was renamed to 01_tokenizing.ipynb for grading.")
    assert lms.comment({"status": "graded (late by 1 day 6 h)"}) == "Handed in 1 day 6 h late."
    assert lms.comment(row, "10% of the points per day late, per started day").startswith(
        "Handed in 2 h late: a late penalty of 0.5 of the 5 points earned (10% of the points per day late, per "
        "started day). ")
    assert lms.comment({"status": "graded (awaits manual grading)"}) == ""
    assert lms.comment({"status": "graded"}) == ""
    assert lms.comment({"status": "missing: nothing submitted"}) == "Nothing was handed in."
    assert lms.comment({"status": "missing notebook: expected 01_tokenizing/01_tokenizing.ipynb; found a.ipynb, "
                                  "b.ipynb"}) == NO_NOTEBOOK
    assert lms.comment({"status": "invalid notebook: JSONDecodeError"}) == (
        "No grade: your file could not be read as a Jupyter notebook.")
    assert lms.comment({"status": "not graded: worker crashed"}).startswith("No grade yet")


def test_a_long_status_becomes_a_short_comment_a_student_can_use():
    """The grader's notes on a repaired notebook run to hundreds of characters (here over 700): the
    comment says in one sentence what was repaired, and what else the student must know."""
    notes = ([f"grading metadata of cell readonly-{i} restored" for i in range(1, 4)]
             + [f"deleted cell answer-{i} restored" for i in range(1, 3)]
             + ["cell test-3 turned back into a code cell",
                "grading metadata removed from a cell with duplicate grade_id 'answer-1'",
                "hidden-test markers in a student cell disabled",
                "2 cell(s) stopped at the per-cell time limit",
                "3 kernel message(s) with an invalid signature dropped", "output truncated",
                "4 link(s), special file(s) or over-deep folder(s) left by the kernel removed",
                "timestamp.txt ignored: not a date ('yesterday')", "no feedback: nbgrader generate_feedback failed",
                "graded by hand", "late by 3 days 2 h: 12.5 points less a penalty of 5"])
    status = f"graded ({'; '.join(notes)})"
    assert len(status) > 700
    said = lms.comment({"status": status})
    assert len(said) <= lms.COMMENT_LIMIT == 300, (len(said), said)
    assert said == ("Handed in 3 days 2 h late: a late penalty of 5 of the 12.5 points earned. "
                    "Your notebook was repaired before grading: 4 cells' grading metadata restored, "
                    "2 deleted cells put back, 1 copied or unknown graded cell made ordinary, "
                    "hidden-test markers disabled. 2 cell(s) hit the per-cell time limit.")
    assert lms.comment({"status": "graded (grading metadata of cell a restored)"}) == (
        "Your notebook was repaired before grading: 1 cell's grading metadata restored.")
    for stopped, told in (("kernel killed at the 600 s time limit", "Grading stopped at the notebook's time limit"),
                          ("kernel died (DeadKernelError)", "Grading stopped: the notebook's kernel died"),
                          ("the time budget of 80 s for the notebook's own cells ran out: 3 cell(s) not run",
                           "The notebook's time budget of 80 s ran out")):
        assert lms.comment({"status": f"graded ({stopped})"}).startswith(told)
    every = "; ".join(notes[:-1] + ["kernel killed at the 600 s time limit", notes[-1]])
    assert len(lms.comment({"status": f"graded ({every})"})) <= lms.COMMENT_LIMIT


def test_moodle_leaves_out_ids_that_are_not_participant_numbers(tmp_path, capsys, all_due):
    generated_class(tmp_path, 7, ids=["1001", "alice"])
    for path in lms.export(tmp_path, "moodle"):
        assert [line[0] for line in read(path)[1:]] == ["Participant 1001"]
    assert "'alice' is not a Moodle participant number" in capsys.readouterr().err


def test_cells_are_never_spreadsheet_formulas(tmp_path, all_due):
    generated_class(tmp_path, 1, ids=["1001"])
    roster = tmp_path / "roster.csv"
    roster.write_text('student_id,name\n1001,"=HYPERLINK(""http://x"")"\n')
    (path,) = lms.export(tmp_path, "canvas", roster=roster)
    assert read(path)[2][0] == "'=HYPERLINK(\"http://x\")"


def test_scores_are_written_as_the_lms_reads_them():
    assert [lms.number(x) for x in (7.0, 7.5, "3.25", 0, 2.675)] == ["7", "7.5", "3.25", "0", "2.67"]


def test_cli_exports_and_refuses_without_grades(tmp_path):
    """The repository's schedule.yml gives no due dates: a chapter is exported only when named."""
    rows = generated_class(tmp_path / "out", 3)
    run = [sys.executable, "-m", "autograder", "export"]
    named = [a for c in sorted({r.assignment for r in rows}) for a in ("--chapter", c)]
    ok = subprocess.run([*run, str(tmp_path / "out"), "--lms", "canvas", *named, "--missing-as-zero"], check=False,
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "out" / "lms" / "canvas.csv").is_file()
    not_due = subprocess.run([*run, str(tmp_path / "out"), "--lms", "moodle"], check=False, capture_output=True,
                             text=True)
    assert not_due.returncode != 0 and "no due date in schedule.yml" in not_due.stderr
    bad = subprocess.run([*run, str(tmp_path / "nothing"), "--lms", "moodle"], check=False, capture_output=True,
                         text=True)
    assert bad.returncode != 0 and "run `python -m autograder grade` first" in bad.stderr
    unknown = subprocess.run([*run, str(tmp_path / "out"), "--lms", "moodle", "--chapter", "4"], check=False,
                             capture_output=True, text=True)
    assert unknown.returncode != 0 and "unknown chapter '4' (known: 00_introduction, " in unknown.stderr, unknown.stderr


# Only a grade where there is one: a chapter not yet due is not exported unless named; a student who
# handed in nothing gets a blank grade, not 0, unless the instructor asks for 0 after the due date.
def small_class(out):
    """01_tokenizing (past due), 02_embedding (due later), 03_positional_encoding (no due date); in
    each, 1001 was graded, 1002 handed in nothing, 1003 handed in no notebook of that name, and 1004's
    notebook could not be read."""
    rows = []
    for ch in CHAPTERS[1:4]:
        rows += [Row("1001", ch, 7.5, 10, "graded"), Row("1002", ch, 0.0, 10, "missing: nothing submitted"),
                 Row("1003", ch, 0.0, 10, f"missing notebook: expected {ch}/{ch}.ipynb"),
                 Row("1004", ch, 0.0, 10, "invalid notebook: JSONDecodeError")]
    out.mkdir(parents=True, exist_ok=True)
    write_csvs(out, rows, [])


@pytest.fixture
def term(monkeypatch):
    """01_tokenizing was due on 2026-10-01 (1003 has a 30-day extension), 02_embedding is due on
    2026-11-01, 03_positional_encoding has no due date; it is now 2026-10-10."""
    schedule = Schedule(due={"01_tokenizing": dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc),
                             "02_embedding": dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)},
                        extensions={("1003", "01_tokenizing"): dt.timedelta(days=30)})
    monkeypatch.setattr(lms, "load_schedule", lambda: schedule)


def test_chapters_not_yet_due_are_left_out_unless_named(tmp_path, term, capsys):
    small_class(tmp_path)
    (path,) = lms.export(tmp_path, "canvas", now=NOW)
    assert read(path)[0][5:] == ["01_tokenizing"]
    told = capsys.readouterr().err
    assert "left out 02_embedding: not due until 2026-11-01 00:00 UTC" in told
    assert "left out 03_positional_encoding: no due date in schedule.yml" in told
    assert lms.export(tmp_path, "moodle", now=NOW) == [tmp_path / "lms" / "moodle" / "01_tokenizing.csv"]
    named = lms.export(tmp_path, "moodle", chapters=["02_embedding", "03_positional_encoding"], now=NOW)
    assert named == [tmp_path / "lms" / "moodle" / f"{c}.csv" for c in ("02_embedding", "03_positional_encoding")]
    (path,) = lms.export(tmp_path, "canvas", chapters=["02_embedding"], missing_as_zero=True, now=NOW)
    assert [line[5] for line in read(path)[2:]] == ["7.5", "", "", ""]  # before its due date: no zeros
    with pytest.raises(SystemExit, match="no chapter to export"):
        lms.export(tmp_path, "canvas", now=dt.datetime(2026, 9, 1, tzinfo=dt.timezone.utc))


def test_no_submission_is_a_blank_grade_and_listed(tmp_path, term, capsys):
    small_class(tmp_path)
    (path,) = lms.export(tmp_path, "canvas", now=NOW)
    assert [line[1] for line in read(path)[2:]] == ["1001", "1002", "1003", "1004"]
    assert [line[5] for line in read(path)[2:]] == ["7.5", "", "", ""]
    told = capsys.readouterr().err
    assert "01_tokenizing: left blank for 2 student(s) who handed in no notebook" in told and "1002, 1003" in told
    assert "01_tokenizing: left blank for 1 student(s) whose notebook could not be graded" in told and "1004" in told
    (path,) = lms.export(tmp_path, "moodle", now=NOW)
    grades = {line[0]: (line[3], line[5]) for line in read(path)[1:]}
    assert grades == {"Participant 1001": ("7.5", ""),
                      "Participant 1002": ("", "Nothing was handed in."),
                      "Participant 1003": ("", NO_NOTEBOOK),
                      "Participant 1004": ("", "No grade: your file could not be read as a Jupyter notebook.")}


def test_missing_as_zero_only_after_the_due_date_and_the_students_extension(tmp_path, term, capsys):
    small_class(tmp_path)
    (path,) = lms.export(tmp_path, "canvas", missing_as_zero=True, now=NOW)
    assert [line[5] for line in read(path)[2:]] == ["7.5", "0", "", ""]  # 1003's extension runs until 2026-10-31
    told = capsys.readouterr().err
    assert "01_tokenizing: 0 for 1 student(s) who handed in no notebook: 1002" in told
    assert ("01_tokenizing: left blank for 1 student(s) who handed in no notebook, not yet past the due date "
            "(with their extension): 1003") in told
    lms.export(tmp_path, "canvas", chapters=["03_positional_encoding"], missing_as_zero=True, now=NOW)
    assert ("03_positional_encoding: left blank for 2 student(s) who handed in no notebook (no due date in "
            "schedule.yml: no 0 without one): 1002, 1003") in capsys.readouterr().err
    (path,) = lms.export(tmp_path, "canvas", missing_as_zero=True, now=dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc))
    table = read(path)
    assert table[0][5:] == ["01_tokenizing", "02_embedding"]
    assert [line[5:] for line in table[2:]] == [["7.5", "7.5"], ["0", "0"], ["0", "0"], ["", ""]]


def test_grade_carries_the_names_collect_kept_into_out(tmp_path):
    subs = tmp_path / "submitted"
    subs.mkdir()
    add_names(subs / NAMES, {"1001": "Alice Smith"})
    grading.grade(subs, tmp_path / "grading", use_sandbox=False, secret=tmp_path / "secret")
    assert read_names(tmp_path / "grading" / NAMES) == {"1001": "Alice Smith"}
