"""The feedback pages students get: nbgrader's HTML, made readable offline and on any screen.

nbgrader's ``generate_feedback`` renders the autograded notebook with its
own template, which leaves a student these problems; `render` fixes each:

* citations: the book's ``{cite}`key` `` role is MyST, which nbconvert does
  not know; `cite_text` writes each as author and year from
  ``references.bib`` (the bibliography the book prints), e.g.
  "(Vaswani et al., 2017)";
* maths: the template loads MathJax 2 from a CDN, so offline ``$\\sqrt{d_k}$``
  stays TeX. The page loads instead the course's own pinned MathJax 3
  (``.ci/fetch-book-assets``, the copy the book serves), one file
  (``tex-svg-full.js``: every TeX extension, SVG output, no fonts to fetch)
  copied once beside the feedback, ``OUT/feedback/_assets/mathjax/``. A page
  opened away from that folder shows the TeX source, never a request to
  another host;
* its table of contents says "Test cell" and "Comment": it names each
  exercise instead, from the chapter's headings (`exercise_titles`);
* its stylesheet draws the chapters' markdown tables without borders or
  spacing, their columns running into each other: `TABLE_STYLE` draws them
  as the book does;
* test results are fixed-width boxes that scroll sideways, so the mistake a
  failing case names at the end of its line ("Did you forget to add the
  bias b?") is cut off, and the page has no viewport tag, so a phone shows it
  zoomed out: `READING_STYLE` wraps every text output at the page's width and
  lays the page out for a narrow screen, and `VIEWPORT` sizes it to the device;
* outputs carry the grader's execution counts, ``In [5]:`` and ``Out[5]:``,
  and a partly passed test cell's score (the judge's ``execute_result``,
  which nbgrader reads) shows as a bare ``Out[5]: 0.5``: the prompts are
  hidden (outputs sit under their cell, as in the book) and a test cell's
  outputs are labelled (`label_test_outputs`): "Test results", "Partial
  credit: 0.5 of 1 point", "No credit: 0 of 2 points";
* a late notebook's page says only "Late submission penalty (Score: -1.8)":
  given a description of the lateness (`late.late_note`: when it was handed
  in, how late, against which due date and extension, the policy of
  ``schedule.yml`` and the points taken), the page says that under its score.

`publish` applies all of these while copying a page to ``OUT/feedback``.
"""

from __future__ import annotations

import functools
import html
import re
import shutil
import sys
from pathlib import Path

import nbformat

from .chapters import ROOT

BIBLIOGRAPHY = ROOT / "references.bib"
MATHJAX = ROOT / ".assets" / "book" / "_assets" / "mathjax" / "tex-svg-full.js"
ASSETS = "_assets"  # beside the students' folders in OUT/feedback (no student id starts with "_")
MATHJAX_CONFIG = ("<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], "
                  "displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']], processEscapes: true, "
                  "processEnvironments: true}};</script>")
TABLE_STYLE = ("<style>.text_cell_render table{border-collapse:collapse;margin:1em 0}"
               ".text_cell_render th,.text_cell_render td{border:1px solid #ccc;padding:4px 10px;"
               "vertical-align:top;text-align:left}.text_cell_render thead th{background:#f3f3f3}</style>")
VIEWPORT = '<meta name="viewport" content="width=device-width, initial-scale=1">'
# After nbgrader's and nbconvert's stylesheets (it goes last in <head>), so that it wins over them.
READING_STYLE = (
    "<style>"
    # In [5]: / Out[5]: are the grader's execution counts: outputs sit under their cell, as in the book
    "div.prompt{display:none}"
    "div.input,div.output_area{display:block}"
    "div.output_subarea{max-width:100%;min-width:0;padding:.4em 0}"
    # every text output, test results first, wraps at the page's width: nothing scrolls sideways
    "div.output_subarea pre,div.output_text pre{white-space:pre-wrap;overflow-wrap:anywhere;word-break:normal}"
    "div.output_text{overflow-x:visible}"
    # and so does prose: a long path in `code` broke out of the page on a phone
    ".text_cell_render,#toc,p.late-note{overflow-wrap:anywhere}"
    # a test result's wrapped line hangs under its text, not under its "  - case" or "✗"
    "pre.course-results>span{display:block;padding-left:4ch;text-indent:-4ch}"
    ".course-label{font-weight:bold;margin:0 0 .2em}"
    ".course-credit{font-weight:bold;margin:0}"
    "p.late-note{color:#d2413a;margin:.4em 0 0;font-size:14px}"
    # the cell headings' fixed height cut a wrapped label off on a narrow screen
    "div.nbgrader_cell .panel-heading{height:auto;overflow:hidden}"
    "div.output_subarea img,div.output_subarea svg{max-width:100%;height:auto}"
    'mjx-container[display="true"]{max-width:100%;overflow-x:auto;overflow-y:hidden}'
    ".text_cell_render table{display:block;max-width:100%;overflow-x:auto}"
    "@media (max-width:600px){body{padding-top:0}"
    ".container,#notebook-container,.panel-body,div.nbgrader_cell .panel-body{padding-left:4px;padding-right:4px}"
    "div.cell{padding:2px 0}.panel-heading h4{font-size:16px}"
    ".text_cell_render h1{font-size:26px}.text_cell_render h2{font-size:21px}.text_cell_render h3{font-size:18px}}"
    "</style>")
