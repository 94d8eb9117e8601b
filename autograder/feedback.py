"""The feedback pages students get: nbgrader's HTML, made readable offline.

nbgrader's ``generate_feedback`` renders the autograded notebook with its
own template, which leaves three things a student cannot use:

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
  as the book does.

`publish` applies all four while copying a page to ``OUT/feedback``.
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
# nbconvert's markdown renders {cite}`a,b` as {cite}<code>a,b</code>; {cite:t} names the authors in the text.
_CITE = re.compile(r"\{cite(?::(\w+))?\}<code>([^<]*)</code>")
_NBCONVERT_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)
_TOC_ENTRY = re.compile(r'<li><a href="#(comment-)?([^"]+)">(Test cell|Coding free-response|Written response|Task|'
                        r'Comment)</a>')
_EXERCISE = re.compile(r"^#+\s*(Exercise\b.*?)\s*$", re.M)


@functools.cache
def bibliography() -> dict[str, tuple[str, str]]:
    """{key: (authors as cited, year)} of ``references.bib``: "Vaswani et al.", "Ba and Kiros"."""
    from pybtex.database import parse_file
    from pybtex.richtext import Text

    cited = {}
    for key, entry in parse_file(str(BIBLIOGRAPHY)).entries.items():
        names = [Text.from_latex(" ".join(p.prelast_names + p.last_names)).render_as("text")
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


def render(page: str, titles: dict[str, str], mathjax: str | None) -> str:
    """nbgrader's feedback `page` with citations as text, the exercises' `titles` in its table of
    contents, its markdown tables drawn (`TABLE_STYLE`), and MathJax loaded from the relative URL `mathjax`
    (None: no maths rendering)."""
    page = _CITE.sub(lambda m: html.escape(cite_text(html.unescape(m.group(2)), m.group(1))), page)

    def entry(m: re.Match) -> str:
        title = titles.get(m.group(2))
        if title is None:
            return m.group(0)
        label = f"Comment on {title}" if m.group(1) else title
        return f'<li><a href="#{m.group(1) or ""}{m.group(2)}">{html.escape(label)}</a>'

    page = _TOC_ENTRY.sub(entry, page)
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


def publish(source: Path, dest: Path, feedback: Path, release: Path) -> None:
    """Write nbgrader's feedback page `source` to `dest`, a page under the folder `feedback`
    (OUT/feedback), rendered for students (`render`); `release` is the chapter's released notebook."""
    mathjax = None
    if install_mathjax(feedback):
        mathjax = Path(*[".."] * (len(dest.relative_to(feedback).parts) - 1), ASSETS, "mathjax", MATHJAX.name)
    else:
        _warn_no_mathjax()
    titles = exercise_titles(nbformat.read(release, as_version=4))
    dest.write_text(render(source.read_text(), titles, mathjax and mathjax.as_posix()))
