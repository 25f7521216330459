#!/usr/bin/env bash
# Regenerates the screenshots of README.md and docs/VIEWS.md in fixtures/screenshots/ with
# headless Chromium (see tests/browser/run.sh for installing it): the coloured heatmap (its
# ANSI output drawn as an HTML terminal by ansi_html.py), the --html page with the focus
# walkthrough, and the --svg map. Not part of CI: the pictures are reviewed by eye when they
# change.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --locked -q
bin=target/debug/attn-trace
out=fixtures/screenshots
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shot() { # URL WIDTH HEIGHT PNG
  chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
    --no-first-run --disable-sync --hide-scrollbars --user-data-dir="$tmp/profile" \
    --window-size="$2,$3" --screenshot="$4" "$1" 2>/dev/null
}
s="my shoes are small, my feet are big."

COLORTERM=truecolor $bin "$s" --heads 2 --head 1 --format heatmap --color always \
  | python3 tests/browser/ansi_html.py >"$tmp/heatmap.html"
shot "file://$tmp/heatmap.html" 700 330 "$out/heatmap.png"

$bin "$s" --model .cache/models/all-MiniLM-L6-v2 --layer 2 --focus shoes --steps weights \
  --html "$tmp/page.html" >/dev/null
shot "file://$tmp/page.html" 1000 680 "$out/html.png"

$bin "$s" --heads 2 --svg "$tmp/map.svg" >/dev/null
shot "file://$tmp/map.svg" 710 470 "$out/svg.png"
ls -l "$out"