# nbconvert's markdown renders {cite}`a,b` as {cite}<code>a,b</code>; {cite:t} names the authors in the text.
_CITE = re.compile(r"\{cite(?::(\w+))?\}<code>([^<]*)</code>")
_NBCONVERT_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)
_TOC_ENTRY = re.compile(r'<li><a href="#(comment-)?([^"]+)">(Test cell|Coding free-response|Written response|Task|'
                        r'Comment)</a>')
_EXERCISE = re.compile(r"^#+\s*(Exercise\b.*?)\s*$", re.M)
# One cell of nbgrader's page, up to the next; a test cell's heading with its score.
_CELL = re.compile(r'(?=<div class="cell[ "])')
_TEST_HEADING = re.compile(r'<span class="nbgrader-label">Grade cell: <code>[^<]*</code></span>\s*'
                           r'<span class="pull-right">\s*Score: ([-\d.]+) / ([-\d.]+)')
_OUT_PROMPT = re.compile(r'<div class="prompt output_prompt">[^<]*</div>\s*')
_EXECUTE_RESULT = re.compile(r'(<div class="[^"]*\boutput_execute_result\b[^"]*">\s*)<pre>([^<]*)</pre>')
_ERROR = re.compile(r'(<div class="[^"]*\boutput_error\b[^"]*">\s*)<pre>(.*?)</pre>', re.S)
_STREAM = re.compile(r'(<div class="[^"]*\boutput_stream\b[^"]*">\s*)<pre>(.*?)</pre>', re.S)
_LATE_ITEM = re.compile(r'\s*<li class="late-penalty">.*?</li>', re.S)


@functools.cache
def bibliography() -> dict[str, tuple[str, str]]:
    """{key: (authors as cited, year)} of ``references.bib``: "Vaswani et al.", "Ba and Kiros"."""
    from pybtex.backends.plaintext import Backend
    from pybtex.database import parse_file
    from pybtex.richtext import Text

    plain = Backend()  # render_as("text") looks it up among every package's entry points, 13 s for the whole file
    cited = {}
    for key, entry in parse_file(str(BIBLIOGRAPHY)).entries.items():
        names = [Text.from_latex(" ".join(p.prelast_names + p.last_names)).render(plain)
                 for p in entry.persons.get("author", [])]
        authors = (names[0] if len(names) == 1 else " and ".join(names) if len(names) == 2
                   else f"{names[0]} et al." if names else key)
        cited[key] = (authors, entry.fields.get("year", "n.d."))
    return cited


def cite_text(keys: str, role: str | None = None) -> str:
    """What ``{cite}`keys` `` says in text: "(Vaswani et al., 2017; Ba et al., 2016)", or with role
    ``t`` "Vaswani et al. (2017)". An unknown key is shown as itself."""
    refs = [bibliography().get(k.strip(), (k.strip(), "")) for k in keys.split(",") if k.strip()]
    if role and role.startswith("t"):
        return "; ".join(f"{who} ({year})" if year else who for who, year in refs)
    return "(" + "; ".join(f"{who}, {year}" if year else who for who, year in refs) + ")"


def exercise_titles(nb: nbformat.NotebookNode) -> dict[str, str]:
    """{grade id: the title of the exercise it belongs to} (the last "Exercise ..." heading above it)."""
    titles, current = {}, None
    for cell in nb.cells:
        if cell.cell_type == "markdown" and (found := _EXERCISE.findall(cell.source)):
            current = found[-1]
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id and current:
            titles[grade_id] = current
    return titles


