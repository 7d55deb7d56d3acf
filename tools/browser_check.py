"""Open every page of a built book in headless Chromium, offline, and check what a reader sees.

    python tools/browser_check.py _build/smoke/_build/html [--screenshots _build/screenshots]

For each page, loaded from disk with networking disabled (every host resolves to nothing, every
proxy request fails):

* the page loads;
* the math renderer finished and no raw TeX delimiters remain in the rendered text (code blocks
  excluded);
* every ``<img>`` has loaded (natural width > 0);
* no cell shows an error or a traceback;
* at most ``MAX_CODE_LINES`` lines of code are shown unfolded, no table cell reads ``NaN``, and the
  text has no development words ("issue 12", "earlier build");
* no table shown unfolded has more than ``MAX_TABLE_COLUMNS`` columns;
* a chapter's derivation (its first "Derivation" or "The objective" heading) starts within
  ``MAX_DERIVATION_SCREENS`` screens of ``SCREEN`` pixels besides its findings box (the glance rows, at
  most ``MAX_FINDINGS_SCREENS`` screens tall), no figure is shown at less than
  ``MIN_FIGURE_SCALE`` of its drawn width, and no cell shows stderr;
* a chapter's main path (everything before its "Laboratory notes") is at most ``MAX_MAIN_SCREENS``
  screens of ``MAIN_SCREEN`` pixels;
* every figure of a chapter is a numbered figure with a caption;
* with every fold opened, no figure's smallest text renders below ``MIN_TEXT_PX`` pixels (the size
  each figure's PNG carries, :func:`pflkit.plots.png_with_text_size`, times the scale it is shown at),
  and no table, and no code block outside a folded program cell, is wider than its column (it would
  scroll sideways);
* and the execution report lists every chapter with its profile and wall time.

One line per failure, naming the page; exit 1 if any.  Chromium and chromedriver come from
Debian (``chromium``, ``chromium-driver``): when missing, they are installed with apt if this runs
as root, otherwise the check is skipped with one line saying why (exit 0).  Screenshots of a
derivation, a figure and the first screen of the landing page and of every chapter go to
``--screenshots`` for a human to look at.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pflkit.plots import MIN_TEXT_PX  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("chromium", "chromium-driver")
MAX_CODE_LINES = 200  # code lines a chapter shows unfolded (setup, tables and prose-writing cells are folded)
SCREEN = 900  # pixels: a reader's window of 1280 × 900
MAIN_SCREEN = 857  # pixels: the part of that window a page shows (the main path is counted in these)
MAX_MAIN_SCREENS = 15  # a chapter's main path (before "Laboratory notes") is at most this many screens
MAX_DERIVATION_SCREENS = 1.5  # a chapter's derivation starts within this many screens, the findings box aside
MAX_FINDINGS_SCREENS = 2.5  # the findings box (the glance rows atop a chapter) is at most this tall
MIN_FIGURE_SCALE = 0.7  # a figure is shown at no less than this share of its drawn width
MAX_TABLE_COLUMNS = 7  # columns (the index included) of a table shown unfolded
DEV_WORDS = re.compile(r"\b(issue \d+|earlier build|development run|this session)\b", re.IGNORECASE)
RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\\begin\{|\\frac\b|\\sum\b|\\mathcal\b|\\lVert\b|\$\$")
SCREENSHOTS = {
    "derivation": ("book/pfedhn.html", "derivation"),
    "figure": ("book/basics.html", "fig-basics-curves"),
    "findings": ("book/pfedhn.html", "pfedhn-findings"),
    "headroom": ("book/pfedhn.html", "table-1-with-the-paper-s-headroom"),
    "rule": ("book/basics.html", "how-the-book-judges-a-claim"),
    "report": ("book/report.html", "claims-by-verdict"),
    "landing": ("book/intro.html", "what-we-found"),
}

# the page's visible text without code, scripts and rendered math (whose assistive copy is text)
VISIBLE_TEXT = """
const body = document.body.cloneNode(true);
body.querySelectorAll('pre, code, script, style, mjx-container, .MathJax, .highlight, textarea')
    .forEach(e => e.remove());
