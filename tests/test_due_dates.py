"""Due dates and late work: schedule.yml -> nbgrader's duedate, extensions and
late-penalty plugin -> grades.csv."""

import csv
import html
import datetime as dt
import re
import warnings

import pytest
import nbformat
import yaml
from submissions import solved, write
from test_grading import grade_cells

from autograder import sandbox
from autograder.chapters import get_chapter
from autograder.late import (
    PercentPerDay,
    describe_lateness,
    format_timestamp,
    read_timestamp,
)
from autograder.limits import Limits
from autograder.nbconfig import nbgrader_config
from autograder.schedule import Schedule, load_schedule, parse_schedule

CH = get_chapter("00_introduction")
UTC = dt.timezone.utc
AWAITS = "graded (awaits manual grading)"  # the solution's written answer: graded by hand, later


# -------------------------------------------------------------- schedule ---

def test_schedule_reads_dates_in_its_timezone_and_extensions():
    s = parse_schedule(yaml.safe_load("""
timezone: Europe/London
late_penalty: 10% per day
chapters:
  00_introduction: {due: 2026-09-21 23:59}
  01_tokenizing: {due: 2026-12-01, canvas_id: 4711}
extensions:
  "1001": {01_tokenizing: 36 hours}
"""))
    assert s.due["00_introduction"] == dt.datetime(2026, 9, 21, 22, 59, tzinfo=UTC)  # BST is UTC+1
    assert s.due["01_tokenizing"] == dt.datetime(2026, 12, 1, 23, 59, 59, tzinfo=UTC)  # a date: its last second
    assert s.canvas_ids == {"01_tokenizing": "4711"}
    assert s.extensions == {("1001", "01_tokenizing"): dt.timedelta(hours=36)}
    assert s.percent_per_day == 10.0
    assert not s.is_due("01_tokenizing", dt.datetime(2026, 12, 3, 11, tzinfo=UTC))  # extension still running
    assert s.is_due("01_tokenizing", dt.datetime(2026, 12, 3, 12, tzinfo=UTC))
    assert not s.is_due("02_embedding", dt.datetime(2099, 1, 1, tzinfo=UTC))  # no due date: never


@pytest.mark.parametrize(("text", "error"), [
    ("chapters: {99_nothing: {due: 2026-01-01}}", "unknown chapter"),
    ("chapters: {00_introduction: {due: next monday}}", "not a date"),
    ("chapters: {00_introduction: {deu: 2026-01-01}}", "expected some of"),
    ("late_penalty: half", "late_penalty"),
    ("timezone: Mars/Olympus", "unknown timezone"),
    ("extensions: {bob: {00_introduction: 2 days}}", "has no due date"),
    ("chapters: {00_introduction: {due: 2026-01-01}}\nextensions: {bob: {00_introduction: a while}}", "duration"),
    ("duedates: {}", "unknown setting"),
])
def test_schedule_mistakes_are_named(text, error):
    with pytest.raises(ValueError, match=error):
        parse_schedule(yaml.safe_load(text))


def test_the_committed_schedule_is_valid():
    load_schedule()


# ----------------------------------------------------------- late policy ---

def test_percent_per_day_counts_started_days_and_caps_at_the_score():
    plugin = PercentPerDay(percent=10)
    assert plugin.late_submission_penalty("s", 8.0, 0) is None
    assert plugin.late_submission_penalty("s", 8.0, 1) == 0.8
    assert plugin.late_submission_penalty("s", 8.0, 86400) == 0.8
    assert plugin.late_submission_penalty("s", 8.0, 86401) == 1.6
    assert plugin.late_submission_penalty("s", 8.0, 30 * 86400) == 8.0


def test_the_policy_reaches_nbgrader(tmp_path):
    per_day = nbgrader_config(tmp_path, tmp_path / "s", "k", Limits(), "12.5% per day")
    assert per_day.AssignLatePenalties.plugin_class == "autograder.late.PercentPerDay"
    assert per_day.PercentPerDay.percent == 12.5
    zero = nbgrader_config(tmp_path, tmp_path / "s", "k", Limits(), "zero")
    assert zero.LateSubmissionPlugin.penalty_method == "zero"
    assert "autograder.late.PercentPerDay" not in str(nbgrader_config(tmp_path, tmp_path / "s", "k", Limits()))