def _points(value: float) -> str:
    return f"{value:g} point{'s' * (value != 1)}"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def label_test_outputs(page: str) -> str:
    """nbgrader's feedback `page` with each test cell's outputs labelled: the judge's report as
    "Test results" (a block to a line, so that a wrapped line hangs under its text), its partial
    score (an ``execute_result``, which showed as ``Out[5]: 0.5``) as "Partial credit: 0.5 of 1
    point", and its error (no check passed) as "No credit: 0 of 1 point"."""

    def cell(chunk: str) -> str:
        heading = _TEST_HEADING.search(chunk)
        if heading is None:
            return chunk
        head, outputs = chunk[:heading.end()], chunk[heading.end():]
        points = _number(heading.group(2))
        of = f" of {_points(points)}" if points is not None else ""

        def result(m: re.Match) -> str:
            score = _number(html.unescape(m.group(2)).strip())
            if score is None:
                return f'{m.group(1)}<p class="course-label">Result</p><pre>{m.group(2)}</pre>'
            return f'{m.group(1)}<p class="course-credit">Partial credit: {score:g}{of}</p>'

        def error(m: re.Match) -> str:
            label = f'<p class="course-credit">No credit: 0{of}</p>'
            return m.group(1) + label + (f"<pre>{m.group(2)}</pre>" if m.group(2).strip() else "")

        def report(m: re.Match) -> str:
            text = m.group(2)
            if "<" not in text:  # plain text (no colours): a line each, so that a wrapped one hangs
                text = "".join(f"<span>{line}</span>" for line in text.rstrip("\n").split("\n"))
            return f'{m.group(1)}<p class="course-label">Test results</p><pre class="course-results">{text}</pre>'

        outputs = _STREAM.sub(report, outputs)
        outputs = _EXECUTE_RESULT.sub(result, _OUT_PROMPT.sub("", outputs))
        return head + _ERROR.sub(error, outputs)

    return "".join(cell(chunk) for chunk in _CELL.split(page))


def note_lateness(page: str, late: str) -> str:
    """nbgrader's feedback `page` with `late` (`late.late_note`) under its score, in place of nbgrader's
    "Late submission penalty (Score: -1.8)"."""
    note = f'<p class="late-note">{html.escape(late)}</p>'
    if "</h4>" not in page:
        return _LATE_ITEM.sub(lambda _: f'<li class="late-penalty">{html.escape(late)}</li>', page, count=1)
    return _LATE_ITEM.sub("", page).replace("</h4>", "</h4>" + note, 1)


def render(page: str, titles: dict[str, str], mathjax: str | None, late: str | None = None) -> str:
    """nbgrader's feedback `page` with citations as text, the exercises' `titles` in its table of
    contents, its markdown tables drawn (`TABLE_STYLE`), MathJax loaded from the relative URL `mathjax`
    (None: no maths rendering), laid out for any screen (`VIEWPORT`, `READING_STYLE`), test cells'
    outputs labelled (`label_test_outputs`), and `late`, what made the notebook late and what that
    cost (`late.late_note`; None: nbgrader's own line, if any), under its score."""
    page = _CITE.sub(lambda m: html.escape(cite_text(html.unescape(m.group(2)), m.group(1))), page)

    def entry(m: re.Match) -> str:
        title = titles.get(m.group(2))
        if title is None:
            return m.group(0)
        label = f"Comment on {title}" if m.group(1) else title
        return f'<li><a href="#{m.group(1) or ""}{m.group(2)}">{html.escape(label)}</a>'

    page = _TOC_ENTRY.sub(entry, page)
    page = label_test_outputs(page)
    if late:
        page = note_lateness(page, late)
    page = page.replace("</head>", f"{VIEWPORT}\n{READING_STYLE}\n</head>", 1)
    script = TABLE_STYLE + (f'\n{MATHJAX_CONFIG}\n<script src="{html.escape(mathjax)}"></script>' if mathjax else "")
    return _NBCONVERT_MATHJAX.sub(lambda _: script, page)


def install_mathjax(feedback: Path) -> bool:
    """Copy the course's MathJax into ``feedback/_assets/mathjax/`` (once); False if there is none
    (``.ci/fetch-book-assets``, run by ``make setup``, makes it)."""
    if not MATHJAX.is_file():
        return False
    dest = feedback / ASSETS / "mathjax" / MATHJAX.name
    if not dest.is_file() or dest.stat().st_size != MATHJAX.stat().st_size:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(MATHJAX, dest)
    return True


@functools.cache
def _warn_no_mathjax() -> None:
    print(f"warning: no {MATHJAX.relative_to(ROOT)} (run .ci/fetch-book-assets): feedback pages show "
          "maths as TeX", file=sys.stderr)


def publish(source: Path, dest: Path, feedback: Path, release: Path, late: str | None = None) -> None:
    """Write nbgrader's feedback page `source` to `dest`, a page under the folder `feedback`
    (OUT/feedback), rendered for students (`render`); `release` is the chapter's released notebook,
    `late` what made the notebook late and what that cost (`late.late_note`), if it was."""
    mathjax = None
    if install_mathjax(feedback):
        mathjax = Path(*[".."] * (len(dest.relative_to(feedback).parts) - 1), ASSETS, "mathjax", MATHJAX.name)
    else:
        _warn_no_mathjax()
    titles = exercise_titles(nbformat.read(release, as_version=4))
    dest.write_text(render(source.read_text(), titles, mathjax and mathjax.as_posix(), late))