return body.innerText;
"""
BROKEN_IMAGES = """
return Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))
    .map(i => i.getAttribute('src') || '(no src)');
"""
ERRORS = """
const bad = Array.from(document.querySelectorAll('.output.traceback, .output.error, .cell_output .traceback'));
const text = Array.from(document.querySelectorAll('.cell_output')).map(e => e.innerText).join('\\n');
return bad.length + (text.includes('Traceback (most recent call last)') ? 1 : 0);
"""
CODE_LINES = """
return Array.from(document.querySelectorAll('div.cell'))
    .filter(c => !c.className.match(/tag_(hide|remove)-(input|cell)/))
    .map(c => c.querySelector('.cell_input pre'))
    .filter(p => p !== null)
    .reduce((n, p) => n + p.innerText.replace(/\\n+$/, '').split('\\n').length, 0);
"""
DERIVATION_TOP = """
const h = Array.from(document.querySelectorAll('h2')).find(e => /^(Derivation|The objective)/.test(e.innerText.trim()));
if (!h) return null;
const top = h.getBoundingClientRect().top + window.scrollY;
const box = document.querySelector('.admonition.tip');  // the findings box with the glance rows, atop the chapter
const boxTop = box ? box.getBoundingClientRect().top + window.scrollY : top;
const boxBottom = box ? box.getBoundingClientRect().bottom + window.scrollY : top;
return box && boxBottom <= top ? [top - (boxBottom - boxTop), boxBottom - boxTop] : [top, 0];
"""
SHRUNK_FIGURES = """
return Array.from(document.querySelectorAll('.cell_output img')).filter(i => i.naturalWidth > 0)
    .map(i => [i.clientWidth / i.naturalWidth, i.getAttribute('src') || '(no src)']);
"""
WIDE_TABLES = """
return Array.from(document.querySelectorAll('.cell_output table')).filter(t => t.closest('details') === null)
    .map(t => Math.max(...Array.from(t.rows).map(r => Array.from(r.cells).reduce((n, c) => n + c.colSpan, 0))))
    .filter(n => n > arguments[0]);
"""
OPEN_FOLDS = """
document.querySelectorAll('details').forEach(d => { if (!d.classList.contains('hide')) d.open = true; });
return document.querySelectorAll('details[open]').length;
"""
FIGURE_SCALES = """
return Array.from(document.querySelectorAll('article img')).filter(i => i.naturalWidth > 0 && i.clientWidth > 0)
    .map(i => [i.getAttribute('src') || '', i.clientWidth / i.naturalWidth]);
"""
SIDEWAYS = """
const col = document.querySelector('article.bd-article, article, main');
const right = col.getBoundingClientRect().right;
const wide = e => e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > right + 1;
const tables = Array.from(col.querySelectorAll('table')).filter(t => t.offsetWidth > 0)
    .filter(t => wide(t) || wide(t.parentElement));
const code = Array.from(col.querySelectorAll('pre')).filter(p => p.offsetWidth > 0 && !p.closest('details.hide'))
    .filter(wide);
return [tables.length, code.length, tables.concat(code).map(e => (e.innerText || '').trim().slice(0, 40))[0] || ''];
"""
UNCAPTIONED = """
return Array.from(document.querySelectorAll('article img')).filter(i => i.closest('figure') === null)
    .map(i => i.getAttribute('src') || '(no src)');
"""
STDERR = "return document.querySelectorAll('.cell_output .stderr, .cell_output .output.stderr').length;"
NAN_CELLS = """
return Array.from(document.querySelectorAll('.cell_output td, .cell_output th'))
    .filter(e => e.innerText.trim() === 'NaN').length;
