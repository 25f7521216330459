"""Opens a real model's --html page in headless Chromium and checks that its tokens read as
text: the decoded glyphs (`·café`, `中`), not the byte-level vocabulary's spelling (`ĠcafÃ©`,
`ä¸Ń`) or any other mojibake, and that the glyphs are drawn, not the empty boxes a missing
font leaves.

Usage: check_glyphs.py PAGE.html TRACE.json SCREENSHOT.png
TRACE.json is the same run's --format json output: its `input.texts` are what the labels
must show (a space as `·`, a newline as `↵`). The run must have --steps with tokens (the
page's step tables) and --focus; the page's sentence must have a token whose text is a CJK
character and one that decodes to `<0x..>` markers.

Checks, each of which fails the run:
  - the page is read as UTF-8;
  - the key labels' CJK glyphs turn with the label (not upside down once it is rotated);
  - every map's key and query labels, the `tokens` step's table, the hover text and the focus
    walkthrough show the labels the JSON's texts give;
  - the page's visible text holds no token as spelled and no mojibake (`Ã`, `Ġ`, `ä¸`,
    U+FFFD, ...);
  - each CJK character and `é` is drawn in the labels' font as a glyph of its own: its pixels
    differ from another CJK character's and from an unassigned code point's (a missing
    font draws every one of them as the same box);
  - the browser console holds no errors;
and saves a screenshot of one head's map, scrolled into view.
"""

import json
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
# What UTF-8 read as Latin-1, or a byte-level BPE spelling, looks like: none of it is text
# of the sentences this checks.
MOJIBAKE = ["Ã", "Â", "Ġ", "Ċ", "ä¸", "æĸ", "å·", "\ufffd"]
# Draws one character on a canvas in a given font and returns its pixels' alpha values.
PIXELS = """
const c = document.createElement('canvas'); c.width = 48; c.height = 48;
const x = c.getContext('2d'); x.font = arguments[1]; x.textBaseline = 'top';
x.fillText(arguments[0], 4, 4);
return Array.from(x.getImageData(0, 0, 48, 48).data.filter((_, i) => i % 4 === 3)).join(',');
"""


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def label(text):
    return text.replace(" ", "·").replace("\n", "↵")


def glyphs(driver, font, chars):
    """Each character of `chars` is drawn as a glyph of its own in `font`."""
    blank = driver.execute_script(PIXELS, " ", font)
    missing = driver.execute_script(PIXELS, "\u0378", font)  # an unassigned code point
    drawn = {c: driver.execute_script(PIXELS, c, font) for c in chars}
    for c, px in drawn.items():
        others = [o for o, p in drawn.items() if o != c and p == px]
        check(px != blank and px != missing and not others,
              f"{c!r} (U+{ord(c):04X}) is drawn as a glyph in {font!r}, not a box"
              + (f" (the same pixels as {others})" if others else ""))


def main(page, trace_path, shot):
    with open(trace_path, encoding="utf-8") as f:
        doc = json.load(f)
    texts, tokens = doc["input"]["texts"], doc["input"]["tokens"]
    labels = [label(t) for t in texts]
    n = len(labels)
    cjk = sorted({c for t in texts for c in t if "\u4e00" <= c <= "\u9fff"})
    check(len(cjk) >= 2 and any("<0x" in t for t in texts) and "·café" in labels,
          f"the sentence has CJK characters {cjk}, byte markers and ·café: {labels}")
    # A byte's spelling can be one Latin-1 character (`é` for E9, `·` for B7) that the texts
    # hold too: only longer spellings are looked for.
    spelled = [t for t, x in zip(tokens, texts) if t != x and len(t) > 1 and not t.isascii()]

    profile = tempfile.mkdtemp(prefix="attn-trace-chromium-")
    opts = Options()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1200,900", "--lang=en-US",
                 f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                              options=opts)
    try:
        driver.get("file://" + os.path.abspath(page))
        charset = driver.execute_script("return document.characterSet")
        check(charset == "UTF-8", f"the page is read as {charset}")

        text_of = "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent)"
        maps = len(driver.find_elements(By.CSS_SELECTOR, "#maps div.map"))
        keys = driver.execute_script(text_of, "#maps .klabel")
        queries = driver.execute_script(text_of, "#maps .qlabel")
        check(maps > 0 and keys == labels * maps, f"{maps} maps' key labels are the texts: {keys[:n]}")
        check(queries == [f"{i} {x}" for i, x in enumerate(labels)] * maps,
              f"the query labels are position and text: {queries[:n]}")
        # Vertical key labels are turned as a whole: a CJK character set upright in the
        # vertical line would stand on its head once the label is rotated to read upwards.
        turned = driver.execute_script(
            "return [...document.querySelectorAll('#maps .klabel')].map(e => getComputedStyle(e).textOrientation)")
        check(set(turned) == {"sideways"}, f"the key labels' glyphs lie sideways, as Latin letters do: {set(turned)}")
        cells = driver.execute_script(text_of, "h3#tokens + table tbody td")
        check(cells == labels, f"the tokens step's table shows the labels: {cells}")

        # One head, so that the screenshot shows one map whole with its labels.
        Select(driver.find_element(By.ID, "head")).select_by_value("0")
        q, k = next(i for i, x in enumerate(labels) if x in cjk[1:]), labels.index(cjk[0])
        q, k = max(q, k), min(q, k)  # a causal model's upper triangle is masked, not hidden
        cell = driver.find_element(By.CSS_SELECTOR, f'#maps .cell[data-q="{q}"][data-k="{k}"]')
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
        ActionChains(driver).move_to_element(cell).perform()
        tip = driver.find_element(By.ID, "tip").text
        check(f"{q} {labels[q]} → {k} {labels[k]}" in tip, f"hovering [{q}][{k}] shows {tip!r}")
        focus = driver.find_element(By.ID, "focus").text
        check(all(x in focus for x in labels if x.strip("·")), "the focus walkthrough shows the labels")

        body = driver.execute_script("return document.body.innerText")
        bad = [m for m in MOJIBAKE if m in body] + [s for s in spelled if s in body]
        check(not bad, f"the page's text has no spelled tokens or mojibake: {bad}")
        check("·café" in body and all(c in body for c in cjk), "the page's text has ·café and " + "".join(cjk))

        font = driver.execute_script(
            "const s = getComputedStyle(document.querySelector('#maps .qlabel'));"
            "return '32px ' + s.fontFamily")
        glyphs(driver, font, cjk + ["é"])

        driver.save_screenshot(shot)
        check(os.path.getsize(shot) > 10_000, f"screenshot saved to {shot}")
        logs = driver.get_log("browser")
        bad = [e for e in logs if e["level"] in ("SEVERE", "WARNING")]
        check(not bad, f"no console errors or warnings: {bad}")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("glyphs: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
