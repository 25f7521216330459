#!/usr/bin/env bash
# `--arithmetic ggml` against the f32 arithmetic and against llama.cpp itself, in one run
# (BENCHMARKS.md, "llama.cpp's arithmetic"; issue 36). SmolLM2-135M Q4_1 at about 512 tokens:
#   - whole attn-trace processes (hyperfine): the forward pass with the predictions as JSON,
#     f32 and ggml; and every layer's weights and outputs as JSON to a file, ggml;
#   - the forward pass alone, from `--timings`, as prompt tokens per second, next to
#     llama.cpp's own prompt processing of the same file on 2 threads (tests/bench/llama_pp.py:
#     one llama_decode of the whole prompt, flash attention off, logits at every position).
# Needs a release build, hyperfine, GNU time, jq, and LLAMA_PYTHON (a python with
# llama-cpp-python 0.3.36; default /work/venvs/llama/bin/python).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/bench_lib.sh
export BIN=${BIN:-target/release/attn-trace}
LLAMA_PYTHON=${LLAMA_PYTHON:-/work/venvs/llama/bin/python}
export M=.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
export OUT; OUT=$(mktemp -d)
TEXT=$(python3 -c "print(' '.join(['The quick brown fox jumps over the lazy dog, and the dog sleeps on.'] * 40))")
export S; S=$(echo "$TEXT" | cut -c1-2300)
n=$($BIN "$S" --model $M --steps token_ids --format json -q | jq '.input.token_ids | length')
echo "$(machine_line)"; echo "commit: $(commit_of_bin)"; echo "tokens: $n (SmolLM2-135M-Instruct Q4_1)"
echo "| case | attn-trace median (min–max) | peak | | | |"
row "f32, predictions as JSON" 5 "\$BIN \"\$S\" --model \$M --steps output --format json -q > \$OUT/f32.json" ""
row "ggml, predictions as JSON" 5 "\$BIN \"\$S\" --model \$M --arithmetic ggml --steps output --format json -q > \$OUT/ggml.json" ""
row "ggml, every layer's weights and outputs as JSON" 3 \
    "\$BIN \"\$S\" --model \$M --arithmetic ggml --steps weights,add_norm2.sum --format json -q > \$OUT/all.json" ""
for a in f32 ggml; do
    for i in 1 2 3; do
        $BIN "$S" --model $M --arithmetic $a --steps output --format json --timings -q 2>&1 >/dev/null |
            sed -n 's/.*forward pass \([0-9.]*\) ms.*/\1/p'
    done | sort -n | head -1 | awk -v a=$a -v n="$n" '{printf "forward pass, %s: best of 3 %.0f ms = %.1f tokens/s\n", a, $1, n / ($1 / 1000)}'
done
ids=$($BIN "$S" --model $M --steps token_ids --format json -q | jq -r '.input.token_ids | map(tostring) | join(",")')
$LLAMA_PYTHON tests/bench/llama_pp.py time --model $M --ids "$ids" --threads 2 --runs 3 --logits all |
    jq -r '"llama.cpp prompt processing (\(.tokens) tokens, \(.threads) threads, logits all, flash attention off): best \(.best * 1000 | floor) ms = \(.tokens / .best * 10 | floor / 10) tokens/s; \(.system_info)"'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${COMMANDS[@]}"
rm -rf "$OUT"
