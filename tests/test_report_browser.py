"""The advise report and the notebooks' HTML in a real browser (issue 39, item 4).

The HTML report of ``advise --`` (drawn from a stored H200 result) and the HTML reprs a notebook
shows are opened in headless Chromium (Debian's package), driven over the Chrome DevTools
Protocol on a pipe (``--remote-debugging-pipe``) with the standard library only. Each page must
load without a script exception, a console error or a failed resource; every plot must be laid
out (non-zero size, drawn marks, labels inside the plot and clear of the bars) and be visible in
the screenshot, which is kept under ``build/test-artifacts/browser/`` to be looked at. The checks
are shown to fail on pages broken on purpose. Without Chromium installed the tests skip.
"""
from __future__ import annotations

import base64
import html
import io
import json
import os
import select
import shutil
import signal
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# a real result of `advise --` from an H200 run (the watcher's result document)
RESULT = next((p for p in (ROOT / "tests" / "data" / "live" / "result-server-H200.json",
                           ROOT / "tests" / "data" / "live-result-server-H200.json")
               if p.exists()), ROOT / "tests" / "data" / "live" / "result-server-H200.json")
ARTIFACTS = ROOT / "build" / "test-artifacts" / "browser"
WIDTH, HEIGHT = 1200, 2400
BAR = (0x4C, 0x78, 0xA8)  # the report's bars, #4c78a8


