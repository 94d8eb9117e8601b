"""The instructor's report on a graded class: OUT/report/ next to grades.csv.

For every chapter and every exercise (autograder test cell, or written
answer graded by hand): how many students, the mean score, the share with
full marks, and the most common reason for losing points, read from the
verdicts the judge recorded as data for each autograded notebook (its
verdicts file in the course folder's status folder: see
`autograder.judge.JudgeChecks`; the text the test cells show is not parsed).
A reason is the hint of the known mistake a failed case matched (the check's
`Mistake` hints, see `course.checks.framework`), else the case's problem with
the numbers left out, or one of a few plain categories ("not attempted", "the
test cell did not reach the check"); a written answer was not given, awaits
grading by hand, or lost points there.

A notebook graded by a version of the grader that wrote no verdicts file (or
whose file is not from the grading that made its autograded notebook) keeps
its scores, and each point it lost has the reason `NO_RECORD`. (Grading the
class again regrades it: the judge is part of what a grade depends on.)
Written as ``report/index.html`` (one page: figures, and
the three most common reasons per exercise, and which students' answers were judged on
their own earlier pieces, which differ from the answer), ``report/exercises.csv`` (the
table, with the most common reason) and one score histogram and
one pass-rate chart per chapter as PNG.
"""

from __future__ import annotations

import csv
import html
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader import utils

from course.probing import verdicts
from course.protocol import STATUS_DIR

from .feedback import exercise_titles
from .judge import VERDICTS_FORMAT, report_digest, verdicts_path
from .selfcheck import written_answers

NOT_ATTEMPTED = "not attempted (the stub still raises NotImplementedError)"
NOT_REACHED = "the test cell did not reach the check (an error before it, or the kernel died or timed out)"
OTHER = "a wrong result that matches no known mistake"
UNREADABLE = "the recorded results were unreadable, or not the test's cases"
NOT_JUDGED = "the grader could not judge the check (see the grading log)"
NO_RECORD = "no verdict record (graded by an older version of the grader)"
WRITTEN_EMPTY = "written answer not given"
WRITTEN_PENDING = "written answer awaits grading by hand"
WRITTEN_MARKED = "written answer: points taken off by hand"
TOP_REASONS = 3  # reasons the HTML page lists per exercise
#: a check's category (`course.probing.verdicts.record`) -> the reason it gives
_CATEGORY_REASONS = {verdicts.NOT_IMPLEMENTED: NOT_ATTEMPTED, verdicts.NO_RESULTS: NOT_REACHED,
                     verdicts.UNREADABLE: UNREADABLE, verdicts.UNAVAILABLE: NOT_JUDGED,
                     verdicts.JUDGE_ERROR: NOT_JUDGED}
# what a problem says of one student's numbers: where and by how much values differ, and any number
_DETAIL = re.compile(r": largest error .*$")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?!\w|\.\d)")  # "got 29." too
#: after a named mistake as common as they are
CATEGORIES = (NOT_ATTEMPTED, NOT_REACHED, OTHER, WRITTEN_EMPTY, UNREADABLE, NOT_JUDGED, NO_RECORD)
MISSING = "missing"  # the start of the status of a student who handed in no notebook (see `grade`)


@dataclass
class Exercise:
    """One test cell of one chapter, over the class."""

    chapter: str
    grade_id: str
    max_score: float
    scores: list[float] = field(default_factory=list)
    reasons: Counter = field(default_factory=Counter)
    flagged: dict[str, list[str]] = field(default_factory=dict)  # student: forbidden functions the answer names
    #: {earlier pieces: students}: whose answers were judged on their own earlier pieces' outputs, as
    #: those pieces differ from the reference (their mistake is charged in those pieces' exercises)
    replayed_on: Counter = field(default_factory=Counter)

    @property
    def mean(self) -> float:
        return sum(self.scores) / len(self.scores) if self.scores else 0.0

    @property
    def full_share(self) -> float:
        return sum(s >= self.max_score for s in self.scores) / len(self.scores) if self.scores else 0.0

    def ranked_reasons(self) -> list[tuple[str, int]]:
        """(reason, students) from the most common; on a tie, a real mistake before a plain category."""
        return sorted(self.reasons.items(), key=lambda rn: (-rn[1], rn[0] in CATEGORIES, rn[0]))

    def common_reason(self) -> tuple[str, int]:
        return self.ranked_reasons()[0] if self.reasons else ("", 0)


