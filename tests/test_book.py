"""The book builds cleanly and renders offline.

One session-wide build (``rm -rf _build``, then ``jupyter-book build . -W``,
as `make book` and CI do), then checks on the result:

* no page loads a script or stylesheet from another host (MathJax, RequireJS
  and the ipywidgets manager come from ``_assets/``);
* headless Chromium, with every host name except 127.0.0.1 made unresolvable,
  opens each page of the table of contents from a local HTTP server, waits
  until MathJax has typeset and the widgets have rendered, saves a full-page
  screenshot (and one of the first widget) to ``_build/screenshots/`` and asserts, in the live DOM, that
  math became ``mjx-container`` elements (no TeX errors), that every embedded
  widget view was drawn, that every explorer (pages whose notebook shows
  one must have it) has a slider handle that moves when pressed and
  switches its figure (jslink, in the browser), and that the page asked
  for nothing but 127.0.0.1.

Page tests are named by file with '-' for '_' (``[04-attention]``), so that
``pytest -k 04_attention`` selects a chapter's tests without building the
book; ``pytest tests/test_book.py -k 04-attention`` renders one page.

Chromium is driven through the DevTools protocol over a pipe
(``--remote-debugging-pipe``: JSON messages ending in NUL on fds 3 and 4),
so the test needs only the ``chromium`` binary, no Python browser package.

Set ``BOOK_TEST_SOURCE=/some/dir`` to build another book folder instead of
the repository, e.g. a copy with stub chapters: it needs its own _config.yml,
_toc.yml, references.bib, bibliography.md, and a ``.assets`` symlink to the
repository's ``.assets``.
"""

from __future__ import annotations

import base64
import fcntl
import functools
import http.server
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_structure import toc_files

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("book")]  # one build, one worker

REPO = Path(__file__).resolve().parents[1]
SOURCE = Path(os.environ.get("BOOK_TEST_SOURCE", REPO)).resolve()
BUILD = SOURCE / "_build"
HTML = BUILD / "html"
SHOTS = BUILD / "screenshots"
BUILD_TIMEOUT = 1800  # seconds; every chapter notebook is executed


def _jupyter_book() -> str:
    exe = Path(sys.executable).parent / "jupyter-book"
    return str(exe) if exe.exists() else (shutil.which("jupyter-book") or "jupyter-book")


def _chromium() -> str | None:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


# --------------------------------------------------------------------------- build


@pytest.fixture(scope="session")
def book() -> subprocess.CompletedProcess:
    """Build the book once per session, from scratch, warnings as errors."""
    subprocess.run([str(REPO / ".ci" / "fetch-book-assets")], check=True, capture_output=True)
    shutil.rmtree(BUILD, ignore_errors=True)
    env = {**os.environ, "COURSE_BOOK_BUILD": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    started = time.monotonic()
    result = subprocess.run(
        [_jupyter_book(), "build", str(SOURCE), "-W", "--keep-going"],
        cwd=SOURCE, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
    )
    result.seconds = time.monotonic() - started  # type: ignore[attr-defined]
    return result


@pytest.fixture(scope="session")
def built(book) -> Path:
    if book.returncode != 0 or not (HTML / "index.html").exists():
        pytest.fail("the book did not build; see test_book_builds_without_warnings", pytrace=False)
    return HTML


def _warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if re.search(r"WARNING|ERROR|Traceback", line)
            and "Kernel is running over TCP" not in line]


def test_book_builds_without_warnings(book):
    output = book.stdout + book.stderr
    assert book.returncode == 0, "jupyter-book build -W failed:\n" + "\n".join(
        _warnings(output)[-40:] + ["--- the build's last lines ---"] + output.splitlines()[-60:])
    assert (HTML / "index.html").exists()
    print(f"book built in {book.seconds:.0f} s")


# --------------------------------------------------------------------------- pages


def _toc_pages() -> list[str]:
    """The pages of _toc.yml, in order, as paths under _build/html."""
    return [re.sub(r"\.(ipynb|md)$", "", p) + ".html" for p in toc_files(SOURCE)]


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.refs.append(a["src"])
        elif tag == "link" and a.get("href") and ("stylesheet" in (a.get("rel") or "")
                                                  or a.get("as") in {"script", "style", "font"}):
            self.refs.append(a["href"])


