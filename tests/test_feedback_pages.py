"""The feedback pages students get (`autograder.feedback`): citations as text, maths rendered by
the course's own MathJax with the network off, exercises named in the table of contents, test
results that wrap at the page's width (1280 px and a phone) with every output labelled, and a late
notebook's lateness, policy and penalty spelled out."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import html
import re
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from test_book import Browser, _chromium
from test_grading import SOLUTION, graded, real_graded, slug

from autograder import feedback, late
from autograder.chapters import get_chapter
from autograder.gradebook import open_gradebook
from autograder.limits import Limits
from autograder.nbconfig import nbgrader_config, write_config

CH = get_chapter("00_introduction")  # the smallest chapter with citations, maths and a written answer
NBGRADER_TOC = '<li><a href="#test-x">Test cell</a> (Score: 1.0 / 1.0)</li><li><a href="#comment-x">Comment</a></li>'
NBGRADER_MATHJAX = ('<!-- Load mathjax -->\n'
                    '<script src="https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js"></script>\n'
                    '<script type="text/x-mathjax-config">init_mathjax();</script>\n'
                    '<!-- End of mathjax configuration -->')
# Rendered maths, TeX left raw outside code, citations left as MyST, and requests to anything but the page's files.
PAGE_JS = r"""(() => ({
  mjx: document.querySelectorAll('mjx-container').length,
  rawTex: (document.body.innerText.match(/\$[^$\n]*\\[a-z]+[^$\n]*\$/g) || []).length,
  cite: document.body.innerText.includes('{cite'),
  elsewhere: performance.getEntriesByType('resource').map(r => r.name).filter(u => !u.startsWith('file:')),
}))()"""


def test_render_cites_names_exercises_and_loads_the_local_mathjax():
    page = (f"<head>{NBGRADER_MATHJAX}</head><p>As {{cite:t}}<code>vaswani2017attention</code> showed "
            f"{{cite}}<code>ba2016layer,nobody2099</code>.</p>{NBGRADER_TOC}")
    title = "Exercise 0.1: a linear layer"
    out = feedback.render(page, {"test-x": title, "x": title}, "../../_assets/mathjax/tex-svg-full.js")
    assert "As Vaswani et al. (2017) showed (Ba et al., 2016; nobody2099)." in out
    assert '<a href="#test-x">Exercise 0.1: a linear layer</a>' in out
    assert '<a href="#comment-x">Comment on Exercise 0.1: a linear layer</a>' in out
    assert "cdnjs" not in out and '<script src="../../_assets/mathjax/tex-svg-full.js"></script>' in out


# ------------------------------------------------------- a page as nbgrader renders it, then ours ---

HINT = "Did you put eps outside the square root?"
REPORT = ("✓ add_norm.layer_norm: 3 visible cases pass\n✗ add_norm.layer_norm: 2 of 6 hidden cases failed\n"
          "  - case 'x (3, 17, 48), eps 1e-05, mean 3.2': values differ: largest error 0.000481 at index "
          f"(2, 11, 37) (expected -1.73204, got -1.73156). {HINT}\n")


def nbgrader_page(cells: list, score: float, max_score: float, late_penalty: float = 0.0) -> str:
    """A feedback page as nbgrader's ``generate_feedback`` writes it: `cells` through nbgrader's own
    feedback template, set up as `GenerateFeedback` sets it up, with the scores ``GetGrades`` puts in
    (`score` is before the `late_penalty`)."""
    import nbgrader
    from nbconvert.exporters import HTMLExporter
    from traitlets.config import Config

    formgrader = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    c = Config()
    c.HTMLExporter.template_name = "feedback"
    c.HTMLExporter.extra_template_basedirs = [str(formgrader / "templates")]
    c.HTMLExporter.extra_template_paths = [str(formgrader / "static" / "node_modules" / "bootstrap" / "dist" / "css")]
    resources = {"nbgrader": {"notebook": "06_add_norm", "score": score - late_penalty, "max_score": max_score,
                              "late_penalty": late_penalty}}
    page, _ = HTMLExporter(config=c).from_notebook_node(nbformat.v4.new_notebook(cells=cells), resources=resources)
    return page


def graded_cell(grade_id: str, points: float, score: float, outputs: list, count: int, answer: bool = False):
    """A code cell of an autograded notebook: a test cell (or an `answer` cell) with its score."""
    meta = {"grade": not answer, "solution": answer, "locked": not answer, "grade_id": grade_id,
            "schema_version": 3, **({} if answer else {"points": points, "score": score})}
    source = "def layer_norm(x):\n    ..." if answer else f'check("add_norm.{grade_id}", layer_norm)'
    return nbformat.v4.new_code_cell(source, execution_count=count, outputs=outputs, metadata={"nbgrader": meta})


def report(text: str = REPORT):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def a_graded_notebook() -> list:
    """A heading, an answer, and test cells as the judge leaves them (`judge.judge_cell`): passed
    (its report), partly passed (its report and the partial score as the cell's result, which nbgrader
    reads) and failed (its report and an error); and a cell of the student's own with a result."""
    partial = nbformat.v4.new_output("execute_result", data={"text/plain": "0.5"}, execution_count=None)
    failed = nbformat.v4.new_output("error", ename="CheckFailed", evalue="no check in this cell earned points",
                                    traceback=[])
    return [nbformat.v4.new_markdown_cell("## Exercise 6.1: layer normalisation"),
            graded_cell("layer-norm", 0, 0, [], 4, answer=True),
            graded_cell("test-layer-norm", 1, 0.5, [report(), partial], 5),
            graded_cell("test-layer-norm-module", 2, 0, [report(), failed], 6),
            graded_cell("test-residual", 1, 1, [report("✓ add_norm.residual: 2 visible cases pass\n")], 7),
            nbformat.v4.new_code_cell("layer_norm(x).shape", execution_count=8, outputs=[
                nbformat.v4.new_output("execute_result", data={"text/plain": "torch.Size([3, 17, 48])"},
                                       execution_count=8)])]


