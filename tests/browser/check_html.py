"""Opens attn-trace's --html page in headless Chromium and checks that it works.

Usage: check_html.py PAGE.html TRACE.json SCREENSHOT.png
TRACE.json is the same run's --format json output (the numbers the page must show). For a
batch's page it is the batch's JSON array: the page must have one section per document, in
order, each titled with its sentence and linked from the list at the top, and every check
below is made in every section (whose element ids end in "-s1", "-s2", ...).

Checks, each of which fails the run:
  - the page draws heads x n x n cells for the layer it opens on (all heads shown);
  - hovering a cell shows its layer, head, tokens and weight, and the weight equals the
    JSON trace's value at the page's precision;
  - choosing one head draws that head's n x n cells, with the colours it had among all heads;
  - choosing another layer redraws the cells with that layer's weights and other colours;
  - the overview draws every layer x head as a small map, one pixel per weight in the colour the
    large map gives it; clicking one opens that layer and head in the large view;
  - the shared 0-1 colour scale toggle colours every weight w as viridis(w) (the default is
    viridis(w / the map's largest weight)), in the large maps and the overview alike;
  - the focus walkthrough is on the page when the run had --focus;
  - with --pad-to, the pads' labels are drawn as pads and their keys' cells hatched, and the
    hover text marks a pad "(pad)";
  - the browser console holds no errors (and no page requested the network);
and saves a screenshot of the page.
"""

import json
import math
import os
import shutil
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def viridis(colors, t):
    """html.js's colour scale, written again: the anchors interpolated linearly, rounded half up."""
    t = min(1.0, max(0.0, t)) * (len(colors) - 1)
    i = min(len(colors) - 2, math.floor(t))
    f = t - i
    return [math.floor(colors[i][k] + (colors[i + 1][k] - colors[i][k]) * f + 0.5) for k in range(3)]


def rgb(css):
    """"rgb(1, 2, 3)" -> [1, 2, 3]."""
    return [int(x) for x in css[css.index("(") + 1:css.index(")")].split(",")[:3]]


def overview_and_shared_scale(driver, sfx, weights, layers, heads, n, causal=False):
    """The layer x head overview, its click, and the shared 0-1 colour scale toggle."""
    colors = driver.execute_script(f"return JSON.parse(document.getElementById('data{sfx}').textContent).colors")
    smalls = driver.find_elements(By.CSS_SELECTOR, f"#overview-grid{sfx} canvas")
    check(len(smalls) == len(layers) * heads,
          f"the overview draws {len(smalls)} small maps, want layers×heads = {len(layers) * heads}")

    def pixel(layer, head, q, k):
        return driver.execute_script(
            f"const c = document.querySelector('#overview-grid{sfx} canvas[data-layer=\"' + arguments[0] + "
            "'\"][data-head=\"' + arguments[1] + '\"]');"
            "return [...c.getContext('2d').getImageData(arguments[3], arguments[2], 1, 1).data].slice(0, 3);",
            str(layer), str(head), q, k)

    def cell(layer, head, q, k):
        sel = f'#maps{sfx} .cell[data-layer="{layer}"][data-head="{head}"][data-q="{q}"][data-k="{k}"]'
        return rgb(driver.find_element(By.CSS_SELECTOR, sel).value_of_css_property("background-color"))

    def near(a, b):
        return all(abs(x - y) <= 1 for x, y in zip(a, b))

    last = layers[-1]
    target = driver.find_element(By.CSS_SELECTOR, f'#overview-grid{sfx} canvas[data-layer="{last}"][data-head="1"]')
    target.click()
    layer_now = Select(driver.find_element(By.ID, "layer" + sfx)).first_selected_option.get_attribute("value")
    head_now = Select(driver.find_element(By.ID, "head" + sfx)).first_selected_option.get_attribute("value")
    drawn = driver.execute_script(
        f"return [...document.querySelectorAll('#maps{sfx} .cell')].map(c => c.dataset.layer + '.' + c.dataset.head)")
    check(layer_now == str(last) and head_now == "1" and len(drawn) == n * n
          and set(drawn) == {f"{last}.1"},
          f"clicking layer {last} head 1 in the overview opens it: menus {layer_now}/{head_now}, {len(drawn)} cells")

    m = weights[last][1]
    top = max(max(row) for row in m)
    probes = [(0, 0), (2, 5), (n - 1, n - 1), (3, 1)]
    for shared in (False, True):
        if shared:
            driver.find_element(By.ID, "shared" + sfx).click()
        scale = "shared 0-1" if shared else "per map"
        for q, k in probes:
            v = m[q][k]
            want = viridis(colors, v if shared else v / top)
            got, small = cell(last, 1, q, k), pixel(last, 1, q, k)
            check(near(got, want) and near(small, want),
                  f"{scale}: layer {last} head 1 [{q}][{k}] = {v:.4f} is {got} (overview {small}), want {want}")
    rule = driver.find_element(By.ID, "scale-rule" + sfx).text
    check("0 to 1 in every map" in rule, f"the shared scale is stated: {rule!r}")
    # A causal map's first row is all on the first token: its largest weight is 1.
    check(top < 1.0 or causal, f"the map's largest weight {top:.4f} < 1, so the two scales differ there")
    driver.find_element(By.ID, "shared" + sfx).click()


