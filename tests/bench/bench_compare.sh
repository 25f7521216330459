#!/usr/bin/env bash
# Whole-process benchmark of `attn-trace compare` (BENCHMARKS.md, "compare (issue 34)"):
# SmolLM2-135M-Instruct's Q4_1 GGUF against its F32 twin (tests/fetch-smollm2-f32.sh), one
# prompt of 128 tokens, every step compared, against tracing the two models one after the
# other: (a) every step the comparison compares written as JSON Lines, (b) the forward passes
# alone (`--steps output`). Runs alternate between the commands (RUNS rounds, default 5);
# the medians and each command's peak resident memory (GNU time) are printed.
#
#   BIN=target/release/attn-trace bash tests/bench/bench_compare.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="${BIN:-target/release/attn-trace}"
RUNS="${RUNS:-5}"
M=.cache/models/smollm2
Q="$M/SmolLM2-135M-Instruct.Q4_1.gguf"
F="$M/SmolLM2-135M-Instruct.F32.gguf"
[ -x "$BIN" ] || { echo "build first: cargo build --release (or set BIN)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
[ -f "$F" ] || bash tests/fetch-smollm2-f32.sh
PROMPT="$(mktemp)"
trap 'rm -f "$PROMPT"' EXIT
# 128 tokens with SmolLM2's tokenizer: the first 111 words of a sentence repeated.
words=()
for _ in $(seq 20); do words+=(The capital of France is Paris, and the capital of Italy is Rome.); done
echo "${words[@]:0:111}" > "$PROMPT"
n=$("$BIN" --file "$PROMPT" --model "$Q" --steps output --format json -q | grep -o '"token_ids": *\[[^]]*\]' | tr -cd ',' | wc -c)
[ $((n + 1)) -eq 128 ] || { echo "the prompt is $((n + 1)) tokens, not 128" >&2; exit 1; }

declare -A CMDS=(
    [compare]="$BIN compare --file $PROMPT --model $Q --model $F --format json -q"
    [jsonl_q]="$BIN --file $PROMPT --model $Q --steps all,logits --format jsonl -q"
    [jsonl_f]="$BIN --file $PROMPT --model $F --steps all,logits --format jsonl -q"
    [forward_q]="$BIN --file $PROMPT --model $Q --steps output --format json -q"
    [forward_f]="$BIN --file $PROMPT --model $F --steps output --format json -q"
)
ORDER=(compare jsonl_q jsonl_f forward_q forward_f)
declare -A T PEAK
for _ in $(seq "$RUNS"); do
    for k in "${ORDER[@]}"; do
        # shellcheck disable=SC2086
        out=$( { /usr/bin/time -f "%e %M" ${CMDS[$k]} > /dev/null; } 2>&1 | tail -1)
        T[$k]+="${out%% *} "
        PEAK[$k]="${out##* }"
    done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for k in "${ORDER[@]}"; do
    printf '%-10s median %6s s  peak %6.1f MiB  runs: %s\n' "$k" "$(echo "${T[$k]}" | median)" \
        "$(echo "${PEAK[$k]} / 1024" | bc -l)" "${T[$k]}"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
