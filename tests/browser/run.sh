#!/usr/bin/env bash
# The --html page in a real browser (docs/VIEWS.md). Installs Debian's chromium and
# chromium-driver if they are missing (apt-get; run as root, as CI does), builds a venv with
# the pinned selenium under .cache/, writes a page and its JSON trace with the debug binary,
# then tests/browser/check_html.py checks the page, a batch's page of two sentences and an
# encoder–decoder's three attentions;
# tests/browser/check_serve.py drives `attn-trace serve`'s page;
# tests/browser/check_generation.py a --generate page's generation view, and a batch's;
# tests/browser/check_glyphs.py checks that a SmolLM2 page's tokens read as text (`·café`, 中文)
# and that the CJK glyphs are drawn (Debian's fonts-droid-fallback is installed for them). The
# pages, the JSON and screenshots are left in .cache/artifacts/ (CI uploads them; ARTIFACTS=DIR
# puts them elsewhere).
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  echo "browser: installing chromium and chromium-driver (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
# A font with CJK glyphs (1.8 MB; without one Chromium draws 中 as an empty box).
if [[ -z $(fc-list :lang=zh 2>/dev/null) ]]; then
  echo "browser: installing fonts-droid-fallback (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-droid-fallback >/dev/null
fi

venv=.cache/browser-venv
if ! cmp -s tests/browser/requirements.txt "$venv/requirements.txt" 2>/dev/null; then
  echo "browser: building $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r tests/browser/requirements.txt
  cp tests/browser/requirements.txt "$venv/requirements.txt"
fi

cargo build --locked -q
art=${ARTIFACTS:-.cache/artifacts}
mkdir -p "$art"
# Two layers of two heads, so that both menus have something to switch; --focus adds the
# walkthrough. The JSON is the same run's numbers, which the page must show.
target/debug/attn-trace "my shoes are small, my feet are big." --heads 2 --layers 2 --focus shoes \
  --html "$art/trace.html" --format json >"$art/trace.json"
EXPECT_FOCUS=1 "$venv/bin/python" tests/browser/check_html.py "$art/trace.html" "$art/trace.json" "$art/html.png"
# A batch of two sentences (the second with markup, which must stay text): one page, a section
# each, and every check above made in both, the second's clicks leaving the first alone.
printf '%s\n' "my shoes are small, my feet are big." "the <b>cat</b> sat on the mat today" >"$art/batch.txt"
target/debug/attn-trace --batch "$art/batch.txt" --heads 2 --layers 2 --focus 1 \
  --html "$art/batch.html" --format json >"$art/batch.json"
EXPECT_FOCUS=1 "$venv/bin/python" tests/browser/check_html.py "$art/batch.html" "$art/batch.json" "$art/batch.png"
# The same batch padded on the left: the pads drawn as pads, every check above still made.
target/debug/attn-trace --batch "$art/batch.txt" --heads 2 --layers 2 --pad-to 10 --padding left \
  --html "$art/padded.html" --format json >"$art/padded.json"
"$venv/bin/python" tests/browser/check_html.py "$art/padded.html" "$art/padded.json" "$art/padded.png"
# An encoder-decoder (issue 32): the encoder's self-attention, the decoder's and the
# cross-attention (decoder tokens x source tokens), three sections of one page, each checked
# against the same run's JSON.
target/debug/attn-trace "my shoes are small, my feet are big." --model fixtures/seq2seq/t5 \
  --target "the shoes are small." --html "$art/seq2seq.html" --format json >"$art/seq2seq.json"
"$venv/bin/python" tests/browser/check_html.py "$art/seq2seq.html" "$art/seq2seq.json" "$art/seq2seq.png"
# A generation (issue 31): the prompt and the generated tokens as a line, each generated one's
# step colouring the tokens before it, per layer and head, as the same run's JSON says; the
# prompt's markup stays text. Then a batch of two prompts, a section each.
hostile='France: </script><img src=x onerror="document.title='\''pwned'\''"> it'\''s'
target/debug/attn-trace "$hostile" --model fixtures/decoders/llama-gqa --generate 6 \
  --html "$art/generation.html" --format json >"$art/generation.json"
"$venv/bin/python" tests/browser/check_generation.py "$art/generation.html" "$art/generation.json" "$art/generation.png"
printf '%s\n' "The capital of France is" "the <b>cat</b> \"sat\" on it's mat" >"$art/generation-batch.txt"
target/debug/attn-trace --batch "$art/generation-batch.txt" --model fixtures/decoders/llama-gqa --generate 5 \
  --html "$art/generation-batch.html" --format json >"$art/generation-batch.json"
"$venv/bin/python" tests/browser/check_generation.py "$art/generation-batch.html" "$art/generation-batch.json" \
  "$art/generation-batch.png"
# `attn-trace serve`'s page (issue 35): type a prompt, the grid redraws; click a head, it is
# ablated and the predictions are the command line's with that --ablate; click a cell of the
# large map, that edge is knocked out (--knockout) likewise; a corrupted prompt draws the
# patching grid (--patch), or the command's error; SIGTERM stops it.
"$venv/bin/python" tests/browser/check_serve.py target/debug/attn-trace fixtures/decoders/llama-gqa "$art/serve.png"
# A real vocabulary's tokens as text (issue 28): SmolLM2 spells café ĠcafÃ© and 中 ä¸Ń, and
# has no token for 巴黎 (six bytes, drawn <0xE5> …). One layer is enough; --steps adds the
# tokens table, --focus the walkthrough, each of which shows the labels too.
bash tests/fetch-smollm2.sh
target/debug/attn-trace "un café 中文 巴黎" --model .cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
  --layer 0 --steps tokens,weights --focus café --quiet --html "$art/glyphs.html" --format json >"$art/glyphs.json"
"$venv/bin/python" tests/browser/check_glyphs.py "$art/glyphs.html" "$art/glyphs.json" "$art/glyphs.png"
# The example notebook's output, as Jupyter shows it (tests/python.sh ran the notebook and
# left it here): its two pages, each in its own frame, must not clash.
if [[ -f $art/notebook-output.html ]]; then
  "$venv/bin/python" tests/browser/check_notebook.py "$art/notebook-output.html" "$art/notebook.png"
else
  echo "browser: no $art/notebook-output.html, so the notebook's output is not checked (run tests/python.sh first)"
fi
