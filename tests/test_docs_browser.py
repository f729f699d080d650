"""The documentation site in a real browser (headless Chromium through Selenium): code
blocks and tables are never cut off (what does not fit scrolls sideways), the pages log
no console errors, and they load nothing from the network (the site works offline).

The site is LDPFAST_DOCS_HTML when set (.ci/static.sh builds it and runs this file), else
built here with Sphinx (a minute or more). Skipped without Selenium, Chromium and its
driver (Debian: apt-get install chromium chromium-driver), or Sphinx and the theme
(pip install ".[docs]"). Not part of the fast subset (tests/smoke.txt).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

webdriver = pytest.importorskip("selenium.webdriver", reason="Selenium is not installed (pip install '.[docs]')")

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["index.html", "guide/end-to-end.html", "guide/estimation.html", "guide/ocms.html", "scale-out.html",
         "spark.html", "api/ldpfast.protocols.frequency.grr.html", "api/ldpfast.estimates.html"]
WIDTHS = [1400, 700]  # a desktop window and a narrow one (phone in landscape, split screen)

# Every pre and table wider than its box must be cut by nothing: the first box around it
# (itself included) whose overflow is not "visible" must scroll sideways, and lie within the
# window. Returns the ones that do not.
CLIPPED = """
const out = [];
for (const el of document.querySelectorAll("article pre, article table")) {
  const wider = el.scrollWidth > el.clientWidth + 1
    || el.getBoundingClientRect().width > el.parentElement.clientWidth + 1;
  if (!wider) continue;
  let box = el;
  while (box !== document.body && getComputedStyle(box).overflowX === "visible") box = box.parentElement;
  const overflow = getComputedStyle(box).overflowX, what = el.tagName + " " + el.textContent.slice(0, 50);
  if (overflow !== "auto" && overflow !== "scroll") out.push("cut off by " + box.tagName + ": " + what);
  else if (box.getBoundingClientRect().right > window.innerWidth + 1) out.push("past the window: " + what);
}
return out;
"""


def _chromium():
    browser = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                    if shutil.which(name)), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip("no Chromium and chromedriver here (apt-get install chromium chromium-driver)")
    return browser, driver


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    built = os.environ.get("LDPFAST_DOCS_HTML")
    if built:
        return Path(built)
    pytest.importorskip("sphinx", reason="Sphinx is not installed (pip install '.[docs]')")
    pytest.importorskip("furo", reason="the docs theme is not installed (pip install '.[docs]')")
    out = tmp_path_factory.mktemp("html")
    subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", str(ROOT / "docs"), str(out)],
                   check=True, capture_output=True, timeout=1200)
    return out


@pytest.fixture(scope="module")
def browser():
    binary, driver_path = _chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    from selenium.webdriver.chrome.service import Service

    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


def _requests(driver):
    """URLs the page asked for since the last call (Chrome's performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page", PAGES)
def test_page_shows_everything_offline_without_errors(site, browser, page, width):
    path = site / page
    assert path.exists(), f"{page} is not in the built site"
    browser.set_window_size(width, 900)
    browser.get_log("performance")  # drop what earlier pages asked for
    browser.get(path.as_uri())
    assert browser.execute_script(CLIPPED) == []
    errors = [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []
    remote = [url for url in _requests(browser) if not url.startswith(("file:", "data:", "about:"))]
    assert remote == []


def test_code_blocks_scroll_rather_than_wrap_or_cut(site, browser):
    """A long line in a code block keeps its width: the block scrolls (the estimation
    guide's table and the API signatures are wider than the column)."""
    browser.set_window_size(700, 900)
    browser.get((site / "guide" / "end-to-end.html").as_uri())
    widths = browser.execute_script(
        "return [...document.querySelectorAll('article pre')].map(p => [p.scrollWidth, p.clientWidth,"
        " getComputedStyle(p).overflowX, getComputedStyle(p).whiteSpace])")
    assert widths and any(scroll > client for scroll, client, _, _ in widths), widths
    assert all(space == "pre" for _, _, _, space in widths), widths