def visible_text(page: str) -> str:
    """The page's text as a reader sees it, roughly: no head, no tags, entities decoded."""
    body = page[page.index("</head>"):]
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def test_render_wraps_results_at_the_page_width_and_labels_every_test_output():
    page = nbgrader_page(a_graded_notebook(), 1.5, 4)
    assert "Out[5]:" in page and "<pre>0.5</pre>" in page
    assert 'name="viewport"' not in page  # what the tester saw: a bare 0.5, no viewport, nothing wraps
    out = feedback.render(page, {}, None)

    head = out[:out.index("</head>")]
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in head
    assert head.rindex("<style") == head.index(feedback.READING_STYLE)  # last: it wins over nbgrader's
    style = feedback.READING_STYLE
    assert re.search(r"div\.output_subarea pre[^{}]*\{white-space:pre-wrap;overflow-wrap:anywhere", style)
    assert "div.prompt{display:none}" in style  # In [5]: / Out[8]: counts are the grader's, not the reader's

    # every test cell's output says what it is, and no output of one shows a prompt number
    assert "Partial credit: 0.5 of 1 point" in out and "No credit: 0 of 2 points" in out
    assert out.count('<p class="course-label">Test results</p><pre class="course-results">') == 3
    tests = [c for c in re.split(r'(?=<div class="cell[ "])', out) if "Grade cell:" in c]
    assert len(tests) == 3
    for cell in tests:
        areas = cell.split('<div class="output_area">')[1:]
        assert areas and all('class="course-label"' in a or 'class="course-credit"' in a for a in areas), cell
        assert "Out[" not in cell and "output_prompt" not in cell and "<pre>0.5</pre>" not in cell
    assert "<pre></pre>" not in out  # the failed cell's empty error box: its label replaces it
    assert HINT in visible_text(out) and "torch.Size([3, 17, 48])" in visible_text(out)  # nothing else lost