def test_timestamps_are_read_as_nbgrader_writes_them(tmp_path):
    assert read_timestamp(tmp_path) == (None, None)
    (tmp_path / "timestamp.txt").write_text("2026-09-22 01:30:00.000000 Europe/Berlin\n")
    assert read_timestamp(tmp_path) == ("2026-09-21 23:30:00.000000 UTC", None)
    (tmp_path / "timestamp.txt").write_text("yesterday-ish")
    assert read_timestamp(tmp_path)[1].startswith("timestamp.txt ignored: not a date")
    (tmp_path / "timestamp.txt").unlink()
    (tmp_path / "timestamp.txt").symlink_to("/etc/hostname")
    assert read_timestamp(tmp_path)[1] == "timestamp.txt ignored: not a small plain file"
    assert describe_lateness(90) == "2 min" and describe_lateness(86400 + 2 * 3600) == "1 day 2 h"


# ------------------------------------------------ a class, really graded ---

def _rows(out):
    with open(out / "grades.csv", newline="") as f:
        return {r["student_id"]: r for r in csv.DictReader(f)}


def _formgrader_scores(out) -> dict[str, float]:
    """{student: the total nbgrader's formgrader lists} (its API reads `Gradebook.submission_dicts`)."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'nbgrader' / 'gradebook.db'}") as gb:
        return {d["student"]: d["score"] for d in gb.submission_dicts(CH.id)}


@pytest.mark.slow
def test_late_work_is_penalised_by_nbgrader_and_reported(tmp_path, capfd):
    from autograder.grade import grade
    from autograder.lms import export
    from autograder.report import write_report

    due = dt.datetime(2026, 9, 21, 22, 0, tzinfo=UTC)
    handed_in = {"ontime": due - dt.timedelta(hours=1), "late": due + dt.timedelta(hours=30),
                 "excused": due + dt.timedelta(hours=30), "untimed": None}
    subs = tmp_path / "submitted"
    for student, when in handed_in.items():
        path = write(solved(CH), subs, student, CH)
        if when:
            (path.parent / "timestamp.txt").write_text(format_timestamp(when) + "\n")
    schedule = Schedule(due={CH.id: due}, extensions={("excused", CH.id): dt.timedelta(days=2)},
                        late_penalty="10% per day")
    use_sandbox = sandbox.available() is None
    with warnings.catch_warnings(record=True) as caught:  # a clean run warns of nothing: grade, export, report
        warnings.simplefilter("always")
        grade(subs, tmp_path / "out", use_sandbox=use_sandbox, secret=tmp_path / "secret", schedule=schedule)
        export(tmp_path / "out", "moodle", chapters=[CH.id])
        write_report(tmp_path / "out")
    assert [str(w.message) for w in caught] == []
    assert not re.search(r"\w+Warning\b", capfd.readouterr().err)  # Python's warnings, printed by a subprocess
    rows = _rows(tmp_path / "out")
    top = sum(points for points, by_hand in grade_cells(CH).values() if not by_hand)  # autograded points
    assert float(rows["ontime"]["score"]) == top > 0  # the solution: full marks; its written answer waits
    for s in ("ontime", "excused", "untimed"):
        assert float(rows[s]["score"]) == top and float(rows[s]["late_penalty"]) == 0, rows[s]
        assert float(rows[s]["seconds_late"]) == 0 and rows[s]["status"] == AWAITS, rows[s]
    late = rows["late"]
    assert float(late["seconds_late"]) == 30 * 3600
    assert float(late["late_penalty"]) == round(top * 0.2, 2)  # 2 started days at 10%
    assert float(late["score"]) == round(top - top * 0.2, 2)  # the points earned, less the penalty
    assert late["status"] == (f"graded (awaits manual grading; late by 1 day 6 h: {top:g} points less a penalty "
                              f"of {round(top * 0.2, 2):g})")
    assert late["timestamp"] == "2026-09-23 04:00:00 UTC" and late["duedate"] == "2026-09-21 22:00:00 UTC"
    assert rows["excused"]["duedate"] == "2026-09-23 22:00:00 UTC"
    assert rows["untimed"]["timestamp"] == ""
    # nbgrader's formgrader lists the points before the penalty; grades.csv says both, and they add up
    shown = _formgrader_scores(tmp_path / "out")
    assert shown["late"] == float(late["score"]) + float(late["late_penalty"]) == top
    assert f"{shown['late']:g} points less a penalty" in late["status"]
    assert all(shown[s] == float(rows[s]["score"]) for s in ("ontime", "excused", "untimed"))

    # The instructor grades "late" by hand in the formgrader (half of every cell's points, through
    # nbgrader's API as the formgrader stores it): the penalty is taken from that score, in export...
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{tmp_path / 'out' / 'nbgrader' / 'gradebook.db'}") as gb:
        for g in gb.find_submission(CH.id, "late").notebooks[0].grades:
            g.manual_score, g.needs_manual_grade = g.max_score / 2, False
        gb.db.commit()
    by_hand = sum(points for points, _ in grade_cells(CH).values()) / 2
    export(tmp_path / "out", "moodle", chapters=[CH.id])
    late = _rows(tmp_path / "out")["late"]
    assert float(late["late_penalty"]) == round(by_hand * 0.2, 2), late
    assert late["status"] == (f"graded (graded by hand; late by 1 day 6 h: {by_hand:g} points less a penalty "
                              f"of {round(by_hand * 0.2, 2):g})")
    capfd.readouterr()
    # ... and then the instructor grants "late" an extension: no notebook runs again (lateness is not
    # what runs), the penalty goes, and the hand-given score stays without awaiting review.
    schedule = Schedule(due={CH.id: due}, extensions={("excused", CH.id): dt.timedelta(days=2),
                                                      ("late", CH.id): dt.timedelta(days=2)},
                        late_penalty="10% per day")
    grade(subs, tmp_path / "out", use_sandbox=use_sandbox, secret=tmp_path / "secret", schedule=schedule)
    assert "0 notebook(s) run, 4 unchanged" in capfd.readouterr().out
    again = _rows(tmp_path / "out")
    assert float(again["late"]["score"]) == by_hand and float(again["late"]["late_penalty"]) == 0
    assert again["late"]["status"] == "graded (graded by hand)", again["late"]
    assert {s: again[s] for s in again if s != "late"} == {s: rows[s] for s in rows if s != "late"}


@pytest.mark.slow
def test_a_sandbox_holds_only_the_answers_the_class_may_see(tmp_path):
    """Chapter 5 graded while chapter 4 is due but an extension on it still runs: the sandbox holds
    chapter 4's stand-in, not its answers (a notebook printing the module it imports shows the stand-in
    in its feedback), and a correct notebook keeps full marks on it. Once the extension is over, the
    same grading holds chapter 4's answers."""
    from autograder.edition import answer_lines, published_lines
    from autograder.grade import grade
    from course.standins import shim
    from submissions import lean

    ch4, ch5 = get_chapter("04_attention"), get_chapter("05_multi_head_attention")
    now = dt.datetime.now(UTC)
    due = {ch4.id: now - dt.timedelta(days=1), ch5.id: now - dt.timedelta(hours=1)}
    nb = lean(solved(ch5))
    nb.cells.append(nbformat.v4.new_code_cell("import inspect\nimport course.reference.attention as chapter_4\n"
                                              "print(inspect.getsource(chapter_4))"))
    subs = tmp_path / "submitted"
    write(nb, subs, "1001", ch5)
    lines = {ln for found, _ in answer_lines(ch4) for ln in found - published_lines(found)}
    use_sandbox = sandbox.available() is None
    for extended, name in ((True, "extended"), (False, "over")):
        extensions = {("1002", ch4.id): dt.timedelta(days=7)} if extended else {}
        rows = grade(subs, tmp_path / name, use_sandbox=use_sandbox, secret=tmp_path / "secret",
                     schedule=Schedule(due=due, extensions=extensions))
        (row,) = rows
        assert row.score == row.max_score, row
        page = (tmp_path / name / "feedback" / "1001" / ch5.id / f"{ch5.id}.html").read_text()
        shown = {ln for ln in lines if html.escape(ln, quote=False) in page or ln in page}
        if extended:
            assert shim("attention").splitlines()[0][3:40] in page and not shown, sorted(shown)[:3]
        else:
            assert len(shown) >= 3, "chapter 4's answers, published, are what chapter 5 imports"
