"""Drives `attn-trace serve`'s page in headless Chromium (docs/SERVE.md).

Usage: check_serve.py BINARY MODEL SCREENSHOT.png
Starts `BINARY serve --port 0 --model MODEL`, opens its page, and checks, each failing the run:
  - the page draws the trace's grid (one small map per layer and head) and the predictions
    table, whose first row is the command line's top prediction for the last token;
  - typing another prompt and submitting redraws the grid for the new tokens;
  - clicking a head in the grid ablates it: "the command for this view" gains --ablate L.H and
    the predictions are the command line's with that --ablate;
  - clicking a cell (query, key) of head 1.1's large map knocks that edge out: the command
    gains --knockout 1.1:Q->K, the predictions table is the command line's with it (and the
    command line's predictions differ from those without it), the large map still shows head
    1.1 with that cell's weight now 0 and outlined; a second click takes the flag back; with
    --average-heads a cell of the mean map is the layer's edge, --knockout 1:Q->K;
  - typing a corrupted prompt (and the metric) draws the --html page's patching grid, whose
    cells are the command line's `patching` effects; a corrupted prompt of another token
    count shows the command's one-line error;
  - "Generate" with 6 in its box sends --generate 6: the --html page's generation section
    appears (the frame scrolled to it), its generated tokens (and the line above the
    predictions) are the command line's;
  - "Attribute" with an answer and a foil sends --attribute A B: the --html page's attribution
    section appears, its grid's cells the command line's heads' terms;
  - the browser console holds no errors, and the page requested nothing but its own server;
  - two changes at once: the first change's request is aborted (its connection closed, so the
    server stops its trace) and the second's answer is shown;
  - "Compare" (the server started with --compare-with, here the model against itself) shows
    `attn-trace compare`'s page, the command line's bytes, and names the command;
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
# The toy model's tokenizer (fixtures/decoders/llama-gqa) splits the prompt the test types
# into 18 tokens; this corrupted prompt into 18 too (" Italy" is " It" "aly" as " France" is
# " Fr" "ance"), and LONGER into 19. " the" and " a" are one token each.
CORRUPTED = "Paris is a city in the north of Italy and"
LONGER = "Rome is a city in the south of Italy and"
METRIC = [" the", " a"]


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


def cli_json(binary, model, args):
    out = subprocess.run([binary, *args, "--model", model, "--format", "json"], check=True, capture_output=True)
    return json.loads(out.stdout)


def cli_rows(binary, model, args):
    """The predictions table as the page draws it: (text, "12.34 %") per candidate."""
    top = cli_json(binary, model, args)["predictions"][-1]["top"]
    return [[p.get("text") or p.get("token") or str(p["id"]), f"{100 * p['prob']:.2f} %"] for p in top]


def page_rows(driver):
    return driver.execute_script(
        "return [...document.querySelectorAll('#pred tr')].map((r) => [...r.cells].map((c) => c.textContent));")


def show_head(driver, layer, head):
    """Opens layer.head in the large map through its menus, as a reader would."""
    in_frame(driver, f"""const l = d.getElementById('layer'), h = d.getElementById('head');
        l.value = '{layer}'; l.dispatchEvent(new Event('change'));
        h.value = '{head}'; h.dispatchEvent(new Event('change'));""")


# The strongest edge of the last query in the large map: [q, k, weight].
STRONGEST = """const cells = [...d.querySelectorAll('#maps .cell')];
    const last = Math.max(...cells.map((c) => Number(c.dataset.q)));
    const row = cells.filter((c) => Number(c.dataset.q) === last && Number(c.dataset.k) > 0);
    const c = row.reduce((a, b) => Number(b.dataset.value) > Number(a.dataset.value) ? b : a);
    return [Number(c.dataset.q), Number(c.dataset.k), Number(c.dataset.value)];"""


def cell(q, k):
    return f"d.querySelector('#maps .cell[data-q=\"{q}\"][data-k=\"{k}\"]')"


def check_knockout(driver, binary, model, base):
    status = lambda: driver.find_element(By.ID, "status").text
    show_head(driver, 1, 1)
    q, k, weight = in_frame(driver, STRONGEST)
    in_frame(driver, f"{cell(q, k)}.click()")
    wait_for(driver, "the knocked-out trace", lambda: "knocked out" in status()
             and in_frame(driver, f"return Number({cell(q, k)}.dataset.value)") == 0)
    edge = f"1.1:{q}->{k}"
    cmd = driver.find_element(By.ID, "cmd").text
    check(f"--knockout '{edge}'" in cmd, f"the command for this view names the edge {edge}: {cmd}")
    want = cli_rows(binary, model, [*base, "--knockout", edge])
    check(page_rows(driver) == want, f"the predictions are the command line's with --knockout ({page_rows(driver)} vs {want})")
    before = cli_json(binary, model, base)["predictions"][-1]["top"]
    after = cli_json(binary, model, [*base, "--knockout", edge])["predictions"][-1]["top"]
    check(before != after, f"the knockout of {edge} (weight {weight:.3f}) changes the command line's predictions")
    kept = in_frame(driver, "return [d.getElementById('layer').value, d.getElementById('head').value]")
    check(kept == ["1", "1"], f"the large map still shows layer 1 head 1 ({kept})")
    outlined = in_frame(driver, f"return {cell(q, k)}.style.outlineStyle")
    check(outlined == "solid", f"the knocked-out cell is outlined ({outlined!r})")
    in_frame(driver, f"{cell(q, k)}.click()")
    wait_for(driver, "the edge restored", lambda: "knocked out" not in status() and status().startswith("traced")
             and in_frame(driver, f"return Number({cell(q, k)}.dataset.value)") > 0)
    cmd = driver.find_element(By.ID, "cmd").text
    check("--knockout" not in cmd, f"a second click takes the knockout back: {cmd}")


def check_mean_knockout(driver, binary, model, base):
    """With --average-heads the large map is the mean over heads: a click knocks the edge out
    in every head of the layer (`--knockout L:Q->K`)."""
    status = lambda: driver.find_element(By.ID, "status").text
    opts = driver.find_element(By.ID, "opts")
    opts.send_keys("--average-heads")
    driver.find_element(By.ID, "run").click()
    mean = "return d.getElementById('head').value === 'mean' && d.getElementById('layer').value === '1'"
    wait_for(driver, "the mean over heads", lambda: in_frame(driver, mean))
    q, k, _ = in_frame(driver, STRONGEST)
    in_frame(driver, f"{cell(q, k)}.click()")
    wait_for(driver, "the layer-wide knockout", lambda: "knocked out" in status()
             and in_frame(driver, f"return Number({cell(q, k)}.dataset.value)") == 0)
    cmd = driver.find_element(By.ID, "cmd").text
    check(f"--average-heads --ablate 1.2 --knockout '1:{q}->{k}'" in cmd, f"a mean map's cell is the layer's edge: {cmd}")
    want = cli_rows(binary, model, [*base, "--average-heads", "--knockout", f"1:{q}->{k}"])
    check(page_rows(driver) == want, f"the predictions are the command line's ({page_rows(driver)} vs {want})")
    in_frame(driver, f"{cell(q, k)}.click()")
    wait_for(driver, "the layer's edge restored", lambda: "knocked out" not in status() and status().startswith("traced"))
    opts.clear()


def check_patching(driver, binary, model, base, corrupted, metric):
    status = lambda: driver.find_element(By.ID, "status").text
    driver.find_element(By.ID, "corrupted").send_keys(corrupted)
    driver.find_element(By.ID, "metric-a").send_keys(metric[0])
    driver.find_element(By.ID, "metric-b").send_keys(metric[1])
    driver.find_element(By.ID, "run").click()
    cells = "return [...d.querySelectorAll('#patching table.patch td')].map((c) => c.textContent)"
    wait_for(driver, "the patching grid", lambda: "patched" in status() and len(in_frame(driver, cells)) > 0)
    cmd = driver.find_element(By.ID, "cmd").text
    check(f"--patch '{corrupted}' --metric '{metric[0]}' '{metric[1]}'" in cmd, f"the command names the patch: {cmd}")
    doc = cli_json(binary, model, [*base, "--patch", corrupted, "--metric", *metric])
    digits = in_frame(driver, "return JSON.parse(d.getElementById('data').textContent).precision")
    want = [f"{r['effect']:.{digits}f}" for r in doc["patching"]["rows"]]
    got = in_frame(driver, cells)
    check(got == want, f"the patching grid's cells are the command line's effects ({got} vs {want})")


def check_patch_error(driver, binary, model, base, metric, longer):
    status = lambda: driver.find_element(By.ID, "status").text
    box = driver.find_element(By.ID, "corrupted")
    box.clear()
    box.send_keys(longer)
    driver.find_element(By.ID, "run").click()
    wait_for(driver, "the token-count error", lambda: driver.find_element(By.ID, "status").get_attribute("class") == "error")
    cli = subprocess.run([binary, *base, "--patch", longer, "--metric", *metric, "--model", model, "--format", "json"],
                         capture_output=True, text=True)
    line = cli.stderr.strip().removeprefix("attn-trace: ")
    check(cli.returncode == 2 and status() == line, f"the page shows the command's error ({status()!r} vs {line!r})")


def label(t):
    """A generated token as the --html page labels it (src/trace/label.rs)."""
    text = t.get("text")
    return text.replace(" ", "·").replace("\n", "↵") if text is not None else t["token"]


def check_generation(driver, binary, model, base, n):
    status = lambda: driver.find_element(By.ID, "status").text
    box = driver.find_element(By.ID, "generate")
    box.clear()
    box.send_keys(str(n))
    driver.find_element(By.ID, "gen-run").click()
    toks = "return [...d.querySelectorAll('#generation #gen-text .tok.gen')].map((t) => t.textContent)"
    wait_for(driver, "the generation", lambda: "generated" in status() and len(in_frame(driver, toks)) > 0)
    cmd = driver.find_element(By.ID, "cmd").text
    check(f"--generate {n}" in cmd, f"the command for this view names the generation: {cmd}")
    doc = cli_json(binary, model, [*base, "--generate", str(n)])
    want = [label(t) for t in doc["generation"]["tokens"]]
    got = in_frame(driver, toks)
    check(got == want, f"the generated tokens are the command line's ({got} vs {want})")
    line = driver.find_element(By.ID, "generated").text
    check(line == "".join(want), f"the line above the predictions shows them ({line!r})")
    top = in_frame(driver, "return d.getElementById('generation').getBoundingClientRect().top")
    outer = driver.execute_script("return window.scrollY")
    check(abs(top) < 2 and outer == 0, f"the frame, not the page, scrolled to the generation ({top}, {outer})")
    box.clear()


def check_attribution(driver, binary, model, base, metric):
    status = lambda: driver.find_element(By.ID, "status").text
    driver.find_element(By.ID, "attr-answer").send_keys(metric[0])
    driver.find_element(By.ID, "attr-foil").send_keys(metric[1])
    driver.find_element(By.ID, "attr-run").click()
    cells = "return [...d.querySelectorAll('#attribution table.patch td')].map((c) => c.textContent)"
    wait_for(driver, "the attribution table", lambda: "attributed" in status() and len(in_frame(driver, cells)) > 0)
    cmd = driver.find_element(By.ID, "cmd").text
    check(f"--attribute '{metric[0]}' '{metric[1]}'" in cmd, f"the command names the attribution: {cmd}")
    doc = cli_json(binary, model, [*base, "--attribute", *metric])
    digits = in_frame(driver, "return JSON.parse(d.getElementById('data').textContent).precision")
    heads = [t for t in doc["attribution"]["terms"] if t["name"] == "attn.head"]
    want = [f"{t['value']:.{digits}f}" for t in heads]
    got = in_frame(driver, cells)
    check(got == want, f"the attribution grid's cells are the command line's heads' terms ({got} vs {want})")


def check_superseded(driver):
    status = lambda: driver.find_element(By.ID, "status").text
    driver.get_log("performance")  # what came before
    driver.execute_script("run(); run();")
    wait_for(driver, "the second change's trace", lambda: status().startswith("traced"))
    time.sleep(0.5)
    events = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
    sent = [m["params"]["requestId"] for m in events if m["method"] == "Network.requestWillBeSent"
            and m["params"]["request"]["url"].endswith("/api/view")]
    failed = [m["params"] for m in events if m["method"] == "Network.loadingFailed" and m["params"]["requestId"] in sent]
    done = [m["params"]["requestId"] for m in events if m["method"] == "Network.loadingFinished"
            and m["params"]["requestId"] in sent]
    check(len(sent) == 2 and [f["requestId"] for f in failed] == sent[:1] and failed[0].get("canceled")
          and done == sent[1:], f"the superseded request was aborted, the last answered ({sent}, {failed}, {done})")
    logged = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    check(not logged and "error" not in driver.find_element(By.ID, "status").get_attribute("class"),
          f"the aborted request is neither a console error nor the page's ({logged})")


def check_compare(driver, binary, model):
    status = lambda: driver.find_element(By.ID, "status").text
    check(driver.find_element(By.ID, "cmp-form").is_displayed(), "the page offers the comparison")
    driver.find_element(By.ID, "cmp-run").click()
    wait_for(driver, "the comparison", lambda: status().startswith("compared"))
    cmd = driver.find_element(By.ID, "cmd").text
    check(cmd.startswith("attn-trace compare ") and cmd.count("--model") == 2, f"the command is the comparison: {cmd}")
    prompt = driver.find_element(By.ID, "prompt").get_attribute("value")
    with tempfile.TemporaryDirectory() as d:
        page = f"{d}/compare.html"
        subprocess.run([binary, "compare", prompt, "--model", model, "--model", model, "--html", page],
                       capture_output=True, check=False)
        want = open(page, encoding="utf-8").read()
    got = driver.execute_script("return document.getElementById('view').srcdoc")
    check(got == want, f"the frame holds the command line's comparison page ({len(got)} vs {len(want)} characters)")
    heading = "return (d.querySelector('h1') || {}).textContent"
    wait_for(driver, "the comparison's page in the frame", lambda: in_frame(driver, heading) == "attn-trace compare")


def main(binary, model, shot):
    server = subprocess.Popen([binary, "serve", "--port", "0", "--model", model, "--compare-with", model],
                              stderr=subprocess.PIPE, text=True)
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

        base = ["Paris is a city in the north of France and", "--ablate", "1.2"]
        check_knockout(driver, binary, model, base)
        check_mean_knockout(driver, binary, model, base)
        check_patching(driver, binary, model, base, CORRUPTED, METRIC)
        driver.save_screenshot(shot)
        check_patch_error(driver, binary, model, base, METRIC, LONGER)
        driver.find_element(By.ID, "corrupted").clear()
        check_generation(driver, binary, model, base, 6)
        check_attribution(driver, binary, model, base, METRIC)
        driver.save_screenshot(shot.replace(".png", "-attribution.png"))

        # The one error the page was made to get (the token counts) is logged as a failed load.
        refused = lambda e: e["source"] == "network" and "/api/view" in e["message"] and "400" in e["message"]
        logged = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        check(sum(map(refused, logged)) == 1, f"one refused request, the patch of another token count: {logged}")
        bad = [e for e in logged if not refused(e)]
        check(not bad, f"no other console errors or warnings: {bad}")
        requests = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
        urls = {m["params"]["request"]["url"] for m in requests if m["method"] == "Network.requestWillBeSent"}
        foreign = sorted(u for u in urls if not u.startswith((url, "about:", "data:", "chrome://")))
        check(not foreign, f"the page requested nothing but its server: {foreign}")
        check_superseded(driver)
        check_compare(driver, binary, model)
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