def section(driver, doc, sfx, shot):
    """Every check of one trace's part of the page; `sfx` ends its element ids."""
    tokens = doc["input"]["tokens"]
    n = len(tokens)
    weights = {s["layer"]: s["values"] for s in doc["steps"] if s["name"] == "attn.weights"}
    layers = sorted(weights)
    heads = len(weights[layers[0]])
    what = f"section{sfx}: " if sfx else ""
    mask = (doc["config"].get("padding") or {}).get("attention_mask") or [1] * n
    label = lambda i: f"{i} {tokens[i]}" + (" (pad)" if mask[i] == 0 else "")  # noqa: E731
    check(len(layers) >= 2 and heads >= 2, f"{what}the trace has {len(layers)} layers and {heads} heads to switch between")
    precision = driver.execute_script(f"return JSON.parse(document.getElementById('data{sfx}').textContent).precision")

    def cells():
        return driver.find_elements(By.CSS_SELECTOR, f"#maps{sfx} .cell")

    def colours():
        return driver.execute_script(
            f"return [...document.querySelectorAll('#maps{sfx} .cell')].map(c => "
            "[c.dataset.head, c.dataset.q, c.dataset.k, getComputedStyle(c).backgroundColor])")

    def hover(layer, head, q, k):
        sel = f'#maps{sfx} .cell[data-layer="{layer}"][data-head="{head}"][data-q="{q}"][data-k="{k}"]'
        cell = driver.find_element(By.CSS_SELECTOR, sel)
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
        ActionChains(driver).move_to_element(cell).perform()
        tip = driver.find_element(By.ID, "tip" + sfx).text
        want = weights[layer][head][q][k]
        shown = tip.rsplit(": ", 1)[-1]
        # JS's toFixed and Python's format may round an exact tie differently: allow
        # half a unit in the last shown place, and compare the text otherwise.
        close = abs(float(shown) - want) <= 0.5 * 10 ** -precision + 1e-12
        check(close and f"{label(q)} → {label(k)}" in tip and f"head {head}" in tip,
              f"{what}hovering layer {layer} head {head} [{q}][{k}] shows {tip!r}; the JSON says {want:.{precision}f}")

    first = layers[0]
    check(len(cells()) == heads * n * n,
          f"{what}layer {first}: {len(cells())} cells drawn, want heads×n×n = {heads}×{n}×{n} = {heads * n * n}")
    hover(first, 0, 0, 0)
    hover(first, heads - 1, n - 1, 1)
    hover(first, 1, 3, n - 2)
    everything = colours()
    if shot:
        driver.save_screenshot(shot)
        check(os.path.getsize(shot) > 10_000, f"screenshot saved to {shot}")

    Select(driver.find_element(By.ID, "head" + sfx)).select_by_value("1")
    one = colours()
    check(len(one) == n * n and all(c[0] == "1" for c in one),
          f"{what}head 1 alone: {len(one)} cells, all of head 1 (want {n * n})")
    check(one == [c for c in everything if c[0] == "1"], f"{what}head 1 keeps the colours it had among all heads")
    hover(first, 1, 2, 5)

    second = layers[1]
    Select(driver.find_element(By.ID, "layer" + sfx)).select_by_value(str(second))
    two = colours()
    check(len(two) == n * n, f"{what}layer {second}, head 1: {len(two)} cells (want {n * n})")
    check([c[3] for c in two] != [c[3] for c in one], f"{what}layer {second} draws other colours than layer {first}")
    hover(second, 1, 2, 5)
    Select(driver.find_element(By.ID, "head" + sfx)).select_by_value("all")
    check(len(cells()) == heads * n * n, f"{what}layer {second}, all heads: {len(cells())} cells")
    hover(second, 0, n - 1, 0)

    overview_and_shared_scale(driver, sfx, weights, layers, heads, n, doc["config"].get("causal", False))
    pads(driver, sfx, what, mask, n)

    if os.environ.get("EXPECT_FOCUS"):
        text = driver.find_element(By.ID, "focus" + sfx).text
        check("focus" in text and "context" in text, f"{what}the focus walkthrough is on the page")