def test_render_says_how_late_under_which_policy_and_what_it_cost():
    page = nbgrader_page(a_graded_notebook(), 9, 10, late_penalty=1.8)
    assert "Late submission penalty (Score: -1.8)" in page  # nbgrader's line: how late? which policy?
    note = late.describe_late_work(30 * 3600, dt.datetime(2026, 10, 9, 5, 59), dt.datetime(2026, 10, 7, 23, 59),
                                   dt.timedelta(days=2), "10% per day", points=9, penalty=1.8, max_score=10)
    out = feedback.render(page, {}, None, note)
    assert "Late submission penalty" not in out
    text = " ".join(visible_text(out).split())
    assert ("06_add_norm (Score: 7.2 / 10.0) Handed in late: 2026-10-09 05:59 UTC, 1 day 6 h after your due date "
            "of 2026-10-07 23:59 UTC (the chapter's due date, 2026-10-05 23:59 UTC, with your extension of 2 days). "
            "Late policy: 10% of the points per day late, per started day (2 started days: 20%). "
            "Points taken: 1.8 of the 9 points your notebook earned, so your score is 7.2 of 10.") in text
    assert out.index('class="late-note"') < out.index('<div id="toc">')  # under the score, above the exercises


def test_lateness_is_described_for_every_policy():
    due = dt.datetime(2026, 10, 5, 23, 59)
    assert late.describe_late_work(0, due, due, None, "10% per day", 9, 0, 10) is None
    assert late.describe_late_work(-60, due, due, None, "zero", 9, 0, 10) is None
    hour = late.describe_late_work(3600, due + dt.timedelta(hours=1), due, None, "zero", 9, 9, 10)
    assert hour == ("Handed in late: 2026-10-06 00:59 UTC, 1 h after the due date of 2026-10-05 23:59 UTC. "
                    "Late policy: a notebook handed in late scores zero. Points taken: 9 of the 9 points your "
                    "notebook earned, so your score is 0 of 10.")
    free = late.describe_late_work(90, None, due, None, "none", 1, 0, 10)
    assert free == ("Handed in late: 2 min after the due date of 2026-10-05 23:59 UTC. Late policy: no penalty "
                    "for late work. Points taken: none.")
    capped = late.describe_late_work(12 * 86400, None, due, None, "25% per day", 1, 1, 3)
    assert "(12 started days: 100%). Points taken: 1 of the 1 point your notebook earned, so your score is 0 of 3." \
        in capped


def test_the_late_note_reads_the_gradebook_and_policy_the_notebook_was_graded_with(tmp_path):
    """`late.late_note`, as `grade.publish_feedback` calls it: nbgrader's gradebook (the due date with
    the student's extension, when it was handed in, the points and nbgrader's penalty) and the policy
    in the configuration nbgrader graded with (`nbconfig`)."""
    root, chapter = tmp_path / "nbgrader", "04_attention"
    config = nbgrader_config(root, tmp_path / "secret", "kernel", Limits(), "10% per day")
    config.CourseDirectory.db_url = f"sqlite:///{tmp_path / 'elsewhere.db'}"  # as `grade --db` sets it
    write_config(root, config)
    with open_gradebook(config.CourseDirectory.db_url) as gb, gb.db.no_autoflush:  # as `grade` adds them
        gb.add_assignment(chapter, duedate=dt.datetime(2026, 10, 5, 23, 59))
        gb.add_notebook(chapter, chapter)
        gb.add_grade_cell("test-attention", chapter, chapter, max_score=10, cell_type="code")
        for student, when, extension in (("1001", dt.datetime(2026, 10, 9, 5, 59), dt.timedelta(days=2)),
                                         ("1002", dt.datetime(2026, 10, 5, 23, 0), None)):
            gb.add_student(student)
            sub = gb.add_submission(chapter, student, timestamp=when, extension=extension)
            gb.find_grade("test-attention", chapter, chapter, student).auto_score = 9
            sub.notebooks[0].late_submission_penalty = 1.8 if student == "1001" else None
        gb.db.commit()
    note = late.late_note(root, chapter, "1001")
    assert note == ("Handed in late: 2026-10-09 05:59 UTC, 1 day 6 h after your due date of 2026-10-07 23:59 UTC "
                    "(the chapter's due date, 2026-10-05 23:59 UTC, with your extension of 2 days). Late policy: 10% "
                    "of the points per day late, per started day (2 started days: 20%). Points taken: 1.8 of the 9 "
                    "points your notebook earned, so your score is 7.2 of 10.")
    assert late.late_note(root, chapter, "1002") is None  # on time
    assert late.late_note(root, chapter, "1003") is None  # not in the gradebook
    assert late.late_note(tmp_path / "no-course", chapter, "1001") is None


