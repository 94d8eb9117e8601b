"""The judge's verdict on one test cell, as nbgrader scores it."""

from __future__ import annotations

import nbformat
import pytest
from nbgrader import utils

from autograder import judge
from course.protocol import cell_score, record_name

SOURCE = 'check("topic.a", f)\ncheck("topic.b", f)\n### BEGIN HIDDEN TESTS\ncheck("topic.a", f, hidden=True)\n'


@pytest.mark.parametrize("points,passed,total,score", [
    (3.0, 3, 3, 3.0), (3.0, 0, 3, 0.0), (3.0, 1, 3, 1.0), (2.0, 1, 3, 0.67), (2.0, 0, 0, 0.0), (1.5, 2, 2, 1.5)])
def test_cell_score_shares_points_equally_between_checks(points, passed, total, score):
    assert cell_score(points, passed, total) == score


def nbgrader_score(outputs: list, points: float) -> float:
    """The score nbgrader's own rule gives a test cell with these outputs."""
    cell = nbformat.v4.new_code_cell(SOURCE, outputs=outputs, metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "points": points, "grade_id": "t", "schema_version": 3}})
    return utils.determine_grade(cell)[0]


@pytest.mark.parametrize("passing,expected", [({"topic.a", "topic.b", "topic.a hidden"}, 3.0),
                                              ({"topic.a", "topic.b"}, 2.0), ({"topic.b"}, 1.0), (set(), 0.0)])
def test_cell_verdict_is_scored_by_nbgrader_as_the_judge_decided(tmp_path, monkeypatch, passing, expected):
    for name, hidden in judge.checks_in_source(SOURCE):
        (tmp_path / record_name(name, hidden)).write_text(f"{name}{' hidden' * hidden}")
    seen = []

    def judge_record(name, hidden, text):
        seen.append((name, hidden))
        return text in passing, f"{text}: {'ok' if text in passing else 'wrong'}"

    outputs = judge.cell_verdict(SOURCE, 3.0, tmp_path, judge_record)
    assert seen == [("topic.a", False), ("topic.b", False), ("topic.a", True)]
    assert outputs[0].text.splitlines()[0] == f"topic.a: {'ok' if 'topic.a' in passing else 'wrong'}"
    assert nbgrader_score(outputs, 3.0) == expected


def test_cell_without_checks_earns_nothing(tmp_path):
    outputs = judge.cell_verdict("print('all tests passed')", 3.0, tmp_path, lambda *a: (True, "ok"))
    assert "calls no check" in outputs[0].text and nbgrader_score(outputs, 3.0) == 0.0


def test_a_check_that_crashes_in_the_judge_fails_alone(tmp_path, monkeypatch):
    def judge_record(name, hidden, text):
        if name == "topic.b":
            raise RuntimeError("bug in the course's check")
        return True, "ok"

    outputs = judge.cell_verdict(SOURCE, 3.0, tmp_path, judge_record)
    assert "could not evaluate" in outputs[0].text and nbgrader_score(outputs, 3.0) == 2.0


# ------------------------------------------------------ verdicts as data ---

NAME = "introduction.linear_rows"


def recorded(fn, hidden: bool = False, seed: int | None = None) -> str:
    """What a kernel records for `fn` on check `NAME`'s cases (drawn from `seed`)."""
    from course.checks import framework
    from course.probing.plain import encode

    check_ = framework.get_check(NAME)
    return encode(framework.student_entries(check_, fn, check_.make_cases(hidden, seed)))