def _chromium():
    for name in (os.environ.get("L2P_CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


CHROMIUM = _chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install chromium; or "
    "set L2P_CHROMIUM): the report's browser checks need a real browser")

# What the page's layout says, measured in the page itself (Runtime.evaluate).
_MEASURE = """(() => {
  const box = e => { const r = e.getBoundingClientRect();
    return [r.left + scrollX, r.top + scrollY, r.right + scrollX, r.bottom + scrollY]; };
  const shown = e => { for (let n = e; n && n.nodeType === 1; n = n.parentElement) {
      const s = getComputedStyle(n);
      if (s.display === 'none' || s.visibility === 'hidden' || parseFloat(s.opacity) === 0)
        return false; }
    return true; };
  const svgs = [...document.querySelectorAll('svg')].map(svg => ({
    label: svg.getAttribute('aria-label') || '', box: box(svg), shown: shown(svg),
    marks: [...svg.querySelectorAll('rect,line,path,polyline,polygon,circle,ellipse')]
      .map(e => ({tag: e.tagName, box: box(e), fill: e.getAttribute('fill') || ''})),
    texts: [...svg.querySelectorAll('text')].map(t => ({text: t.textContent, box: box(t)}))}));
  const images = [...document.images].map(i => ({src: i.src.slice(0, 60), box: box(i),
    shown: shown(i), complete: i.complete, natural: [i.naturalWidth, i.naturalHeight]}));
  const tables = [...document.querySelectorAll('table')].map(t => ({box: box(t),
    rows: t.rows.length}));
  const d = document.documentElement;
  const end = document.body ? document.body.getBoundingClientRect().bottom + scrollY : 0;
  return {title: document.title, svgs, images, tables, size: [d.scrollWidth, d.scrollHeight],
          content: Math.ceil(end), text: document.body ? document.body.innerText : ''};
})()"""


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4 in the
    browser: it reads commands from 3, writes replies and events, NUL-terminated JSON, to 4)."""

    def __init__(self, exe: str, profile: Path, log: Path):
        to_r, to_w = os.pipe()      # our commands: the browser reads to_r as its fd 3
        from_r, from_w = os.pipe()  # its replies: it writes from_w as its fd 4
        # numbers above 9, so that moving them to 3 and 4 cannot overwrite one another
        hi_r = _high(to_r)
        hi_w = _high(from_w)
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
                "--remote-debugging-pipe", f"--user-data-dir={profile}",
                f"--window-size={WIDTH},{HEIGHT}", "--force-device-scale-factor=1",
                "about:blank"]
        self.log = log
        logfd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:  # its own process group, so that a hung browser can be ended with its children
            self.pid = os.posix_spawn(exe, [exe, *args], dict(os.environ), file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, logfd, 1), (os.POSIX_SPAWN_DUP2, logfd, 2),
                (os.POSIX_SPAWN_DUP2, hi_r, 3), (os.POSIX_SPAWN_DUP2, hi_w, 4)], setpgroup=0)
        finally:
            for fd in {to_r, from_w, hi_r, hi_w, logfd}:
                os.close(fd)
        self.code = None
        self._w, self._r = to_w, from_r
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        reply = self._until(lambda m: m.get("id") == self._id, timeout, method)
        if "error" in reply:
            raise RuntimeError(f"Chromium: {method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, session: str | None, timeout: float = 30.0) -> dict:
        for i, e in enumerate(self.events):
            if e.get("method") == method and e.get("sessionId") == session:
                return self.events.pop(i)
        e = self._until(lambda m: m.get("method") == method and m.get("sessionId") == session,
                        timeout, method)
        self.events.remove(e)
        return e

    def drain(self, seconds: float) -> None:
        """Read what comes in the next seconds (late console messages)."""
        try:
            self._until(lambda m: False, seconds, "drain")
        except TimeoutError:
            pass

    def _until(self, match, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                m = json.loads(raw)
                if "method" in m:
                    self.events.append(m)
                if match(m):
                    return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"Chromium: no answer to {what} in {timeout:.0f} s")
            ready, _, _ = select.select([self._r], [], [], left)
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"Chromium exited (status {self.poll()}) during "
                                       f"{what}; its log: {self.log.read_text()[-2000:]}")
                self._buf += chunk

    def poll(self):
        if self.code is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
        return self.code

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except Exception:
            pass
        deadline = time.monotonic() + 10
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.poll() is None:  # the group this browser leads: it and its helpers only
            os.killpg(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self._w)
        os.close(self._r)


def _high(fd: int) -> int:
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)


def _problems(events: list[dict], session: str) -> tuple[list[str], list[str]]:
    """The page's errors (script exceptions, console.error/assert, failed loads and other
    browser errors) and its warnings, as text."""
    errors, warnings = [], []
    for e in events:
        if e.get("sessionId") != session:
            continue
        p = e.get("params", {})
        if e["method"] == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            errors.append("exception: " + (d.get("exception", {}).get("description")
                                           or d.get("text", "?")))
        elif e["method"] == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
            if p["type"] in ("error", "assert"):
                errors.append(f"console.{p['type']}: {text}")
            elif p["type"] == "warning":
                warnings.append(f"console.warn: {text}")
        elif e["method"] == "Log.entryAdded":
            entry = p["entry"]
            text = f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip()
            (errors if entry["level"] == "error" else
             warnings if entry["level"] == "warning" else []).append(text)
    return errors, warnings


def open_page(browser: Browser, path: Path, shot: Path) -> dict:
    """Load a page in a fresh tab: its errors, warnings, layout and a full-page screenshot."""
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget",
                           {"targetId": target, "flatten": True})["sessionId"]
    try:
        for domain in ("Runtime", "Log", "Page"):
            browser.send(f"{domain}.enable", session=session)
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1,
                      "mobile": False}, session=session)
        nav = browser.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        assert not nav.get("errorText"), f"{path}: navigation failed: {nav['errorText']}"
        browser.wait_event("Page.loadEventFired", session)
        browser.drain(0.3)
        got = browser.send("Runtime.evaluate", {"expression": _MEASURE, "returnByValue": True},
                           session=session)
        assert "exceptionDetails" not in got, got
        layout = got["result"]["value"]
        # the page down to the end of its content (a short page is not padded to the window)
        height = min(max(layout["content"] + 16, 200), layout["size"][1], 16000)
        png = base64.b64decode(browser.send(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True,
             "clip": {"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1}},
            session=session)["data"])
        browser.drain(0.2)
        errors, warnings = _problems(browser.events, session)
    finally:
        browser.events = [e for e in browser.events if e.get("sessionId") != session]
        browser.send("Target.closeTarget", {"targetId": target})
    shot.write_bytes(png)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    kept = ARTIFACTS / shot.name
    kept.write_bytes(png)
    print(f"screenshot of {path.name}: {kept}")
    for w in warnings:
        print(f"{path.name}: browser warning: {w}")
    return {"errors": errors, "warnings": warnings, "layout": layout, "png": png,
            "artifact": kept}


def _pixels(png: bytes):
    np = pytest.importorskip("numpy")
    Image = pytest.importorskip("PIL.Image")  # matplotlib's own dependency
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def _colours(pixels) -> int:
    """How many distinct colours in an (n, 3) array of RGB pixels."""
    np = pytest.importorskip("numpy")
    p = pixels.astype(np.int32)
    return len(np.unique((p[:, 0] << 16) | (p[:, 1] << 8) | p[:, 2]))


def _overlap(a, b, slack=0.5) -> bool:
    return (min(a[2], b[2]) - max(a[0], b[0]) > slack
            and min(a[3], b[3]) - max(a[1], b[1]) > slack)


def plot_problems(page: dict) -> list[str]:
    """Why a plot on the page is not visible or not readable: each SVG laid out with non-zero
    size inside the page, drawn marks, its labels inside it, apart from each other and off the
    bars, and its box in the screenshot showing those marks (not blank); each image loaded,
    shown with non-zero size and not blank in the screenshot."""
    np = pytest.importorskip("numpy")
    px = _pixels(page["png"])
    lay = page["layout"]
    out = []

    def region(b):
        x0, y0 = max(0, int(b[0])), max(0, int(b[1]))
        return px[y0:int(b[3]), x0:int(b[2])].reshape(-1, 3)

    for k, s in enumerate(lay["svgs"]):
        name = f"svg {k} ({s['label'] or 'unlabelled'})"
        x0, y0, x1, y1 = s["box"]
        if not s["shown"] or x1 - x0 < 1 or y1 - y0 < 1:
            out.append(f"{name}: not shown (box {s['box']}, shown {s['shown']})")
            continue
        if x0 < 0 or x1 > lay["size"][0] + 0.5:
            out.append(f"{name}: outside the page (box {s['box']}, page {lay['size']})")
        drawn = [m for m in s["marks"] if max(m["box"][2] - m["box"][0],
                                              m["box"][3] - m["box"][1]) >= 1]
        if not drawn:
            out.append(f"{name}: nothing drawn ({len(s['marks'])} marks, none of size)")
        for t in s["texts"]:
            b = t["box"]
            if b[0] < x0 - 1 or b[2] > x1 + 1 or b[1] < y0 - 1 or b[3] > y1 + 1:
                out.append(f"{name}: label {t['text'][:40]!r} clipped: {b} outside {s['box']}")
            for m in drawn:
                if m["tag"] == "rect" and _overlap(b, m["box"]):
                    out.append(f"{name}: label {t['text'][:40]!r} runs into a bar")
                # a line's box leaves out its stroke: widened by 1 px on each side
                if m["tag"] == "line" and _overlap(b, [m["box"][0] - 1, m["box"][1] - 1,
                                                       m["box"][2] + 1, m["box"][3] + 1]):
                    out.append(f"{name}: label {t['text'][:40]!r} crossed by a line")
        texts = s["texts"]
        for i in range(len(texts)):
            for j in range(i + 1, len(texts)):
                if _overlap(texts[i]["box"], texts[j]["box"], slack=1):
                    out.append(f"{name}: labels {texts[i]['text'][:30]!r} and "
                               f"{texts[j]['text'][:30]!r} overlap")
        fills = {m["fill"].lower() for m in drawn if m["tag"] == "rect"}
        pixels = region(s["box"])
        if "#4c78a8" in fills:
            bar = int((np.abs(pixels.astype(int) - BAR).max(axis=1) <= 2).sum())
            if bar < 50:
                out.append(f"{name}: its bars are not in the screenshot ({bar} pixels)")
        if len(pixels) and (pixels.min(axis=1) < 200).mean() < 0.01:
            out.append(f"{name}: blank in the screenshot")
    for k, im in enumerate(lay["images"]):
        name = f"image {k} ({im['src']})"
        b = im["box"]
        if not im["complete"] or min(im["natural"]) == 0:
            out.append(f"{name}: not loaded ({im['natural']})")
        elif not im["shown"] or b[2] - b[0] < 1 or b[3] - b[1] < 1:
            out.append(f"{name}: not shown (box {b})")
        else:
            pixels = region(b)
            colours = _colours(pixels)
            if colours < 16 or (pixels.min(axis=1) < 200).mean() < 0.01:
                out.append(f"{name}: blank in the screenshot ({colours} colours)")
    return out


def screenshot_problems(png: bytes) -> list[str]:
    """A screenshot with something on it: many colours (antialiased text) and more than a few
    dark pixels (a page shorter than the window is white below its content)."""
    np = pytest.importorskip("numpy")
    px = _pixels(png)
    out = []
    if px.shape[1] != WIDTH or px.shape[0] < 100:
        out.append(f"screenshot of size {px.shape[1]}x{px.shape[0]}")
    colours = _colours(px.reshape(-1, 3))
    inked = int((px.min(axis=2) < 200).sum())
    if colours < 50 or inked < 2000:
        out.append(f"screenshot looks blank: {colours} colours, {inked} pixels inked")
    return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    d = tmp_path_factory.mktemp("chromium")
    b = Browser(CHROMIUM, d / "profile", d / "chromium.log")
    try:
        version = b.send("Browser.getVersion")
    except Exception:
        b.close()
        raise
    print(f"browser: {version.get('product')} ({CHROMIUM})")
    yield b
    b.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    from l2persist.process.report import write_report
    path = tmp_path_factory.mktemp("report") / "advise-report.html"
    write_report(json.loads(RESULT.read_text()), str(path))
    return path


def _inject(page: Path, dest: Path, snippet: str) -> Path:
    text = page.read_text()
    assert "</body>" in text
    dest.write_text(text.replace("</body>", snippet + "</body>", 1))
    return dest


def test_the_advise_report_in_chromium(browser, report, tmp_path):
    page = open_page(browser, report, tmp_path / "advise-report.png")
    assert page["errors"] == [], page["errors"]
    lay = page["layout"]
    assert lay["title"] == "l2persist advise report"
    assert "don't: no plan tried beat the better baseline" in lay["text"]
    # the report's two plots: time by arm (11 arms in this run) and the per-kernel ratios
    labels = [s["label"] for s in lay["svgs"]]
    assert labels == ["GPU time per unit of work, by arm",
                      "Per kernel, measured (CUDA activity records): the chosen arm / the "
                      "better baseline (above 1: it costs)"]
    result = json.loads(RESULT.read_text())
    bars = [m for m in lay["svgs"][0]["marks"] if m["tag"] == "rect"]
    assert len(bars) == len(result["per_arm"]) == 11
    assert len(lay["tables"]) == 3 and all(t["rows"] > 1 for t in lay["tables"])
    assert plot_problems(page) == []
    assert screenshot_problems(page["png"]) == []
    # nothing wider than the window (no sideways scrolling)
    assert lay["size"][0] <= WIDTH, lay["size"]


@pytest.mark.parametrize("broken, expect", [
    ('<script>throw new Error("x")</script>', "exception: Error: x"),
    ('<script>console.error("boom")</script>', "console.error: boom"),
    ('<img src="no-such-image.png" alt="">', "Failed to load resource"),
])
def test_the_checks_see_a_broken_page(browser, report, tmp_path, broken, expect):
    """The checks can fail: an exception, a console error and a missing image are reported."""
    copy = _inject(report, tmp_path / "broken.html", broken)
    page = open_page(browser, copy, tmp_path / "selftest-broken.png")
    assert any(expect in e for e in page["errors"]), page["errors"]
    if "<img" in broken:
        assert any("not loaded" in p for p in plot_problems(page)), plot_problems(page)


def test_the_checks_see_a_hidden_empty_or_crowded_plot(browser, report, tmp_path):
    """The plot checks can fail: hidden plots, an empty one, bars not painted, a label over
    the bars, and a blank screenshot are reported."""
    hidden = _inject(report, tmp_path / "hidden.html",
                     '<style>svg{display:none}</style><svg width="200" height="50"></svg>')
    problems = plot_problems(open_page(browser, hidden, tmp_path / "selftest-hidden.png"))
    assert sum("not shown" in p for p in problems) == 3, problems
    empty = _inject(report, tmp_path / "empty.html",
                    '<svg width="200" height="50" aria-label="empty"><text x="4" y="14">no '
                    'data</text></svg>')
    problems = plot_problems(open_page(browser, empty, tmp_path / "selftest-empty.png"))
    assert problems == ["svg 2 (empty): nothing drawn (0 marks, none of size)"], problems
    # bars painted white: laid out, but not in the screenshot
    white = _inject(report, tmp_path / "white.html",
                    '<style>svg rect{fill:white}svg line{stroke:white}</style>')
    problems = plot_problems(open_page(browser, white, tmp_path / "selftest-white.png"))
    assert sum("bars are not in the screenshot" in p for p in problems) == 2, problems
    # a label that runs into the bars: the first one drawn at 60 px
    text = report.read_text().replace('font-family="monospace">', 'font-family="monospace" '
                                      'style="font-size:60px">', 1)
    crowded = tmp_path / "crowded.html"
    crowded.write_text(text)
    problems = plot_problems(open_page(browser, crowded, tmp_path / "selftest-crowded.png"))
    assert any("runs into a bar" in p or "overlap" in p for p in problems), problems
    assert screenshot_problems(_blank_png()), "a white screenshot passed"


def _blank_png() -> bytes:
    Image = pytest.importorskip("PIL.Image")
    buf = io.BytesIO()
    Image.new("RGB", (WIDTH, 400), "white").save(buf, format="PNG")
    return buf.getvalue()


# The notebooks' HTML: what a notebook shows for a study's Results (its _repr_html_ table and
# its plot), wrapped in a minimal page as a notebook front end would.
_STUDIES = ["gather", "persistence", "live"]


def _wrap(title: str, parts: list[str]) -> str:
    body = "\n".join(f'<div class="output">{p}</div>' for p in parts)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>'
            f'{html.escape(title)}</title><style>body{{font-family:sans-serif;margin:1em}}'
            f'table{{border-collapse:collapse}}td,th{{padding:1px 6px}}</style></head><body>\n'
            f'{body}\n</body></html>\n')


def _png_tag(fig_path: Path) -> str:
    data = base64.b64encode(fig_path.read_bytes()).decode()
    return f'<img src="data:image/png;base64,{data}" alt="plot">'


@pytest.mark.parametrize("study", _STUDIES)
def test_a_studys_results_html_in_chromium(browser, tmp_path, study):
    pytest.importorskip("matplotlib")
    from l2persist.results import Results
    r = Results.load(str(ROOT / "notebooks" / "results" / f"{study}.json"))
    fig = tmp_path / f"{study}-plot.png"
    r.plot(str(fig))
    import matplotlib.pyplot as plt
    plt.close("all")
    page_path = tmp_path / f"results-{study}.html"
    page_path.write_text(_wrap(f"{study} results", [r._repr_html_(), _png_tag(fig)]))
    page = open_page(browser, page_path, tmp_path / f"results-{study}.png")
    assert page["errors"] == [], page["errors"]
    lay = page["layout"]
    assert len(lay["images"]) == 1 and lay["images"][0]["natural"][0] > 100
    assert len(lay["tables"]) == 1 and lay["tables"][0]["rows"] == len(r.records) + 1
    assert plot_problems(page) == []
    assert screenshot_problems(page["png"]) == []


def test_the_other_reprs_in_chromium(browser, tmp_path):
    """The HTML reprs that need no GPU to build: an Advice (as loaded from JSON) and a
    BufferTable, with user text that must be shown, not parsed."""
    import types
    from l2persist import foreign
    from l2persist.advise import Advice, WorkloadAdvice
    mib = 1 << 20
    w = WorkloadAdvice("<b>decode</b> & co", 0.5, "default", 1.0, 0.9, 0.95, 0.8, 1.125,
                       (1.1, 1.15), 1.05, True, False, False,
                       [{"buffer": "kv", "bytes": mib, "hit_ratio": 0.6, "hit_prop": 2,
                         "miss_prop": 1}])
    a = Advice("H200", True, 26 * mib, 26 * mib, "default", 1.0, 0.9, 1.11, (1.05, 1.2), None,
               {w.name: w}, [(0, 1.0)], 40, 3, 2.5, 0.01, "share")
    a = Advice.from_json(a.to_json())
    node = types.SimpleNamespace(position=2, name="void indexFuncLargeIndex<float>(...)")
    rec = foreign.BufferRecord(address=0x7F0000000000, size=36 * mib, name="acc",
                               nodes=(node,), uses=(foreign.BufferUse(2, 0, 16, 0x7F0000000000),))
    table = foreign.BufferTable([rec])
    path = tmp_path / "reprs.html"
    path.write_text(_wrap("reprs", [a._repr_html_(), table._repr_html_()]))
    page = open_page(browser, path, tmp_path / "other-reprs.png")
    assert page["errors"] == [], page["errors"]
    lay = page["layout"]
    assert "<b>decode</b> & co" in lay["text"] and "indexFuncLargeIndex<float>" in lay["text"]
    assert len(lay["tables"]) == 2 and all(t["rows"] >= 2 and t["box"][2] > t["box"][0]
                                           for t in lay["tables"])
    assert screenshot_problems(page["png"]) == []
