"""Opens a --generate run's --html page in headless Chromium and checks its generation view.

Usage: check_generation.py PAGE.html TRACE.json SCREENSHOT.png
TRACE.json is the same run's --format json output, whose weights the page must show: for
generated token i (0-based) and layer l, the step that chose it is the prompt's
`layers.{l}.attn.weights` row n - 1 (i = 0) or decode step i's `gen.{i}.layers.{l}.attn.weights`
(one row of n + i weights). For a batch it is the batch's JSON array, and every check is made
in every section (element ids ending in "-s1", "-s2", ...).

Checks, each of which fails the run:
  - the line holds one span per prompt and generated token, the generated ones marked and
    titled with their probability; the prompt's text (markup, quotes and all) is the spans'
    text, and no markup of it reached the page (no <img>, nothing run);
  - hovering a generated token colours every token before it, and only those: each one's
    weight (data-weight) equals the JSON's weight for the layer and head of the menus,
    exactly, and its colour is viridis(weight / the row's largest weight); for the first
    generated token (the prompt's last row), a middle one and the last;
  - choosing another head, then another layer, shows that head's and layer's row, as the
    JSON says, and other colours;
  - a click keeps a token: hovering the others then changes nothing but the hover text,
    which shows the hovered token's weight at the page's precision; a second click lets go;
    Enter on a focused token keeps it too;
  - the grid draws a strip per layer x head, one per layer for the mean over heads and one
    for the mean over layers; a strip's pixels are the row's colours, and clicking one shows
    its layer and head;
  - the shared 0-1 scale colours each weight w as viridis(w), and "without the first token"
    scales by the largest weight after the first (which is drawn at the top);
  - the means over heads and over layers are the means of the JSON's rows (within 1e-6);
  - in a batch, the other sections' clicks leave the first section's view alone;
  - the browser console holds no errors and the page made no network requests;
and saves a screenshot of the view.
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
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def viridis(colors, t):
    """html_generation.js's colour scale, written again: the anchors interpolated linearly."""
    t = min(1.0, max(0.0, t)) * (len(colors) - 1)
    i = min(len(colors) - 2, math.floor(t))
    f = t - i
    return [math.floor(colors[i][k] + (colors[i + 1][k] - colors[i][k]) * f + 0.5) for k in range(3)]


def rgb(css):
    """"rgb(1, 2, 3)" -> [1, 2, 3]."""
    return [int(x) for x in css[css.index("(") + 1:css.index(")")].split(",")[:3]]


def near(a, b):
    return all(abs(x - y) <= 1 for x, y in zip(a, b))


def json_rows(doc, i, layer):
    """Layer `layer`'s rows of the step that chose generated token i, one per head."""
    n = doc["generation"]["prompt_tokens"]
    if i == 0:
        step = next(s for s in doc["steps"] if s["id"] == f"layers.{layer}.attn.weights")
        return [h[n - 1][:n] for h in step["values"]]
    steps = doc["generation"]["steps"][i - 1]["steps"]
    step = next(s for s in steps if s["id"] == f"gen.{i}.layers.{layer}.attn.weights")
    return [h[0] for h in step["values"]]


def mean(rows):
    return [sum(r[k] for r in rows) / len(rows) for k in range(len(rows[0]))]