def test_a_checks_verdict_carries_the_same_verdict_as_data():
    """The judge's (passed, report) pair holds its record: the failed cases shown, each with its
    problem and hint, and whether the hint is a known mistake's or the check's general one."""
    import json

    from course.checks import framework
    from course.probing import verdicts
    from course.reference.introduction import linear_rows

    def stub(x, w, b):
        raise NotImplementedError()

    check_ = framework.get_check(NAME)
    good = framework.judge_record(NAME, False, None, recorded(linear_rows))
    assert good == (True, good.text) and good.record == {
        "check": NAME, "hidden": False, "passed": True, "category": None, "cases": 2, "failed": 0, "guard": False,
        "reached": [], "replayed": 0, "replayed_on": "", "shown": []}
    no_bias = framework.judge_record(NAME, False, None, recorded(lambda x, w, b: x @ w))
    record = no_bias.record
    assert not no_bias.passed and (record["passed"], record["category"], record["failed"]) == (False, None, 2)
    first = record["shown"][0]
    assert first["mistake"] and first["hint"] == "Did you forget to add the bias b?"
    assert f"case '{first['label']}': {first['problem']}. {first['hint']}" in no_bias.text
    doubled = framework.judge_record(NAME, False, None, recorded(lambda x, w, b: 2 * (x @ w + b))).record
    assert all(not c["mistake"] and c["hint"] == check_.hint for c in doubled["shown"])  # the general hint
    assert framework.judge_record(NAME, False, None, recorded(stub)).record["category"] == verdicts.NOT_IMPLEMENTED
    missing = framework.judge_record(NAME, True, 7, None).record
    assert (missing["passed"], missing["category"], missing["cases"]) == (False, verdicts.NO_RESULTS, 6)
    garbled = framework.judge_record(NAME, False, None, "[1, 2")
    assert garbled.record["category"] == verdicts.UNREADABLE and "unreadable" in garbled.text
    assert framework.judge_record("introduction.no_such", False, None, None).record["category"] == verdicts.UNAVAILABLE
    assert json.loads(json.dumps(record)) == record  # plain JSON


def test_cell_records_come_from_the_judge_or_say_only_whether_a_plain_verdict_passed(tmp_path):
    from course.probing import verdicts

    def judge_record(name, hidden, text):
        if name == "topic.b":
            raise RuntimeError("bug in the course's check")
        return not hidden, "some report"

    outputs, records = judge.judge_cell(SOURCE, 3.0, tmp_path, judge_record)
    assert [(r["check"], r["hidden"], r["passed"], r["category"]) for r in records] == [
        ("topic.a", False, True, None), ("topic.b", False, False, verdicts.JUDGE_ERROR), ("topic.a", True, False, None)]
    assert outputs == judge.cell_verdict(SOURCE, 3.0, tmp_path, judge_record)
    assert judge.judge_cell("x = 1", 3.0, tmp_path, judge_record)[1] == []


def grade_cell(source: str, gid: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "points": 2.0, "grade_id": gid, "schema_version": 3}})


def test_the_judge_writes_its_verdicts_as_data_in_the_graders_folder_not_the_students(tmp_path):
    """`JudgeChecks` leaves the test cells' text as it was, and writes each cell's verdicts as data
    to its `verdicts_dir` (the course folder's status folder), tied to the cell's report by a digest."""
    import json

    from course.checks import framework
    from course.probing import verdicts
    from course.protocol import PROBE_DIRNAME, verdicts_name
    from course.reference.introduction import linear_rows

    secret, status = tmp_path / "secret", tmp_path / "course" / "status"
    secret.write_bytes(b"a grading secret for this test")
    folder = tmp_path / "course" / "autograded" / "s1" / "ch"
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[grade_cell(f'check("{NAME}", linear_rows)', "visible"),
                                         grade_cell(f'check("{NAME}", linear_rows, hidden=True)', "hidden")])
    resources = {"metadata": {"path": str(folder)}, "nbgrader": {"student": "s1", "assignment": "ch", "notebook": "ch"}}
    judge.PrepareProbes(secret_file=str(secret)).preprocess(nb, resources)
    seed = framework.seed_for(secret.read_bytes(), "s1", "ch", framework.submission_code(nb.cells))
    (folder / PROBE_DIRNAME / record_name(NAME, False)).write_text(recorded(linear_rows, False, seed))
    nb, _ = judge.JudgeChecks(secret_file=str(secret), verdicts_dir=str(status)).preprocess(nb, resources)
    assert list(folder.iterdir()) == []  # nothing of the grader's is left in the student's folder
    assert nb.cells[0].outputs[0].text.startswith("✓") and nb.cells[1].outputs[-1].output_type == "error"
    data = json.loads((status / verdicts_name("s1", "ch")).read_text())
    assert (data["format"], data["student"], data["assignment"], data["notebook"]) == (1, "s1", "ch", "ch")
    assert {gid: cell["digest"] for gid, cell in data["cells"].items()} == {
        "visible": judge.report_digest(nb.cells[0].outputs), "hidden": judge.report_digest(nb.cells[1].outputs)}
    [shown], [hidden] = data["cells"]["visible"]["checks"], data["cells"]["hidden"]["checks"]
    assert (shown["check"], shown["hidden"], shown["passed"]) == (NAME, False, True)
    assert (hidden["hidden"], hidden["passed"], hidden["category"]) == (True, False, verdicts.NO_RESULTS)
    assert sorted(p.name for p in status.iterdir()) == [verdicts_name("s1", "ch")]  # written whole, in one go