def failure_reason(checks: list[dict]) -> str | None:
    """Why a test cell lost points, from the judge's verdict on each check it calls, as data
    (`course.probing.verdicts.record`; None: it lost none).

    The first failed check decides: its category's reason ("not attempted", ...), else its first
    failed case's: the hint of the known mistake it matched, else its problem with the numbers
    left out ("expected dtype float64, got float32", "raised RuntimeError: ...")."""
    for check in checks:
        if check.get("passed"):
            continue
        if check.get("category"):
            return _CATEGORY_REASONS.get(check["category"], OTHER)
        case = (check.get("shown") or [{}])[0]
        if case.get("mistake") and case.get("hint"):
            return case["hint"]
        problem = _DETAIL.sub("", case.get("problem") or "")  # where and by how much: every student's own
        return _NUMBER.sub("N", problem).strip().rstrip(".")[:200] or OTHER
    return OTHER if not checks else None  # a cell that calls no check earns nothing


def _recorded(out: Path, student: str, assignment: str, notebook: str) -> dict:
    """{grade id: {"digest", "checks"}} from the judge's verdicts file on a notebook ({} without one)."""
    try:
        data = json.loads(verdicts_path(out / "nbgrader" / STATUS_DIR, student, assignment).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != VERDICTS_FORMAT or data.get("notebook") != notebook:
        return {}
    return data["cells"] if isinstance(data.get("cells"), dict) else {}


def graded_cells(out: Path, student: str, assignment: str,
                 notebook: str | None = None) -> dict[str, list[dict] | str]:
    """{grade id: what the grader decided} in a student's autograded notebook (`notebook`, by default
    the assignment's own name) in OUT ({} without one): for a test cell, the judge's verdict on each
    check it calls, as data, or `NO_RECORD` where its verdicts file holds none from the grading that
    made this notebook (the digest of the cell's report differs); for a written answer `WRITTEN_MARKED`,
    or `WRITTEN_EMPTY` where the student left the released text (nbgrader then gives 0 itself)."""
    notebook = notebook or assignment
    path = out / "nbgrader" / "autograded" / student / assignment / f"{notebook}.ipynb"
    if not path.is_file():
        return {}
    nb = nbformat.read(path, as_version=4)
    cells: dict[str, list[dict] | str] = {gid: WRITTEN_MARKED if answered else WRITTEN_EMPTY
                                          for gid, _, answered in written_answers(nb)}
    recorded = _recorded(out, student, assignment, notebook)
    for cell in nb.cells:
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            gid = cell.metadata.nbgrader["grade_id"]
            entry = recorded.get(gid)
            ok = (isinstance(entry, dict) and entry.get("digest") == report_digest(cell.outputs)
                  and isinstance(entry.get("checks"), list))
            cells[gid] = entry["checks"] if ok else NO_RECORD
    return cells


def replayed_on(checks: list[dict] | None) -> set[str]:
    """The earlier pieces on whose outputs a test cell's checks judged some of its cases (`record`'s
    "replayed_on"): the student's own pieces, which differ from the reference."""
    if not isinstance(checks, list):
        return set()
    return {c["replayed_on"] for c in checks if isinstance(c, dict) and c.get("replayed")
            and isinstance(c.get("replayed_on"), str) and c["replayed_on"]}


def _reason(cell: list[dict] | str | None, awaits_manual_grading: bool) -> str:
    """Why an exercise lost points: a written answer's fate, `NO_RECORD`, or the test cell's
    `failure_reason` (`OTHER` for a cell the autograded notebook lacks, or no notebook at all)."""
    if cell == WRITTEN_MARKED and awaits_manual_grading:
        return WRITTEN_PENDING
    if isinstance(cell, str):
        return cell
    if cell is None:
        return OTHER
    return failure_reason(cell) or OTHER


def collect(out: Path) -> tuple[dict[str, list[float]], dict[str, float], list[Exercise]]:
    """From OUT: each chapter's total scores (of the students who handed in a notebook), its
    maximum, and its exercises."""
    totals: dict[str, list[float]] = defaultdict(list)
    maxima: dict[str, float] = {}
    statuses: dict[tuple[str, str], str] = {}
    with open(out / "grades.csv") as f:
        for row in csv.DictReader(f):
            maxima[row["assignment"]] = float(row["max_score"])
            if not row["status"].startswith(MISSING):
                totals[row["assignment"]].append(float(row["score"]))
            statuses[(row["student_id"], row["assignment"])] = row["status"]
    exercises: dict[tuple[str, str], Exercise] = {}
    graded: dict[tuple[str, str], dict[str, list[dict] | str]] = {}
    recorded: dict[tuple[str, str], dict] = {}
    with open(out / "exercises.csv") as f:
        for row in csv.DictReader(f):
            key = (row["assignment"], row["grade_id"])
            ex = exercises.setdefault(key, Exercise(row["assignment"], row["grade_id"], float(row["max_score"])))
            score = float(row["score"])
            ex.scores.append(score)
            where = (row["student_id"], row["assignment"])
            if where not in recorded:
                recorded[where] = _recorded(out, *where, row["notebook"])
            cell = recorded[where].get(row["grade_id"]) or {}
            if cell.get("flagged"):
                ex.flagged[row["student_id"]] = cell["flagged"]
            ex.replayed_on.update(replayed_on(cell.get("checks")))
            if score < ex.max_score:
                where = (row["student_id"], row["assignment"])
                if where not in graded:
                    graded[where] = graded_cells(out, row["student_id"], row["assignment"], row["notebook"])
                awaits = "awaits manual grading" in statuses.get(where, "")
                ex.reasons[_reason(graded[where].get(row["grade_id"]), awaits)] += 1
    return totals, maxima, list(exercises.values())


def _plots(folder: Path, chapter: str, totals: list[float], maximum: float, exercises: list[Exercise]) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    bins = max(1, min(20, int(maximum * 2) or 1))
    ax.hist(totals, bins=bins, range=(0, maximum or 1), color="#4c72b0", edgecolor="white")
    ax.set(xlabel=f"score (out of {maximum:g})", ylabel="students", title=f"{chapter}: scores")
    ax.yaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    names.append(f"{chapter}-scores.png")
    fig.savefig(folder / names[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.5, 1.4 + 0.35 * len(exercises)))
    labels = [e.grade_id for e in exercises][::-1]
    shares = [100 * e.full_share for e in exercises][::-1]
    ax.barh(labels, shares, color="#55a868")
    ax.set(xlim=(0, 100), xlabel="students with full marks (%)", title=f"{chapter}: pass rate per exercise")
    fig.tight_layout()
    names.append(f"{chapter}-pass-rate.png")
    fig.savefig(folder / names[-1], dpi=110)
    plt.close(fig)
    return names


_STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left;
vertical-align:top}th{background:#f3f3f3}ol{margin:0;padding-left:1.2rem}td.n{text-align:right}
img{margin:.5rem 1rem .5rem 0;max-width:100%;height:auto}"""


def _titles(out: Path, chapter: str) -> dict[str, str]:
    """{grade id: exercise title} from the chapter's release in OUT's course folder ({} without one)."""
    release = out / "nbgrader" / "release" / chapter / f"{chapter}.ipynb"
    return exercise_titles(nbformat.read(release, as_version=4)) if release.is_file() else {}


def handed_in_nothing(out: Path) -> Counter:
    """{chapter: how many students handed in no notebook for it} (grades.csv's "missing" rows)."""
    with open(out / "grades.csv") as f:
        return Counter(row["assignment"] for row in csv.DictReader(f) if row["status"].startswith(MISSING))


def summary(scores: list[float], maximum: float, nothing: int) -> str:
    """A chapter's line: the students who handed in a notebook, their mean and full marks, then
    those who handed in nothing, counted apart (they are in neither the mean nor the histogram)."""
    line = (f"{len(scores)} student{'s' * (len(scores) != 1)} handed in a notebook: mean "
            f"{sum(scores) / len(scores):.2f} of {maximum:g} after late penalties, full marks: "
            f"{sum(s >= maximum for s in scores)}."
            if scores else "No student handed in a notebook.")
    return line + (f" {nothing} handed in nothing (score 0 in grades.csv; not in the mean or the histogram)."
                   if nothing else "")


def write_report(out: Path) -> Path:
    """Write OUT/report/ from OUT/grades.csv, OUT/exercises.csv and the autograded
    notebooks; returns the HTML page's path."""
    folder = out / "report"
    folder.mkdir(exist_ok=True)
    totals, maxima, exercises = collect(out)
    by_chapter: dict[str, list[Exercise]] = defaultdict(list)
    for ex in exercises:
        by_chapter[ex.chapter].append(ex)
    for chapter, listed in by_chapter.items():  # in the notebook's order (exercises.csv's is the ids')
        order = {gid: i for i, gid in enumerate(_titles(out, chapter))}
        listed.sort(key=lambda ex: order.get(ex.grade_id, len(order)))
    with open(folder / "exercises.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["assignment", "grade_id", "students", "mean", "max_score", "full_marks_share",
                    "most_common_failure", "students_with_it"])
        for ex in (ex for chapter in sorted(by_chapter) for ex in by_chapter[chapter]):
            reason, count = ex.common_reason()
            w.writerow([ex.chapter, ex.grade_id, len(ex.scores), round(ex.mean, 3), ex.max_score,
                        round(ex.full_share, 3), reason, count])
    parts = ["<!doctype html><meta charset='utf-8'><title>Grading report</title>", f"<style>{_STYLE}</style>",
             "<h1>Grading report</h1>"]
    nothing = handed_in_nothing(out)
    for chapter in sorted(maxima):
        scores = totals[chapter]
        parts.append(f"<h2>{html.escape(chapter)}</h2><p>{summary(scores, maxima[chapter], nothing[chapter])}</p>")
        for name in _plots(folder, chapter, scores, maxima[chapter], by_chapter[chapter]):
            parts.append(f"<img src='{html.escape(name)}' alt='{html.escape(name)}'>")
        parts.append("<table><tr><th>exercise</th><th>mean (before late penalties)</th><th>full marks</th>"
                     "<th>most common reasons for lost points (students)</th></tr>")
        titles = _titles(out, chapter)
        for ex in by_chapter[chapter]:
            reasons = "".join(f"<li>{html.escape(r)} ({n})</li>" for r, n in ex.ranked_reasons()[:TOP_REASONS])
            flags = ("<p>Answers that name a function this exercise forbids (read them): " + ", ".join(
                f"{html.escape(who)} ({html.escape(', '.join(names))})" for who, names in sorted(ex.flagged.items()))
                + "</p>") if ex.flagged else ""  # the judge cannot tell how a result was made: a person can
            replays = "".join(
                f"<p>Judged on the student's own {html.escape(pieces)} (which differ from the answer and lose "
                f"their points in their own exercise): {n} student{'s' * (n != 1)}</p>"
                for pieces, n in sorted(ex.replayed_on.items()))
            name = html.escape(titles.get(ex.grade_id, ""))
            parts.append(f"<tr><td>{name + '<br>' if name else ''}<code>{html.escape(ex.grade_id)}</code></td>"
                         f"<td class='n'>{ex.mean:.2f} / "
                         f"{ex.max_score:g}</td><td class='n'>{100 * ex.full_share:.0f}%</td>"
                         f"<td>{f'<ol>{reasons}</ol>' if reasons else '—'}{flags}{replays}</td></tr>")
        parts.append("</table>")
    page = folder / "index.html"
    page.write_text("\n".join(parts) + "\n")
    return page