"""
MATH_DONE = """
const done = arguments[arguments.length - 1];
if (!window.MathJax || !MathJax.startup || !MathJax.startup.promise) { done(window.MathJax ? 'loading' : 'absent'); return; }
MathJax.startup.promise.then(() => done('done'), e => done('failed: ' + e));
"""


def find(*names: str) -> str | None:
    for name in names:
        if path := shutil.which(name):
            return path
    return None


def chromium() -> tuple[str, str] | str:
    """(browser, driver) paths, installing them with apt when missing and root; else why not."""
    browser, driver = find("chromium", "chromium-browser"), find("chromedriver")
    if browser and driver:
        return browser, driver
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return (
            "chromium/chromedriver are missing and this is not root with apt-get (apt install chromium chromium-driver)"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    r = subprocess.run(["apt-get", "install", "-y", "-q", *PACKAGES], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env)
        r = subprocess.run(["apt-get", "install", "-y", "-q", *PACKAGES], capture_output=True, text=True, env=env)
    browser, driver = find("chromium", "chromium-browser"), find("chromedriver")
    if browser and driver:
        return browser, driver
    return f"apt-get could not install {' '.join(PACKAGES)}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}"


def open_browser(browser: str, driver: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1600",
        "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
        "--allow-file-access-from-files",
    ):  # fmt: skip
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service(executable_path=driver), options=opts)
    d.set_page_load_timeout(60)
    d.set_script_timeout(60)
    return d


def chapters() -> list[str]:
    """The notebook chapters of the table of contents (``book/basics``...)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])]
    return [f for f in files if (ROOT / f"{f}.ipynb").exists()]


SCREENS: dict[str, tuple[float, float]] = {}  # chapter -> its main path's and its page's height, in screens
PAGE_HEIGHT = """
const page = document.querySelector('main, article, body').scrollHeight;
const notes = Array.from(document.querySelectorAll('h2')).find(e => /^Laboratory notes/.test(e.innerText.trim()));
return [notes ? notes.getBoundingClientRect().top + window.scrollY : page, page];
"""


def figure_text(html: Path, page: Path, src: str, scale: float) -> float | None:
    """The smallest text of the figure ``src`` (relative to ``page``) as shown at ``scale``, in pixels;
    None for an image that does not say (not drawn by matplotlib in a chapter)."""
    from PIL import Image

    from pflkit.plots import TEXT_KEY

    path = (page.parent / src.split("?")[0]).resolve()
    if not path.is_file() or html not in path.parents:
        return None
    with Image.open(path) as im:
        size = getattr(im, "text", {}).get(TEXT_KEY)
    return None if size is None else float(size) * scale


