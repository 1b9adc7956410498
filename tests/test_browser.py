"""JupyterLab in a real (headless) Chromium: open the quick-start notebook, run all cells, check
that the per-rank widget view renders one column per rank, and keep a screenshot.

Needs Debian's `chromium` (`.ci/run` installs it) and the `playwright` and `jupyterlab`
packages (test extras). Without a browser the test is skipped, except where
MPINB_REQUIRE_BROWSER=1 (CI), where a missing browser is a failure.
"""

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
# flags for a closed network: no background connections, no first-run work, no sandbox as root
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

if not os.path.exists(CHROMIUM):
    if os.environ.get("MPINB_REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"MPINB_REQUIRE_BROWSER=1 but no Chromium at {CHROMIUM} (apt-get install chromium)")
    pytest.skip("Chromium is not installed (.ci/run installs Debian's chromium)", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    shutil.copy(ROOT / "notebooks" / "01_quickstart.ipynb", root)
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, MPINB_NOTEBOOK_RANKS="2", JUPYTER_CONFIG_DIR=str(root / ".jupyter"))
    log = open(root / "lab.log", "w")  # noqa: SIM115 - lives as long as JupyterLab, closed at teardown
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)  # noqa: S310 - http on loopback
            break
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not come up: " + (root / "lab.log").read_text()[-2000:])
    assert proc.poll() is None, (root / "lab.log").read_text()[-2000:]
    yield url, token, root
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def test_quickstart_notebook_renders_one_column_per_rank(lab):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    url, token, _root = lab
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{url}/lab/tree/01_quickstart.ipynb?token={token}", timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            # a fresh JupyterLab asks which kernel to start
            select = page.locator(".jp-Dialog").get_by_role("button", name="Select", exact=True)
            try:
                select.wait_for(timeout=15_000)
                select.click()
            except PlaywrightTimeout:
                pass
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
            page.wait_for_selector("text=cluster stopped", timeout=300_000)
            widget_columns = page.locator(".jupyter-widgets .mpinb-rank")
            widget_columns.first.wait_for(timeout=60_000)
            ranks = sorted({widget_columns.nth(i).get_attribute("data-rank") for i in range(widget_columns.count())})
            first_view = page.locator(".jupyter-widgets .mpinb-summary").first
            first_view.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "quickstart.png"), full_page=True)
            summaries = [page.locator(".jupyter-widgets .mpinb-summary").nth(i).inner_text()
                         for i in range(page.locator(".jupyter-widgets .mpinb-summary").count())]
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "quickstart-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert ranks == ["0", "1"], ranks
    assert any(s.startswith("2 ranks") for s in summaries), summaries
    assert any("1 failed (1)" in s for s in summaries), summaries
    assert (ARTIFACTS / "quickstart.png").stat().st_size > 10_000
