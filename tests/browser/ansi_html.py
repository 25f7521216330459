"""Turns attn-trace's coloured terminal output (stdin) into an HTML page (stdout) that looks
like a dark terminal, so that Chromium can screenshot it. Understands the SGR codes the
heatmap writes: 0 (reset), 30/97 (black/white text), 48;2;R;G;B and 48;5;N backgrounds."""

import html
import re
import sys

CUBE = [0, 95, 135, 175, 215, 255]


def colour256(n):
    n -= 16
    return "rgb({},{},{})".format(CUBE[n // 36], CUBE[n // 6 % 6], CUBE[n % 6])


def convert(text):
    out, fg, bg = [], None, None
    for part in re.split(r"(\x1b\[[0-9;]*m)", text):
        m = re.fullmatch(r"\x1b\[([0-9;]*)m", part)
        if not m:
            if part:
                style = (f"color:{fg};" if fg else "") + (f"background:{bg};" if bg else "")
                esc = html.escape(part)
                out.append(f'<span style="{style}">{esc}</span>' if style else esc)
            continue
        codes = [int(c) for c in m.group(1).split(";") if c] or [0]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                fg = bg = None
            elif c == 30:
                fg = "#000"
            elif c == 97:
                fg = "#fff"
            elif c == 48 and codes[i + 1] == 2:
                bg = "rgb({},{},{})".format(*codes[i + 2:i + 5])
                i += 4
            elif c == 48 and codes[i + 1] == 5:
                bg = colour256(codes[i + 2])
                i += 2
            i += 1
    return "".join(out)


body = convert(sys.stdin.read())
print("<!DOCTYPE html><html><head><meta charset='utf-8'><style>"
      "body{margin:0;background:#1e1e1e;color:#ddd}"
      "pre{margin:0;padding:12px 16px;font:15px/1.25 'DejaVu Sans Mono',monospace}"
      "</style></head><body><pre>" + body + "</pre></body></html>")