def check_page(d, html: Path, page: Path) -> list[str]:
    rel = page.relative_to(html).as_posix()
    try:
        d.get(page.as_uri())
    except Exception as err:  # noqa: BLE001  (selenium raises many kinds)
        return [f"{rel}: did not load ({type(err).__name__})"]
    problems = []
    deadline = time.monotonic() + 30  # a redirecting page (index.html) or late resources: wait, then judge
    while d.execute_script("return document.readyState") != "complete" and time.monotonic() < deadline:
        time.sleep(0.1)
    if d.execute_script("return document.readyState") != "complete":
        problems.append(f"{rel}: did not finish loading within 30 s")
    has_math = d.execute_script("return document.querySelector('.math, .MathJax, mjx-container') !== null")
    state = d.execute_async_script(MATH_DONE)
    if has_math and state != "done":
        problems.append(f"{rel}: the math renderer did not run ({state})")
    raw = RAW_TEX.findall(d.execute_script(VISIBLE_TEXT) or "")
    if raw:
        problems.append(f"{rel}: {len(raw)} raw TeX fragment(s) in the rendered text, e.g. {raw[0]!r}")
    broken = d.execute_script(BROKEN_IMAGES)
    if broken:
        problems.append(f"{rel}: {len(broken)} image(s) did not load, e.g. {broken[0]}")
    errors = d.execute_script(ERRORS)
    if errors:
        problems.append(f"{rel}: {errors} cell(s) show an error or a traceback")
    if (lines := d.execute_script(CODE_LINES)) > MAX_CODE_LINES:
        problems.append(f"{rel}: {lines} lines of code shown unfolded (at most {MAX_CODE_LINES}; fold the rest)")
    if nan := d.execute_script(NAN_CELLS):
        problems.append(f"{rel}: {nan} table cell(s) read NaN (write '—' for a missing value)")
    if dev := DEV_WORDS.findall(d.execute_script(VISIBLE_TEXT) or ""):
        problems.append(f"{rel}: development words in the text, e.g. {dev[0]!r}")
    if wide := d.execute_script(WIDE_TABLES, MAX_TABLE_COLUMNS):
        problems.append(f"{rel}: {len(wide)} table(s) of more than {MAX_TABLE_COLUMNS} columns shown unfolded "
                        f"(the widest {max(wide)}; show the columns that matter, fold the rest: pflkit.pages.fit)")  # fmt: skip
    if stderr := d.execute_script(STDERR):
        problems.append(f"{rel}: {stderr} cell(s) show stderr (silence it, or send it to the execution report)")
    small = [(scale, src) for scale, src in d.execute_script(SHRUNK_FIGURES) if scale < MIN_FIGURE_SCALE]
    if small:
        scale, src = min(small)
        problems.append(f"{rel}: {len(small)} figure(s) shown at less than {MIN_FIGURE_SCALE:.0%} of their drawn width, "
                        f"e.g. {src} at {scale:.0%} (draw it for the column)")  # fmt: skip
    if rel.removesuffix(".html") in chapters():
        main_px, page_px = d.execute_script(PAGE_HEIGHT)
        SCREENS[rel.removesuffix(".html").split("/")[-1]] = (main_px / MAIN_SCREEN, page_px / MAIN_SCREEN)
        if main_px / MAIN_SCREEN > MAX_MAIN_SCREENS:
            problems.append(f"{rel}: the main path is {main_px / MAIN_SCREEN:.1f} screens of {MAIN_SCREEN} px (at most "
                            f"{MAX_MAIN_SCREENS}; move pilots, grids, controls and logs to the Laboratory notes)")  # fmt: skip
        found = d.execute_script(DERIVATION_TOP)
        if found is None:
            problems.append(f"{rel}: no 'Derivation' (or 'The objective') heading")
        elif found[0] / SCREEN > MAX_DERIVATION_SCREENS:
            problems.append(f"{rel}: the derivation starts {found[0] / SCREEN:.1f} screens down besides the findings "
                            f"box (at most {MAX_DERIVATION_SCREENS}; put the plumbing and long prose after it)")  # fmt: skip
        if found is not None and found[1] / SCREEN > MAX_FINDINGS_SCREENS:
            problems.append(f"{rel}: the findings box is {found[1] / SCREEN:.1f} screens tall (at most "
                            f"{MAX_FINDINGS_SCREENS}: the glance rows and a line of tally; fold the rest)")  # fmt: skip
    if rel.removesuffix(".html") in chapters() and (bare := d.execute_script(UNCAPTIONED)):
        problems.append(f"{rel}: {len(bare)} figure(s) without a numbered caption, e.g. {bare[0]} (glue the figure and "
                        "show it with a {glue:figure} directive whose caption says what to see)")  # fmt: skip
    d.execute_script(OPEN_FOLDS)  # what a reader meets who opens every fold (the program cells aside)
    texts = [(t, src) for src, scale in d.execute_script(FIGURE_SCALES)
             if (t := figure_text(html, page, src, scale)) is not None and t < MIN_TEXT_PX]  # fmt: skip
    if texts:
        t, src = min(texts)
        problems.append(f"{rel}: {len(texts)} figure(s) with text below {MIN_TEXT_PX:g} px as shown, e.g. {src} at "
                        f"{t:.1f} px (larger fonts, or a figure drawn for the 688-px column)")  # fmt: skip
    tables, code, first = d.execute_script(SIDEWAYS)
    if tables or code:
        problems.append(f"{rel}: {tables} table(s) and {code} code block(s) wider than the column (they scroll "
                        f"sideways), e.g. {first!r}")  # fmt: skip
    return problems


