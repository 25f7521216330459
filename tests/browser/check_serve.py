"""Drives `attn-trace serve`'s page in headless Chromium (docs/SERVE.md).

Usage: check_serve.py BINARY MODEL SCREENSHOT.png
Starts `BINARY serve --port 0 --model MODEL`, opens its page, and checks, each failing the run:
  - the page draws the trace's grid (one small map per layer and head) and the predictions
    table, whose first row is the command line's top prediction for the last token;
  - typing another prompt and submitting redraws the grid for the new tokens;
  - clicking a head in the grid ablates it: "the command for this view" gains --ablate L.H and
    the predictions are the command line's with that --ablate;
  - the browser console holds no errors, and the page requested nothing but its own server;
then stops the server with SIGTERM (exit 0) and saves a screenshot.
"""

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def cli_top(binary, model, args):
    out = subprocess.run([binary, *args, "--model", model, "--format", "json"], check=True, capture_output=True)
    top = json.loads(out.stdout)["predictions"][-1]["top"][0]
    return top.get("text") or top.get("token") or str(top["id"])


def wait_for(driver, what, cond, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if cond():
                return True
        except Exception:  # the frame may be between documents
            pass
        time.sleep(0.1)
    check(False, f"timed out waiting for {what}")
    return False


def in_frame(driver, script):
    return driver.execute_script("const d = document.getElementById('view').contentDocument; " + script)


def main(binary, model, shot):
    server = subprocess.Popen([binary, "serve", "--port", "0", "--model", model], stderr=subprocess.PIPE, text=True)
    line = server.stderr.readline()
    prefix = "attn-trace serve: listening on "
    if not line.startswith(prefix):
        server.kill()
        sys.exit(f"not the start line: {line!r}")
    url = line[len(prefix):].strip()
    profile = tempfile.mkdtemp(prefix="attn-trace-chromium-")
    opts = Options()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1200,1400", f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=opts)
    try:
        driver.get(url)
        status = lambda: driver.find_element(By.ID, "status").text
        first = lambda: driver.find_element(By.CSS_SELECTOR, "#pred td").text
        grid = "return d.querySelectorAll('.overview-grid canvas').length"
        summary = "return (d.querySelector('.summary') || {}).textContent || ''"
        wait_for(driver, "the first trace", lambda: status().startswith("traced") and in_frame(driver, grid) > 0)
        check(in_frame(driver, grid) == 2 * 4, f"the grid has 2 layers x 4 heads ({in_frame(driver, grid)} maps)")
        want = cli_top(binary, model, ["The capital of France is"])
        check(first() == want, f"the top prediction is the command line's ({first()!r} vs {want!r})")

        before = in_frame(driver, summary)
        box = driver.find_element(By.ID, "prompt")
        box.clear()
        box.send_keys("Paris is a city in the north of France and")
        driver.find_element(By.ID, "run").click()
        wait_for(driver, "the new prompt's grid", lambda: in_frame(driver, summary) not in ("", before)
                 and status().startswith("traced"))
        check(in_frame(driver, summary) != before, "a new prompt redraws the page")

        in_frame(driver, "d.querySelector('.overview-grid canvas[data-layer=\"1\"][data-head=\"2\"]').click()")
        wait_for(driver, "the ablated trace", lambda: "ablated" in status())
        cmd = driver.find_element(By.ID, "cmd").text
        check("--ablate 1.2" in cmd, f"the command for this view names the ablated head: {cmd}")
        want = cli_top(binary, model, ["Paris is a city in the north of France and", "--ablate", "1.2"])
        check(first() == want, f"the ablated top prediction is the command line's ({first()!r} vs {want!r})")
        driver.save_screenshot(shot)

        bad = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        check(not bad, f"no console errors or warnings: {bad}")
        requests = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
        urls = {m["params"]["request"]["url"] for m in requests if m["method"] == "Network.requestWillBeSent"}
        foreign = sorted(u for u in urls if not u.startswith((url, "about:", "data:", "chrome://")))
        check(not foreign, f"the page requested nothing but its server: {foreign}")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            code = None
        check(code == 0, f"SIGTERM stops the server with exit 0 ({code})")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("serve: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