@pytest.mark.slow
@pytest.mark.xdist_group(CH.id)
def test_every_feedback_page_of_a_graded_class_is_rendered_for_students(tmp_path_factory):
    out = graded(CH, tmp_path_factory).out
    pages = sorted((out / "feedback").glob(f"*/{CH.id}/{CH.id}.html"))
    assert len(pages) > 3
    mathjax = out / "feedback" / feedback.ASSETS / "mathjax" / feedback.MATHJAX.name
    assert mathjax.is_file()
    for page in pages:
        text = page.read_text()
        assert "{cite" not in text and ">Test cell</a>" not in text, page
        assert "Fontconfig" not in text, f"{page} shows a sandbox artefact"
        scripts = re.findall(r'<script[^>]* src="([^"]+)"', text)
        assert scripts == ["../../_assets/mathjax/tex-svg-full.js"], (page, scripts)
        assert (page.parent / scripts[0]).resolve() == mathjax.resolve()


@pytest.mark.slow
@pytest.mark.xdist_group(CH.id)
def test_feedback_page_renders_maths_and_citations_offline_in_chromium(tmp_path_factory):
    exe = _chromium()
    if exe is None:
        pytest.skip("chromium not installed (make setup installs it)")
    page = graded(CH, tmp_path_factory).out / "feedback" / SOLUTION / CH.id / f"{CH.id}.html"
    profile = tempfile.mkdtemp(prefix="feedback-chromium-")
    browser = Browser(exe, profile)  # every host name but 127.0.0.1 fails to resolve: no network
    try:
        browser.open_tab()
        browser.goto(page.as_uri())
        deadline = time.monotonic() + 45
        while (state := browser.eval(PAGE_JS))["mjx"] == 0 or state["rawTex"]:
            if time.monotonic() > deadline:
                break
            time.sleep(0.25)
    finally:
        browser.close()
    shutil.rmtree(profile, ignore_errors=True)
    assert state["mjx"] > 10 and state["rawTex"] == 0, state
    assert not state["cite"] and state["elsewhere"] == [], state


# --------------------------------------------- a graded page, read at 1280 px and on a phone ---