def check_report(d, html: Path) -> list[str]:
    page = html / "book" / "report.html"
    if not page.exists():
        return ["book/report.html: the execution report page is missing"]
    d.get(page.as_uri())
    script = "return Array.from(document.querySelectorAll('tr')).map(r => r.innerText)"
    deadline = time.monotonic() + 15  # the table's text can arrive after get() returns (seen once in CI: no rows)
    rows = d.execute_script(script)
    first = [r.split("\t")[0].strip() for r in rows]
    stems = [ch.split("/")[-1] for ch in chapters()]
    while not set(stems) & set(first) and time.monotonic() < deadline:
        time.sleep(0.5)
        rows = d.execute_script(script)
        first = [r.split("\t")[0].strip() for r in rows]
    problems = []
    for ch, stem in zip(chapters(), stems):  # the execution table's row: the chapter's name, then its profile
        row = next((r for r in rows if r.split("\t")[0].strip() == stem and re.search(r"\b(smoke|book|paper)\b", r)),
                   None)  # fmt: skip
        if row is None:
            problems.append(f"book/report.html: no row for {ch}.ipynb")
        elif not re.search(r"\b(smoke|book|paper)\b", row) or not re.search(r"\d+\.\d", row):
            problems.append(f"book/report.html: the row of {ch}.ipynb lacks its profile or wall time")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("html", type=Path, nargs="?", help="the built book's html folder")
    ap.add_argument("--screenshots", type=Path, default=ROOT / "_build" / "screenshots")
    ap.add_argument(
        "--install", action="store_true", help="only install Chromium where missing (make test's install step)"
    )
    args = ap.parse_args()
    if args.install:
        found = chromium()
        print(f"browser check: {found if isinstance(found, str) else 'Chromium ready (' + found[0] + ')'}")
        return 0
    if args.html is None:
        ap.error("give the built book's html folder")
    html = args.html.resolve()
    if not (html / "index.html").exists():
        print(f"error: no built book at {html} (index.html missing)", file=sys.stderr)
        return 2
    found = chromium()
    if isinstance(found, str):
        print(f"browser check skipped: {found}")
        return 0
    t0 = time.perf_counter()
    pages = sorted(p for p in html.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts)
    d = open_browser(*found)
    try:
        problems = [line for page in pages for line in check_page(d, html, page)]
        problems += check_report(d, html)
        args.screenshots.mkdir(parents=True, exist_ok=True)
        for name, (rel, anchor) in SCREENSHOTS.items():
            if (html / rel).exists():
                d.get(f"{(html / rel).as_uri()}#{anchor}")
                d.execute_async_script(MATH_DONE)
                d.save_screenshot(str(args.screenshots / f"{name}.png"))
        d.set_window_size(1280, SCREEN)  # each page's first screen, as a reader at 1280 × 900 meets it
        for rel in ["book/intro.html", *(f"{ch}.html" for ch in chapters())]:
            if (html / rel).exists():
                d.get((html / rel).as_uri())
                d.execute_async_script(MATH_DONE)
                d.save_screenshot(str(args.screenshots / f"first-{Path(rel).stem}.png"))
    finally:
        d.quit()
    for line in problems:
        print(line)
    if SCREENS:
        print(f"screens of {MAIN_SCREEN} px per chapter, main path (before 'Laboratory notes') / page: "
              + ", ".join(f"{c} {m:.1f}/{n:.0f}" for c, (m, n) in SCREENS.items()))  # fmt: skip
    print(
        f"browser check: {len(pages)} pages, {len(problems)} problem(s), offline, {time.perf_counter() - t0:.0f} s; "
        f"screenshots in {args.screenshots}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
