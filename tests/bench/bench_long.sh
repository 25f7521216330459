#!/usr/bin/env bash
# Long contexts (BENCHMARKS.md, "Long contexts (issue 36, item 4)"): SmolLM2's per-head
# statistics over N tokens, attn-trace (`--stats` with the summary table: the attention in
# tiles of queries) against transformers computing the same statistics from eager attention's
# weights (tests/bench/bench_long.py: `all` holds every layer's, `hooked` one layer's at a
# time), in one run, with the machine printed beside the figures. Peak memory is each
# process's peak resident set (attn-trace's `--timings`, Python's ru_maxrss).
#
#   BIN=target/release/attn-trace TOKENS="1024 2048 4096 8192" HF_ALL_MAX=2048 HF_HOOKED_MAX=4096 \
#       bash tests/bench/bench_long.sh
#
# transformers runs only up to HF_ALL_MAX / HF_HOOKED_MAX tokens: past them its weights alone
# (30 layers × 9 heads × N² × 4 bytes for `all`; one layer's, several copies, for `hooked`) do
# not fit this 24 GiB machine. Needs .cache/models/smollm2 (tests/run.sh fetches it) and a
# Python with torch, transformers and gguf (PYTHON=…; the oracle venv has them).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/attn-trace}
PYTHON=${PYTHON:-/work/venvs/oracle/bin/python}
TOKENS=${TOKENS:-"1024 2048 4096 8192"}
HF_ALL_MAX=${HF_ALL_MAX:-2048}
HF_HOOKED_MAX=${HF_HOOKED_MAX:-4096}
Q41=.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
F32=.cache/models/smollm2/SmolLM2-135M-Instruct.F32.gguf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "attn-trace $(git rev-parse --short HEAD) ($BIN); transformers $("$PYTHON" -c 'import transformers; print(transformers.__version__)'), torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
echo
echo "| tokens | tool | what | time | peak memory |"
echo "|---|---|---|---|---|"
for n in $TOKENS; do
    # N words of a fixed sequence: each word is one SmolLM2 token.
    "$PYTHON" -c "
import random, sys
random.seed(1)
words = 'the cat sat on a mat while birds sang over quiet hills and rivers ran to seas'.split()
print(' '.join(random.choice(words) for _ in range($n)))" > "$work/text.txt"
    for model in "$Q41" "$F32"; do
        start=$(date +%s.%N)
        "$BIN" --file "$work/text.txt" --model "$model" --stats --timings --quiet > "$work/out.txt" 2> "$work/err.txt"
        end=$(date +%s.%N)
        peak=$(grep -o 'peak resident memory [0-9.]* [KMG]iB' "$work/err.txt" | sed 's/peak resident memory //')
        tokens=$(grep -o '^attn-trace: [0-9]* tokens' "$work/out.txt" | grep -o '[0-9]*')
        printf '| %s | attn-trace | --stats + summary table, %s | %.1f s | %s |\n' "$tokens" "$(basename "$model" .gguf | sed 's/.*\.//')" "$(echo "$end - $start" | bc)" "$peak"
    done
    for mode in hooked all; do
        max=$HF_HOOKED_MAX; [ "$mode" = all ] && max=$HF_ALL_MAX
        if [ "$n" -le "$max" ]; then
            line=$("$PYTHON" tests/bench/bench_long.py --gguf "$F32" --text "$work/text.txt" --mode "$mode" 2>/dev/null | tail -1)
            echo "$line" | "$PYTHON" -c "import json,sys; r=json.loads(sys.stdin.read()); print(f\"| {r['tokens']} | transformers | {r['mode']} (eager, output_attentions) | {r['seconds']:.1f} s (model call + statistics) | {r['peak_mib']/1024:.2f} GiB |\")"
        fi
    done
done