#: a mistake of the chapter's that the real autograder grades (`test_grading.real_graded`) and names
MISTAKE = next(m for m in real_graded(CH.topic) if m.hint.startswith("Did you"))
VIEWPORTS = {"1280x800": (1280, 800, False), "390x844": (390, 844, True)}  # a phone reads the viewport tag
# Scrolled to where the exercise's entry in the table of contents leads (its test cell), as a student
# following it sees the page: which test-result blocks are wider than the page or scroll sideways,
# which test outputs carry no label, any In [n]: / Out[n]: left, and where the mistake's hint lies.
READING_JS = r"""((anchor, hint) => {
  const target = document.querySelector(`a[name="${anchor}"]`);
  target.scrollIntoView({block: 'start'});
  const view = {w: document.documentElement.clientWidth, h: innerHeight};
  const tests = [...document.querySelectorAll('div.cell')].filter(
    c => (c.querySelector('.nbgrader-label') || {}).textContent?.startsWith('Grade cell'));
  const blocks = tests.flatMap(c => [...c.querySelectorAll('.output_subarea, .output_subarea pre')]);
  const wide = blocks.filter(b => b.scrollWidth > b.clientWidth || b.getBoundingClientRect().right > view.w)
                     .map(b => `${b.tagName}.${b.className}: ${b.scrollWidth} > ${b.clientWidth}`);
  const unlabelled = tests.flatMap(c => [...c.querySelectorAll('.output_area')])
                          .filter(a => !a.querySelector('.course-label, .course-credit')).length;
  const prompts = document.body.innerText.match(/\b(In|Out)\s*\[\s*\d*\s*\]:/g) || [];
  const pre = [...target.closest('div.cell').querySelectorAll('.output_stream pre')]
                .find(p => p.textContent.includes(hint));
  let where = null;
  if (pre) {
    const texts = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    let node;
    while ((node = texts.nextNode()) && !node.textContent.includes(hint));
    const range = document.createRange(), at = node.textContent.indexOf(hint);
    range.setStart(node, at);
    range.setEnd(node, at + hint.length);
    const r = range.getBoundingClientRect();
    where = {top: r.top, bottom: r.bottom, left: r.left, right: r.right};
  }
  const toc = document.querySelector(`#toc a[href="#${anchor}"]`);
  return {view, page: document.documentElement.scrollWidth, tests: tests.length, blocks: blocks.length, wide,
          unlabelled, prompts, hint: where, toc: toc && toc.textContent,
          credit: [...document.querySelectorAll('.course-credit')].map(e => e.textContent)};
})"""


def _shots_folder(tmp_path) -> Path:
    """Where the screenshots go: $FEEDBACK_SHOTS (to look at them), else the test's own folder."""
    folder = Path(os.environ.get("FEEDBACK_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.slow
@pytest.mark.xdist_group(CH.id)
def test_a_named_mistake_is_on_the_first_screen_of_its_exercise_at_1280px_and_on_a_phone(tmp_path_factory,
                                                                                       tmp_path):
    exe = _chromium()
    if exe is None:
        pytest.skip("chromium not installed (make setup installs it)")
    student, anchor = slug(MISTAKE.name), MISTAKE.loses[0]
    page = graded(CH, tmp_path_factory).out / "feedback" / student / CH.id / f"{CH.id}.html"
    assert MISTAKE.hint in html.unescape(page.read_text())
    shots = _shots_folder(tmp_path)
    profile = tempfile.mkdtemp(prefix="feedback-chromium-")
    browser = Browser(exe, profile)
    seen = {}
    try:
        browser.open_tab()
        for name, (width, height, mobile) in VIEWPORTS.items():
            browser.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                         mobile=mobile)
            browser.goto(page.as_uri())
            deadline = time.monotonic() + 45  # the maths first: it changes the page's height
            while (state := browser.eval(PAGE_JS))["mjx"] == 0 or state["rawTex"]:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.25)
            seen[name] = browser.eval(f"{READING_JS}({json.dumps(anchor)}, {json.dumps(MISTAKE.hint)})")
            shot = browser.call("Page.captureScreenshot", format="png")["data"]
            (shots / f"{student}-{name}.png").write_bytes(base64.b64decode(shot))
    finally:
        browser.close()
    shutil.rmtree(profile, ignore_errors=True)
    for name, (width, height, _) in VIEWPORTS.items():
        got = seen[name]
        assert got["view"]["h"] == height and got["view"]["w"] <= width, (name, got)  # not zoomed out
        assert got["toc"] and got["toc"].startswith("Exercise 0.1"), (name, got)  # the exercise's own entry
        assert got["tests"] >= 1 and got["blocks"] >= 2 and got["wide"] == [], (name, got)
        assert got["page"] <= got["view"]["w"], (name, got)  # nothing on the page scrolls it sideways
        assert got["unlabelled"] == 0 and got["prompts"] == [], (name, got)
        assert got["credit"] == ["No credit: 0 of 2 points"], (name, got)
        hint = got["hint"]
        assert hint is not None, (name, got)
        assert 0 <= hint["top"] and hint["bottom"] <= got["view"]["h"], (name, got)  # on the first screen
        assert 0 <= hint["left"] and hint["right"] <= got["view"]["w"], (name, got)  # not cut at the side