def test_no_page_loads_anything_from_another_host(built):
    offenders = {}
    for page in built.rglob("*.html"):
        parser = _Refs()
        parser.feed(page.read_text(encoding="utf-8"))
        remote = [r for r in parser.refs if "://" in r or r.startswith("//")]
        if remote:
            offenders[str(page.relative_to(built))] = remote
    assert not offenders, f"pages load scripts/styles from other hosts: {offenders}"
    for asset in ("_assets/mathjax/tex-mml-chtml.js", "_assets/requirejs/require.js",
                  "_assets/html-manager/embed-amd.js"):
        assert (built / asset).is_file(), f"{asset} missing from the built book"


def test_every_toc_page_was_built(built):
    missing = [p for p in _toc_pages() if not (built / p).is_file()]
    assert not missing, f"pages listed in _toc.yml but not built: {missing}"


# --------------------------------------------------------------------------- browser


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def server(built):
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(built)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe."""

    def __init__(self, exe: str, profile: str):
        cmd_r, cmd_w = os.pipe()  # we write commands; Chromium reads them on fd 3
        res_r, res_w = os.pipe()  # Chromium writes replies on fd 4; we read them
        # Move the child's ends above 10 so the 3< and 4> redirections below cannot clobber them.
        a, b = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(res_w, fcntl.F_DUPFD, 10)
        os.close(cmd_r)
        os.close(res_w)
        args = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-extensions", "--disable-default-apps", "--no-first-run",
            "--no-default-browser-check", "--mute-audio",
            # No network: every host name but 127.0.0.1 fails to resolve.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank",
        ]
        self.log = open(Path(profile) / "chromium.log", "wb")
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{a} 4>&{b} {a}<&- {b}>&-', exe, *args],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, pass_fds=(a, b))
        os.close(a)
        os.close(b)
        self.wfd, self.rfd = cmd_w, res_r
        self.buf = b""
        self.next_id = 0
        self.events: list[dict] = []
        self.session: str | None = None

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self.buf:
            ready, _, _ = select.select([self.rfd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("no reply from Chromium")
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium exited")
            self.buf += chunk
        message, _, self.buf = self.buf.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, timeout: float = 30, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self.wfd, data):]
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, name: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == name:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    def eval(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JS error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open_tab(self, width: int = 1280, height: int = 900):
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Network", "Runtime"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def goto(self, url: str):
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired", timeout=60)

    def requests(self) -> list[str]:
        """URLs of the requests seen since the last `goto`."""
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, path: Path, max_height: int = 16000, width: int = 1280, height: int = 900) -> float:
        """The page as a reader at `width` px sees it, top to `max_height`; returns the left edge of
        the book's sidebar at the moment of capture (0 when nothing is shifted sideways).

        The viewport is made as tall as the capture, then put back: captureBeyondViewport on the
        `height`-px viewport lays a long page out again and shifted it sideways, cutting the sidebar
        and the start of every line (chapters 5, 9, 10 and 11 came out that way)."""
        self.eval("window.scrollTo(0, 0)")
        full = min(int(self.eval("document.documentElement.scrollHeight")), max_height)
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=full, deviceScaleFactor=1, mobile=False)
        try:
            left = self.eval("""(async () => {
              await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
              window.scrollTo(0, 0);
              const bar = document.querySelector('.bd-sidebar-primary');
              return bar ? bar.getBoundingClientRect().left : 0;
            })()""")
            data = self.call("Page.captureScreenshot", format="png",
                             clip={"x": 0, "y": 0, "width": width, "height": full, "scale": 1}, timeout=60)["data"]
        finally:
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                      mobile=False)
        path.write_bytes(base64.b64decode(data))
        return left

    def screenshot_element(self, selector: str, path: Path, margin: int = 16):
        """Screenshot the first element matching `selector`, scrolled into view."""
        box = self.eval(f"""(() => {{
          const e = document.querySelector({json.dumps(selector)});
          e.scrollIntoView({{block: 'start'}});
          window.scrollBy(0, -{margin});
          const r = e.getBoundingClientRect();
          return {{x: r.left + scrollX, y: r.top + scrollY, w: e.scrollWidth, h: r.height}};
        }})()""")
        data = self.call("Page.captureScreenshot", format="png",
                         clip={"x": max(0, box["x"] - margin), "y": max(0, box["y"] - margin),
                               "width": box["w"] + 2 * margin,
                               "height": min(box["h"] + 2 * margin, 2000), "scale": 1},
                         captureBeyondViewport=box["h"] + 2 * margin > 900, timeout=60)["data"]
        path.write_bytes(base64.b64decode(data))
        self.eval("window.scrollTo(0, 0)")

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.wfd)
        os.close(self.rfd)
        self.log.close()


@pytest.fixture(scope="session")
def browser(built):
    exe = _chromium()
    if exe is None:
        pytest.skip("chromium not installed (make setup installs it)")
    profile = tempfile.mkdtemp(prefix="book-chromium-")
    b = Browser(exe, profile)
    try:
        b.open_tab()
        yield b
    finally:
        b.close()
        shutil.rmtree(profile, ignore_errors=True)


# State of the page, polled until everything that should render has rendered.
PAGE_STATE_JS = r"""(() => {
  const q = s => Array.from(document.querySelectorAll(s));
  const views = q('script[type="application/vnd.jupyter.widget-view+json"]');
  return {
    mathSource: q('.math').length,
    mjx: q('mjx-container').length,
    mathErrors: q('mjx-merror').map(e => e.getAttribute('data-mjx-error') || e.textContent),
    rawTex: q('.math').filter(e => !e.querySelector('mjx-container') &&
                                   /\\\(|\\\[|\$\$/.test(e.textContent)).length,
    widgetViews: views.length,
    widgetsDrawn: views.filter(s => s.previousElementSibling &&
        s.previousElementSibling.classList.contains('widget-subarea') &&
        s.previousElementSibling.querySelector('.jupyter-widgets')).length,
    widgetErrors: q('.widget-subarea').map(e => e.textContent)
                   .filter(t => /Error displaying widget|model not found/i.test(t)),
    sliders: q('.widget-slider').length,
  };
})()"""

# Every explorer on the page (a widget output holding sliders): press → on its
# first slider's handle and report whether the handle moved and the explorer's
# figure changed (images are compared by their pixels, not their blob: URLs).
# An explorer whose slider has no handle is reported with handle: false.
SLIDER_JS = r"""(async () => {
  const pixels = img => {
    const c = document.createElement('canvas');
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    c.getContext('2d').drawImage(img, 0, 0);
    return c.toDataURL();
  };
  const areas = Array.from(document.querySelectorAll('.widget-subarea'))
      .filter(a => a.querySelector('.widget-slider'));
  const results = [];
  for (const area of areas) {
    const slider = area.querySelector('.widget-slider');
    const label = slider.querySelector('.widget-label');
    const handle = slider.querySelector('.noUi-handle');
    const result = {slider: label ? label.textContent : '', handle: !!handle};
    results.push(result);
    if (!handle) continue;
    const shown = () => Array.from(area.querySelectorAll('img, .widget-html-content, pre'))
        .filter(e => e.offsetParent !== null && !e.closest('.widget-slider'))
        .map(e => e.tagName === 'IMG' ? (e.complete ? pixels(e) : 'loading') : e.textContent).join('|');
    const value = () => handle.getAttribute('aria-valuenow');
    const before = shown(), valueBefore = value();
    handle.focus();
    result.focused = document.activeElement === handle;
    handle.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowRight', keyCode: 39, which: 39, bubbles: true}));
    let after = shown();
    for (let i = 0; i < 50 && (after === before || after.includes('loading')); i++) {
      await new Promise(r => setTimeout(r, 100));
      after = shown();
    }
    Object.assign(result, {value: [valueBefore, value()], moved: value() !== valueBefore,
                           changed: after !== before, shownBefore: before.length,
                           shownAfter: after.length});
  }
  return results;
})()"""


def _wait_rendered(browser: Browser, timeout: float = 45) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        state = browser.eval(PAGE_STATE_JS)
        math_done = state["mathSource"] == 0 or (state["mjx"] > 0 and state["rawTex"] == 0)
        widgets_done = state["widgetsDrawn"] == state["widgetViews"]
        if (math_done and widgets_done) or time.monotonic() > deadline:
            return state
        time.sleep(0.25)


def _local(url: str, base: str) -> bool:
    return url.startswith(base) or url.split(":", 1)[0] in {"data", "blob", "about"}


def _page_id(page: str) -> str:
    """A page's test id: its file name with '-' for '_' (04-attention), so that
    ``pytest -k 04_attention``, which selects a chapter's tests, does not select
    its page here and build the whole book. Chapter ids always hold a '_'."""
    return Path(page).stem.replace("_", "-")


def _explorers_in_source(page: str) -> int:
    """How many explorers the page must show: the code cells of its notebook
    whose output is an `explorer(...)` (cells whose output is removed don't count)."""
    source = SOURCE / Path(page).with_suffix(".ipynb")
    if not source.is_file():
        return 0
    cells = json.loads(source.read_text(encoding="utf-8"))["cells"]
    hidden = {"remove-cell", "remove-output"}
    return sum(1 for c in cells if c["cell_type"] == "code"
               and not hidden & set(c.get("metadata", {}).get("tags", []))
               and re.search(r"^[^#\n]*\bexplorer\(", "".join(c["source"]), re.M))


def test_the_book_has_explorers():
    """Some pages must show explorers, so a book in which no slider renders anywhere fails
    test_page_renders_offline instead of passing for want of sliders to press."""
    pages = {p: n for p in _toc_pages() if (n := _explorers_in_source(p))}
    assert pages, "no page of _toc.yml shows an explorer(...): the slider checks would test nothing"


def _explorer_problems(page: str, expected: int, explorers: list[dict]) -> list[str]:
    """What is wrong with the explorers SLIDER_JS found on a page that must show `expected`."""
    problems = []
    if len(explorers) < expected:
        problems.append(f"{page}: its notebook shows {expected} explorer(s), the page has "
                        f"{len(explorers)} with a slider")
    for e in explorers:
        if not e["handle"]:
            problems.append(f"{page}: an explorer's slider has no handle to press: {e}")
        elif not e["moved"]:
            problems.append(f"{page}: pressing → did not move an explorer's slider: {e}")
        elif not e["changed"]:
            problems.append(f"{page}: moving an explorer's slider did not change its figure: {e}")
    return problems


@pytest.mark.parametrize("page", _toc_pages(), ids=_page_id)
def test_page_renders_offline(page, built, server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.goto(server + page)
    state = _wait_rendered(browser)
    name = page.replace("/", "__").removesuffix(".html")
    sidebar_left = browser.screenshot(SHOTS / f"{name}.png")
    assert sidebar_left == 0, f"{page}: the page was captured shifted sideways by {-sidebar_left} px"

    if state["mathSource"]:
        assert state["mjx"] > 0, f"MathJax did not typeset {page}: {state}"
        assert state["rawTex"] == 0, f"untypeset TeX left on {page}: {state}"
    assert not state["mathErrors"], f"TeX errors on {page}: {state['mathErrors']}"

    if state["widgetViews"]:
        assert state["widgetsDrawn"] == state["widgetViews"], f"widgets not drawn on {page}: {state}"
        assert not state["widgetErrors"], f"widget errors on {page}: {state['widgetErrors']}"
        browser.screenshot_element(".widget-subarea", SHOTS / f"{name}__widget.png")

    # Every explorer must respond to its slider; a page whose notebook shows explorers must
    # have them, with sliders (a page with none rendered fails here, it does not pass).
    problems = _explorer_problems(page, _explorers_in_source(page), browser.eval(SLIDER_JS))
    assert not problems, "\n".join(problems) + f"\npage state: {state}"

    foreign = [u for u in browser.requests() if not _local(u, server)]
    assert not foreign, f"{page} requested other hosts: {foreign}"


# Ways to break a page's explorers in the browser, each of which the checks above must report.
BREAKAGES = {
    "no slider rendered": ("document.querySelectorAll('.widget-slider').forEach(e => e.remove())",
                           "with a slider"),
    "no handle": ("document.querySelectorAll('.noUi-handle').forEach(e => e.remove())",
                  "has no handle to press"),
    "keys never reach the handle": (
        "document.querySelectorAll('.widget-subarea').forEach(a => a.addEventListener("
        "'keydown', e => e.stopPropagation(), true))", "did not move"),
    "the figure never changes": (  # every frame hidden, the ones the slider brings in too
        "document.head.insertAdjacentHTML('beforeend', '<style>.widget-subarea img, "
        ".widget-subarea .widget-html-content, .widget-subarea pre "
        "{display: none !important}</style>')", "did not change its figure"),
}


def test_the_slider_check_can_fail(built, server, browser):
    """The explorer checks of test_page_renders_offline fail on a page whose explorers are
    broken in the browser: no slider, no handle, a handle that cannot be pressed, a figure
    that does not follow its slider."""
    page = next(p for p in _toc_pages() if _explorers_in_source(p))
    for breakage, (js, message) in BREAKAGES.items():
        browser.goto(server + page)
        _wait_rendered(browser)
        browser.eval(f"(() => {{ {js}; }})()")
        problems = _explorer_problems(page, _explorers_in_source(page), browser.eval(SLIDER_JS))
        assert any(message in p for p in problems), (
            f"{page} with {breakage}: the checks found {problems or 'nothing wrong'}")
