"""The built documentation site, opened in headless Chromium: a tutorial page shows its ranks'
views from the notebook tests' run (static HTML, no widget left to load), the search finds
``alltoall``, every figure is drawn, every module has its API page, and no internal link or
anchor is broken.

The site is the one named by MPINB_DOCS_SITE (.ci/run builds it with ``sphinx-build -W`` after
the suite), else one built here the same way; it shows the tutorials' saved runs, so these tests
run after tests/test_notebooks.py (tests/conftest.py puts them last). Needs Debian's Chromium,
as tests/test_browser.py does.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import os
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import pytest
from support.require import require
from test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parent.parent

require("browser", None if os.path.exists(CHROMIUM) else f"no Chromium at {CHROMIUM} (apt-get install chromium)",
        module_level=True)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    given = os.environ.get("MPINB_DOCS_SITE")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("site") / "html"
    build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", str(ROOT / "docs"), str(out)],
                           capture_output=True, text=True, timeout=1200)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def served(site):
    """The site over HTTP on loopback, as a reader's browser would get it."""
    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser.new_page(viewport={"width": 1400, "height": 1000})
        browser.close()


def test_a_tutorial_page_shows_its_ranks_views(served, page):
    failed = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.goto(f"{served}/tutorials/01_quickstart.html")
    columns = page.locator(".mpinb-view .mpinb-rank")
    columns.first.wait_for(timeout=30_000)
    ranks = {r for i in range(columns.count()) for r in columns.nth(i).get_attribute("data-rank").split(",")}
    summaries = page.locator(".mpinb-view .mpinb-summary").all_inner_texts()
    page.locator(".mpinb-view").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "docs-tutorial.png"))
    assert ranks == {"0", "1"}, ranks  # the notebook tests run the tutorials on 2 ranks
    assert any(s.startswith("2 ranks") for s in summaries), summaries
    assert page.locator(".jupyter-widgets, .widget-area").count() == 0  # no widget left to load
    assert "Error displaying widget" not in page.content()
    assert failed == []


def test_the_hangs_tutorial_page_shows_each_deadlock_proven(served, page):
    page.goto(f"{served}/tutorials/06_hangs.html")
    page.locator(".mpinb-view").first.wait_for(timeout=30_000)
    text = page.locator("article").inner_text()
    assert "deadlock: rank 0 waits to receive from rank 1" in text
    assert "were freed where they waited" in text


def test_the_search_finds_alltoall(served, page):
    page.goto(f"{served}/search.html?q=alltoall")
    page.locator("#search-results", has_text="Search finished").wait_for(timeout=60_000)
    results = page.locator("#search-results ul.search li")
    links = [results.nth(i).locator("a").first.get_attribute("href") for i in range(results.count())]
    assert any(link.startswith("reference/library.html") for link in links), links
    assert results.count() >= 5, links


def test_every_figure_is_drawn(served, page):
    page.goto(f"{served}/explanation/performance.html")
    images = page.locator("article img")
    images.first.wait_for(timeout=30_000)
    sizes = page.evaluate("() => [...document.querySelectorAll('article img')].map(i => [i.src, i.naturalWidth])")
    shown = (ROOT / "docs" / "explanation" / "performance.md").read_text().count("{figure} /_generated/figures/")
    assert len(sizes) == shown, sizes
    assert all(width > 0 for _, width in sizes), sizes
    page.goto(f"{served}/explanation/design.html")  # the architecture picture
    picture = page.evaluate("() => [...document.querySelectorAll('article img')].map(i => i.naturalWidth)")
    assert picture and all(w > 0 for w in picture), picture


def test_every_module_is_on_an_api_page(site):
    documented = "".join(p.read_text() for p in (site / "api" / "generated").glob("*.html"))
    missing = []
    for path in sorted((ROOT / "mpinb").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts.pop()
        if f'id="module-{".".join(parts)}"' not in documented:
            missing.append(".".join(parts))
    assert missing == []
    assert 'id="mpinb.mpi.alltoall"' in documented or 'id="mpinb.mpi.collectives.alltoall"' in documented


class Links(html.parser.HTMLParser):
    """The ids of a page and the links it makes (href of a, src of img and script)."""

    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        target = attrs.get("href") if tag in ("a", "link") else attrs.get("src") if tag in ("img", "script") else None
        if target:
            self.links.append(target)


def test_no_internal_link_is_broken(site):
    pages = {}
    for path in site.rglob("*.html"):
        parser = Links()
        parser.feed(path.read_text(errors="replace"))
        pages[path.resolve()] = parser
    broken = []
    for path, parser in pages.items():
        for link in parser.links:
            parts = urllib.parse.urlsplit(link)
            if parts.scheme or parts.netloc:
                continue  # another site
            target = (path.parent / urllib.parse.unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(site)}: {link}")
            elif parts.fragment and target in pages and urllib.parse.unquote(parts.fragment) not in pages[target].ids:
                broken.append(f"{path.relative_to(site)}: {link} (no such anchor)")
    assert len(pages) > 25  # the pages, the tutorials, the API's rooms, the indexes
    assert broken == []