class Section:
    def __init__(self, driver, doc, sfx):
        self.d, self.doc, self.sfx = driver, doc, sfx
        self.what = f"section{sfx}: " if sfx else ""
        self.data = driver.execute_script(
            f"return JSON.parse(document.getElementById('gen-data{sfx}').textContent)")
        self.n = doc["generation"]["prompt_tokens"]
        self.count = len(doc["generation"]["tokens"])

    def el(self, id_):
        return self.d.find_element(By.ID, id_ + self.sfx)

    def gen(self, i):
        return self.d.find_element(By.CSS_SELECTOR, f'#gen-text{self.sfx} .tok[data-gen="{i}"]')

    def tok(self, pos):
        return self.d.find_element(By.CSS_SELECTOR, f'#gen-text{self.sfx} .tok[data-pos="{pos}"]')

    def hover(self, element):
        self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        ActionChains(self.d).move_to_element(element).perform()

    def choose(self, layer, head):
        Select(self.el("gen-layer")).select_by_value(str(layer))
        if layer != "mean":
            Select(self.el("gen-head")).select_by_value(str(head))

    def spans(self):
        """Every span: [pos, data-weight or None, background colour, classes]."""
        return self.d.execute_script(
            f"return [...document.querySelectorAll('#gen-text{self.sfx} .tok')].map(s => "
            "[Number(s.dataset.pos), s.dataset.weight === undefined ? null : s.dataset.weight, "
            "getComputedStyle(s).backgroundColor, s.className])")

    def shown(self, i, want, label, scale=None, exact=True):
        """The spans show generated token i's row `want`: weights (exact, or within 1e-6 for
        a mean), colours on the scale (default: 0 to the row's largest weight), classes."""
        colors = self.data["colors"]
        scale = scale or (lambda v: v / max(want) if max(want) > 0 else 0)
        spans = self.spans()
        before = [s for s in spans if s[0] < self.n + i]
        weights = [float(s[1]) if s[1] is not None else None for s in before]
        ok = len(before) == len(want) and all(
            w is not None and (w == x if exact else abs(w - x) < 1e-6) for w, x in zip(weights, want))
        check(ok, f"{self.what}{label}: the {len(want)} tokens before generated token {i + 1} show the JSON's "
                  f"weights{' (within 1e-6)' if not exact else ''}: {weights[:4]}... vs {want[:4]}...")
        bad = [(s[0], rgb(s[2]), viridis(colors, scale(x))) for s, x in zip(before, want)
               if not near(rgb(s[2]), viridis(colors, scale(x)))]
        check(not bad, f"{self.what}{label}: their colours are the scale's ({len(bad)} differ: {bad[:3]})")
        rest = [s for s in spans if s[0] >= self.n + i]
        chosen = [s[0] for s in rest if "chosen" in s[3].split()]
        check(all(s[1] is None for s in rest) and chosen == [self.n + i]
              and all("later" in s[3].split() for s in rest[1:]),
              f"{self.what}{label}: token {self.n + i} is the chosen one, the {len(rest) - 1} after it uncoloured")
        return [s[2] for s in before]

    def line(self):
        """The spans: one per token, generated ones marked and titled; the prompt as text."""
        spans = self.d.find_elements(By.CSS_SELECTOR, f"#gen-text{self.sfx} .tok")
        gens = [s for s in spans if s.get_attribute("data-gen") is not None]
        check(len(spans) == self.n + self.count and len(gens) == self.count,
              f"{self.what}{len(spans)} token spans ({len(gens)} generated), want {self.n} + {self.count}")
        first = self.doc["generation"]["tokens"][0]
        title = gens[0].get_attribute("title")
        check(f"probability {first['prob']:.{self.data['precision']}f}" in title,
              f"{self.what}the first generated token's title gives its probability: {title!r}")
        elements = self.d.execute_script(
            f"return [...document.querySelectorAll('#gen-text{self.sfx} *')].map(e => e.tagName)")
        check(set(elements) == {"SPAN"}, f"{self.what}the line holds only the token spans: {set(elements)}")
        text = "".join(s.text for s in spans[:self.n]).replace("·", " ")
        sentence = self.doc["input"]["sentence"]
        hostile = [p for p in ("</script>", "<img", "\"", "'") if p in sentence]
        check(all(p in text for p in hostile), f"{self.what}the prompt's markup and quotes are text: {text!r}")

    def rows(self):
        """Each token's row for a head and a layer, then another head, then another layer."""
        layers, heads = self.data["layers"], self.data["heads"]
        l0, h1 = layers[0], heads[1 % len(heads)]
        self.choose(l0, h1)
        for i in sorted({0, self.count // 2, self.count - 1}):
            self.hover(self.gen(i))
            self.shown(i, json_rows(self.doc, i, l0)[1 % len(heads)], f"layer {l0} head {h1}")
        i = self.count - 1
        before = self.shown(i, json_rows(self.doc, i, l0)[1 % len(heads)], "again")
        h2 = heads[-1]
        self.choose(l0, h2)
        other = self.shown(i, json_rows(self.doc, i, l0)[-1], f"layer {l0} head {h2} (menu)")
        check(other != before, f"{self.what}head {h2} draws other colours than head {h1}")
        l1 = layers[-1]
        self.choose(l1, h2)
        third = self.shown(i, json_rows(self.doc, i, l1)[-1], f"layer {l1} head {h2} (menu)")
        check(third != other, f"{self.what}layer {l1} draws other colours than layer {l0}")

    def pin(self):
        """A click keeps a token while the others are hovered; the hover text gives weights."""
        layer, head = self.data["layers"][-1], self.data["heads"][-1]
        i = self.count - 1
        want = json_rows(self.doc, i, layer)[-1]
        self.gen(i).click()
        check("pinned" in self.gen(i).get_attribute("class"), f"{self.what}a click keeps generated token {i + 1}")
        precision = self.data["precision"]
        for pos in (0, self.n - 1, self.n + 1):
            self.hover(self.tok(pos))
            tip = self.el("gen-tip").text
            shown = float(tip.rsplit(": ", 1)[-1])
            check(abs(shown - want[pos]) <= 0.5 * 10 ** -precision + 1e-12
                  and f"layer {layer} · head {head}" in tip and f"generated token {i + 1} " in tip,
                  f"{self.what}hovering position {pos} shows {tip!r}; the JSON says {want[pos]:.{precision}f}")
        self.shown(i, want, "kept while others are hovered")
        self.gen(i).click()
        self.hover(self.gen(0))
        self.shown(0, json_rows(self.doc, 0, layer)[-1], "let go: hovering shows again")
        self.d.execute_script("arguments[0].focus()", self.gen(1))
        self.gen(1).send_keys(Keys.ENTER)
        self.hover(self.gen(0))
        check("pinned" in self.gen(1).get_attribute("class"), f"{self.what}Enter on a focused token keeps it")
        self.shown(1, json_rows(self.doc, 1, layer)[-1], "kept by the keyboard")
        self.gen(1).click()

    def grid(self, i):
        """The strips: their number, their pixels, a click's layer and head."""
        layers, heads = self.data["layers"], self.data["heads"]
        strips = self.d.find_elements(By.CSS_SELECTOR, f"#gen-grid{self.sfx} canvas")
        check(len(strips) == len(layers) * (len(heads) + 1) + 1,
              f"{self.what}{len(strips)} strips, want layers x (heads + mean) + 1 = "
              f"{len(layers) * (len(heads) + 1) + 1}")
        layer, head = layers[0], heads[0]
        sel = f'#gen-grid{self.sfx} canvas[data-layer="{layer}"][data-head="{head}"]'
        strip = self.d.find_element(By.CSS_SELECTOR, sel)
        self.hover(strip)
        strip.click()
        menus = (self.el("gen-layer").get_attribute("value"), self.el("gen-head").get_attribute("value"))
        check(menus == (str(layer), str(head)) and "on" in strip.get_attribute("class").split(),
              f"{self.what}clicking the strip of layer {layer} head {head} chooses it: menus {menus}")
        want = json_rows(self.doc, i, layer)[0]
        self.shown(i, want, f"layer {layer} head {head} (grid)")
        pixels = self.d.execute_script(
            "const c = document.querySelector(arguments[0]); const d = c.getContext('2d')"
            ".getImageData(0, 0, c.width, 1).data; return [c.width, [...d]];", sel)
        got = [pixels[1][4 * k:4 * k + 3] for k in range(pixels[0])]
        top = max(want)
        bad = [k for k, v in enumerate(want) if not near(got[k], viridis(self.data["colors"], v / top))]
        check(pixels[0] == len(want) and not bad, f"{self.what}the strip is the row: {pixels[0]} pixels, {bad} differ")
        return want

    def scales(self, i, want):
        """The shared 0-1 scale and the scale without the first token."""
        self.el("gen-shared").click()
        self.shown(i, want, "shared 0-1 scale", scale=lambda v: v)
        self.el("gen-shared").click()
        self.el("gen-sink").click()
        top = max(want[1:])
        self.shown(i, want, "scale without the first token", scale=lambda v: v / top)
        rule = self.el("gen-scale-rule").text
        check("after the first token" in rule, f"{self.what}the scale is stated: {rule!r}")
        self.el("gen-sink").click()

    def means(self, i):
        """The means over heads and over layers and heads, against the JSON's rows."""
        layers = self.data["layers"]
        self.choose(layers[0], "mean")
        self.shown(i, mean(json_rows(self.doc, i, layers[0])), "mean over heads", exact=False)
        self.choose("mean", None)
        disabled = self.el("gen-head").get_attribute("disabled") is not None
        check(disabled, f"{self.what}the mean over layers leaves no head to choose")
        want = mean([mean(json_rows(self.doc, i, l)) for l in layers])
        self.shown(i, want, "mean over layers and heads", exact=False)


def run_section(driver, doc, sfx, shot):
    s = Section(driver, doc, sfx)
    check(s.count >= 3 and len(s.data["layers"]) >= 2 and len(s.data["heads"]) >= 2,
          f"{s.what}{s.count} generated tokens, {len(s.data['layers'])} layers, {len(s.data['heads'])} heads")
    s.line()
    # On load: the first generated token, the first layer, the mean over its heads.
    layer = s.data["layers"][0]
    s.shown(0, mean(json_rows(doc, 0, layer)), "on load, mean over heads", exact=False)
    s.rows()
    s.pin()
    i = s.count - 1
    s.hover(s.gen(i))
    want = s.grid(i)
    s.scales(i, want)
    if shot:
        driver.execute_script(f"document.getElementById('generation{sfx}').scrollIntoView()")
        driver.save_screenshot(shot)
        check(os.path.getsize(shot) > 10_000, f"screenshot saved to {shot}")
    s.means(i)


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
        # The prompt's <img onerror> would set the title to "pwned" (the title names the prompt).
        check(not driver.find_elements(By.TAG_NAME, "img") and driver.title.startswith("attn-trace: "),
              f"no token's markup became an element or ran (title {driver.title!r})")
        if isinstance(doc, list):
            for i in range(1, len(doc)):
                before = driver.execute_script("return document.getElementById('gen-text-s1').innerHTML")
                run_section(driver, doc[i], f"-s{i + 1}", None)
                after = driver.execute_script("return document.getElementById('gen-text-s1').innerHTML")
                check(before == after, f"section -s{i + 1}'s clicks leave the first section's view alone")
            run_section(driver, doc[0], "-s1", shot)
        else:
            run_section(driver, doc, "", shot)
        logs = driver.get_log("browser")
        # Chromium warns about repeated getImageData calls, which only this test makes.
        bad = [e for e in logs if e["level"] in ("SEVERE", "WARNING") and "getImageData" not in e["message"]]
        check(not bad, f"no console errors or warnings ({len(logs)} log entries): {bad}")
        requests = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
        urls = {m["params"]["request"]["url"] for m in requests if m["method"] == "Network.requestWillBeSent"}
        remote = sorted(u for u in urls if not u.startswith(("data:", "chrome://")) and not u.endswith(
            os.path.basename(page)))
        check(not remote, f"the page made no network requests: {remote}")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("generation: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