def pads(driver, sfx, what, mask, n):
    """The pads' labels (one key and one query label per pad per map shown) and hatched key cells."""
    count = mask.count(0)
    heads = len(driver.find_elements(By.CSS_SELECTOR, f"#maps{sfx} div.map"))
    labels = driver.find_elements(By.CSS_SELECTOR, f"#maps{sfx} .klabel.pad, #maps{sfx} .qlabel.pad")
    hatched = driver.execute_script(
        f"return [...document.querySelectorAll('#maps{sfx} .cell.padkey')]"
        ".filter(c => getComputedStyle(c).backgroundImage.includes('gradient')).length")
    check(heads > 0 and len(labels) == 2 * count * heads and hatched == count * n * heads,
          f"{what}{count} pads in {heads} maps: {len(labels)} pad labels (want {2 * count * heads}), "
          f"{hatched} hatched cells (want {count * n * heads})")


def batch(driver, docs, shot):
    """A batch's page: the list of sentences, one titled section each, every section working
    on its own (its menus and clicks change only its own maps)."""
    links = driver.find_elements(By.CSS_SELECTOR, "nav.contents a")
    sentences = [d["input"]["sentence"] for d in docs]
    check([a.text for a in links] == sentences, f"the list of sentences links each: {[a.text for a in links]}")
    for i, doc in enumerate(docs):
        title = driver.find_element(By.ID, f"s{i + 1}").text
        want = f"Sentence {i + 1} of {len(docs)}: {doc['input']['sentence']}"
        check(title == want, f"section {i + 1} is titled {title!r}, want {want!r}")
        check(links[i].get_attribute("href").endswith(f"#s{i + 1}"), f"item {i + 1} links to its section")
    # The later sections first: their clicks and menus must leave the first one's maps alone.
    before = driver.execute_script("return document.getElementById('maps-s1').innerHTML")
    for i in range(1, len(docs)):
        section(driver, docs[i], f"-s{i + 1}", None)
    after = driver.execute_script("return document.getElementById('maps-s1').innerHTML")
    check(len(docs) >= 2 and before == after, "the other sections' menus and clicks leave the first section's maps")
    section(driver, docs[0], "-s1", shot)