def test_the_grader_sends_the_verdicts_to_the_course_folders_status_folder(tmp_path):
    from autograder.limits import Limits
    from autograder.nbconfig import nbgrader_config
    from course.protocol import STATUS_DIR

    config = nbgrader_config(tmp_path, tmp_path / "secret", "k", Limits())
    assert config.JudgeChecks.verdicts_dir == str(tmp_path / STATUS_DIR) == config.GuardedExecute.status_dir


def test_cases_are_drawn_for_the_notebook_handed_in(tmp_path):
    """The same notebook gets the same cases on every run (re-grading changes nothing); a notebook
    whose code changed, even by a comment, gets other ones: expected values read in feedback cannot
    be written back into a resubmission."""
    secret = tmp_path / "secret"
    secret.write_bytes(b"s" * 32)
    info = {"student": "ada", "assignment": "00_introduction"}
    first = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("def f(x):\n    return x")])
    again = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("def f(x):\n    return x")])
    edited = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("def f(x):\n    return x  # 42")])
    assert judge._seed(str(secret), info, first) == judge._seed(str(secret), info, again)
    assert judge._seed(str(secret), info, first) != judge._seed(str(secret), info, edited)


def test_a_looping_answer_is_given_up_per_case_and_not_run_again(tmp_path, monkeypatch):
    """In the grader's kernel a case that runs past `runner.CASE_SECONDS` is stopped (a loop that catches
    every Exception included), the check's later cases are not run, nor its hidden ones: a notebook whose
    every function loops costs seconds per check, and its test cells still run."""
    import time

    from course.checks import framework
    from course.probing import runner

    monkeypatch.setattr(runner, "CASE_SECONDS", 0.3)

    def linear_rows(x, W, b):
        while True:
            try:
                sum(range(10_000))
            except Exception:
                pass
    name = "introduction.linear_rows"
    framework.write_cases(tmp_path, [(name, False), (name, True)], 11)
    start = time.monotonic()
    runner.record(name, linear_rows, False, tmp_path)
    runner.record(name, linear_rows, True, tmp_path)
    assert time.monotonic() - start < 2.0
    for hidden in (False, True):
        verdict = framework.judge_record(name, hidden, 11, (tmp_path / record_name(name, hidden)).read_text())
        assert not verdict.passed and "does it loop forever?" in verdict.text


def test_a_case_is_timed_by_the_processor_time_it_uses_not_by_the_clock(tmp_path, monkeypatch):
    """On a loaded machine a kernel waits for a core: waiting costs a case nothing. A correct answer that
    waits longer than `runner.CASE_SECONDS` on each call passes; so does one whose first call imports a
    module that computes for longer than that (torch's first optimiser imports torch._dynamo) and then
    works within the limit, and the module is whole afterwards: a case is never stopped half-way through
    an import, and the import's time is not charged to the code after it."""
    import sys
    import time

    from course.checks import framework
    from course.probing import runner
    from course.reference.introduction import linear_rows as reference

    monkeypatch.setattr(runner, "CASE_SECONDS", 0.3)
    (tmp_path / "slow_to_import.py").write_text(
        "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.6:\n    pass\nWHOLE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def waits(x, W, b):
        time.sleep(0.4)
        return reference(x, W, b)

    def imports(x, W, b):
        import slow_to_import
        start = time.process_time()
        while time.process_time() - start < 0.1:  # work of its own after the import, within the limit
            pass
        return reference(x, W, b) if slow_to_import.WHOLE else None

    name = "introduction.linear_rows"
    for answer in (waits, imports):
        probes = tmp_path / answer.__name__
        probes.mkdir()
        framework.write_cases(probes, [(name, False)], 11)
        runner.record(name, answer, False, probes)
        verdict = framework.judge_record(name, False, 11, (probes / record_name(name, False)).read_text())
        assert verdict.passed, (answer.__name__, verdict.text)
    assert sys.modules["slow_to_import"].WHOLE
