"""`python -m autograder export`: grades.csv in Canvas's and Moodle's import formats,
checked on generated classes."""

import csv
import random
import subprocess
import sys

import pytest

from autograder import lms
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
                rows.append(Row(s, ch, 0.0, top, "missing notebook: expected ..."))
            else:
                rows.append(Row(s, ch, round(rng.uniform(0, top) * 4) / 4, top, "graded"))
    out.mkdir(parents=True, exist_ok=True)
    write_csvs(out, rows, [])
    return rows


def read(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("seed", range(4))
def test_canvas_gradebook_import_format(tmp_path, seed, monkeypatch):
    rows = generated_class(tmp_path, seed)
    chapters = sorted({r.assignment for r in rows}, key=CHAPTERS.index)
    with_id = chapters[0]
    monkeypatch.setattr(lms, "load_schedule", lambda: Schedule(canvas_ids={with_id: "4711"}))
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
    want = {(r.student_id, r.assignment): r.score for r in rows}
    for line in body:
        assert len(line) == len(header)
        for c, cell in zip(chapters, line[5:]):
            assert float(cell) == want[(line[1], c)], (line[1], c)


@pytest.mark.parametrize("seed", range(4))
def test_moodle_offline_grading_worksheet(tmp_path, seed):
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
            assert float(grade) == mine[s].score and float(top) == mine[s].max_score
            assert note == ("" if mine[s].status == "graded" else mine[s].status)


def test_students_are_told_about_lateness_not_the_graders_bookkeeping():
    row = {"status": "graded (notebook renamed: graded x.ipynb as 01_tokenizing.ipynb; graded by hand; "
                     "late by 2 h: 5 points less a penalty of 0.5)"}
    assert lms.comment(row) == ("notebook renamed: graded x.ipynb as 01_tokenizing.ipynb; "
                                "late by 2 h: 5 points less a penalty of 0.5")
    assert lms.comment({"status": "graded (awaits manual grading)"}) == ""
    assert lms.comment({"status": "missing notebook: expected 01_tokenizing/01_tokenizing.ipynb"}).startswith("missing")


def test_moodle_leaves_out_ids_that_are_not_participant_numbers(tmp_path, capsys):
    generated_class(tmp_path, 7, ids=["1001", "alice"])
    for path in lms.export(tmp_path, "moodle"):
        assert [line[0] for line in read(path)[1:]] == ["Participant 1001"]
    assert "'alice' is not a Moodle participant number" in capsys.readouterr().err


def test_cells_are_never_spreadsheet_formulas(tmp_path):
    generated_class(tmp_path, 1, ids=["1001"])
    roster = tmp_path / "roster.csv"
    roster.write_text('student_id,name\n1001,"=HYPERLINK(""http://x"")"\n')
    (path,) = lms.export(tmp_path, "canvas", roster=roster)
    assert read(path)[2][0] == "'=HYPERLINK(\"http://x\")"


def test_scores_are_written_as_the_lms_reads_them():
    assert [lms.number(x) for x in (7.0, 7.5, "3.25", 0, 2.675)] == ["7", "7.5", "3.25", "0", "2.67"]


def test_cli_exports_and_refuses_without_grades(tmp_path):
    generated_class(tmp_path / "out", 3)
    run = [sys.executable, "-m", "autograder", "export"]
    ok = subprocess.run([*run, str(tmp_path / "out"), "--lms", "canvas"], check=False, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "out" / "lms" / "canvas.csv").is_file()
    bad = subprocess.run([*run, str(tmp_path / "nothing"), "--lms", "moodle"], check=False, capture_output=True, text=True)
    assert bad.returncode != 0 and "run `python -m autograder grade` first" in bad.stderr
