"""The instructor's report (`autograder.report`) on small hand-made classes: no grading needed."""

from collections import Counter

from autograder.report import NOT_ATTEMPTED, Exercise, collect, failure_reason, write_report
from autograder.results import Row, write_csvs

CH = "04_attention"


def test_reasons_carry_no_numbers_not_even_at_the_end_of_a_sentence():
    report = "✗ attention.nothing_such: 1 of 3 cases wrong\n  - case 'x: (2, 3)': expected 3 items, got 29.\n"
    assert failure_reason(report) == "expected N items, got N"


def test_a_real_mistake_ranks_before_a_plain_category_as_common():
    hint = "Did you skip subtracting the maximum?"
    ex = Exercise(CH, "test-softmax", 2.0, reasons=Counter({NOT_ATTEMPTED: 3, "raised ValueError": 1, hint: 3}))
    assert ex.common_reason() == (hint, 3)
    assert [r for r, _ in ex.ranked_reasons()] == [hint, NOT_ATTEMPTED, "raised ValueError"]


def test_students_who_handed_in_nothing_are_counted_apart(tmp_path):
    rows = [Row("1001", CH, 9.0, 9.0, "graded"), Row("1002", CH, 3.0, 9.0, "graded"),
            Row("1003", CH, 0.0, 9.0, "missing: nothing submitted"),
            Row("1004", CH, 0.0, 9.0, "missing notebook: expected 04_attention/04_attention.ipynb")]
    cells = [[s, CH, CH, "test-softmax", score, 9.0] for s, score in (("1001", 9.0), ("1002", 3.0))]
    write_csvs(tmp_path, rows, cells)
    totals, maxima, _ = collect(tmp_path)
    assert totals == {CH: [9.0, 3.0]} and maxima == {CH: 9.0}  # the histogram's and the mean's scores
    page = write_report(tmp_path).read_text()
    assert "2 students handed in a notebook: mean 6.00 of 9, full marks: 1. 2 handed in nothing" in page