def stacks(driver, doc, shot):
    """An encoder-decoder's page (issue 32): three titled sections, the encoder's
    self-attention (-enc), the decoder's (-dec) and the cross-attention (-cross). The two
    square ones get every check of a one-stack page, from the JSON's prefixed steps; the
    cross-attention draws heads x decoder tokens x source tokens cells whose hover text is
    the JSON's weight between the right tokens."""
    # The page labels a token by what it spells, a space drawn as a middle dot.
    source = [t.replace(" ", "\u00b7") for t in doc["input"]["texts"]]
    target = [t.replace(" ", "\u00b7") for t in doc["input"]["target"]["texts"]]
    titles = [driver.find_element(By.ID, f"stack{sfx}").text for sfx in ("-enc", "-dec", "-cross")]
    check(titles[0].startswith("Encoder self-attention") and titles[1].startswith("Decoder self-attention")
          and titles[2].startswith("Cross-attention"), f"the three views are titled: {titles}")

    def seen(prefix, name, tokens, causal=False):
        steps = []
        for s in doc["steps"]:
            if s["id"].startswith(prefix) and s["id"].endswith("." + name):
                layer = int(s["id"][len(prefix):].split(".")[1])
                steps.append({**s, "name": "attn.weights", "layer": layer})
        return {**doc, "input": {"tokens": tokens}, "steps": steps, "config": {"causal": causal}}

    section(driver, seen("encoder.", "attn.weights", source), "-enc", None)
    section(driver, seen("decoder.", "attn.weights", target, True), "-dec", None)
    cross = seen("decoder.", "cross_attn.weights", target)
    weights = {s["layer"]: s["values"] for s in cross["steps"]}
    heads, rows, cols = len(weights[0]), len(target), len(source)
    cells = driver.find_elements(By.CSS_SELECTOR, "#maps-cross .cell")
    check(len(cells) == heads * rows * cols and rows != cols,
          f"the cross-attention draws {len(cells)} cells, want heads x decoder x source = {heads}x{rows}x{cols}")
    precision = driver.execute_script("return JSON.parse(document.getElementById('data-cross').textContent).precision")
    for head, q, k in [(0, 0, 0), (heads - 1, rows - 1, cols - 1), (1, 2, cols - 2)]:
        sel = f'#maps-cross .cell[data-layer="0"][data-head="{head}"][data-q="{q}"][data-k="{k}"]'
        cell = driver.find_element(By.CSS_SELECTOR, sel)
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
        ActionChains(driver).move_to_element(cell).perform()
        tip = driver.find_element(By.ID, "tip-cross").text
        want = weights[0][head][q][k]
        close = abs(float(tip.rsplit(": ", 1)[-1]) - want) <= 0.5 * 10 ** -precision + 1e-12
        check(close and f"{q} {target[q]} → {k} {source[k]}" in tip,
              f"cross-attention: hovering head {head} [{q}][{k}] shows {tip!r}; the JSON says {want:.{precision}f}")
    if shot:
        driver.save_screenshot(shot)


def main(page, trace_path, shot):
    with open(trace_path, encoding="utf-8") as f:
        doc = json.load(f)

    profile = tempfile.mkdtemp(prefix="attn-trace-chromium-")
    opts = Options()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1200,900", f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(service=service, options=opts)
    try:
        driver.get("file://" + os.path.abspath(page))
        if isinstance(doc, list):
            batch(driver, doc, shot)
        elif "target" in doc["input"]:
            stacks(driver, doc, shot)
        else:
            section(driver, doc, "", shot)

        logs = driver.get_log("browser")
        # Chromium warns about repeated getImageData calls, which only this test makes (to
        # read the overview's pixels); the page itself never reads a canvas back.
        bad = [entry for entry in logs if entry["level"] in ("SEVERE", "WARNING")
               and "getImageData" not in entry["message"]]
        check(not bad, f"no console errors or warnings ({len(logs)} log entries): {bad}")
        requests = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
        urls = {m["params"]["request"]["url"] for m in requests if m["method"] == "Network.requestWillBeSent"}
        # chrome:// is the browser's own start page, loaded before ours.
        remote = sorted(u for u in urls if not u.startswith(("file://", "data:", "chrome://")))
        check(not remote and any(u.endswith(os.path.basename(page)) for u in urls),
              f"the page made no network requests: {remote}")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("html: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
