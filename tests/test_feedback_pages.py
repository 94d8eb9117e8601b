"""The feedback pages students get (`autograder.feedback`): citations as text, maths rendered by
the course's own MathJax with the network off, exercises named in the table of contents."""

from __future__ import annotations

import re
import shutil
import tempfile
import time

import pytest
from test_book import Browser, _chromium
from test_grading import SOLUTION, graded

from autograder import feedback
from autograder.chapters import get_chapter

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
