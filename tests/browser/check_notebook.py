"""Opens the example notebook's HTML output (python/tests/test_notebook.py leaves it in
.cache/artifacts/notebook-output.html: every trace the notebook shows, as Jupyter shows it)
in headless Chromium and checks that the pages live side by side.

Usage: check_notebook.py OUTPUT.html SCREENSHOT.png

Checks, each of which fails the run:
  - there are two trace frames, and each draws heads x n x n cells of its own;
  - choosing head 1 in the first frame redraws the first frame only: the second keeps all its
    cells (the pages' identical ids, styles and scripts do not clash);
  - the notebook's own document holds none of the pages' ids;
  - the browser console holds no errors;
and saves a screenshot.
"""

import os
import shutil
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def main(page, shot):
    profile = tempfile.mkdtemp(prefix="attn-trace-chromium-")
    opts = Options()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1200,900", f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=opts)
    try:
        driver.get("file://" + os.path.abspath(page))
        frames = driver.find_elements(By.CSS_SELECTOR, "iframe.attn-trace")
        check(len(frames) == 2, f"two trace frames ({len(frames)})")
        check(not driver.find_elements(By.ID, "maps"), "the notebook's document holds none of the pages' ids")

        def cells(i):
            driver.switch_to.default_content()
            driver.switch_to.frame(driver.find_elements(By.CSS_SELECTOR, "iframe.attn-trace")[i])
            return len(driver.find_elements(By.CSS_SELECTOR, "#maps .cell"))

        before = [cells(0), cells(1)]
        # The notebook's two traces: 2 heads over 8 tokens each.
        check(before == [2 * 8 * 8, 2 * 8 * 8], f"each frame draws its own heads x n x n cells ({before})")
        cells(0)
        Select(driver.find_element(By.ID, "head")).select_by_value("1")
        after = [cells(0), cells(1)]
        check(after == [8 * 8, 2 * 8 * 8], f"head 1 in the first frame redraws that frame only ({after})")
        driver.switch_to.default_content()
        driver.save_screenshot(shot)
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        check(not errors, f"no console errors ({errors})")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    if FAILURES:
        print(f"check_notebook: {len(FAILURES)} failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main(*sys.argv[1:])
