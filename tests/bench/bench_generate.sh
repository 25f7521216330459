#!/usr/bin/env bash
# Whole-process benchmark of a traced generation (BENCHMARKS.md, "Generation (issue 31)"), all
# in one session on one machine:
#   1. SmolLM2-135M-Instruct (Q4_1 GGUF), a 32-token prompt and 64 new tokens, every layer's
#      attention weights of every step as JSON to a file: attn-trace --generate against
#      transformers' generate(output_attentions=True) writing the same numbers
#      (bench_generate.py trace);
#   2. the cost of tracing: the same generation recording only what the summary needs (the
#      weights, for "looked at most") against recording and writing every step;
#   3. against the engine people run: prompt and decode tokens per second of attn-trace (its
#      --timings, `--generate 1` for the prompt, the difference to `--generate 65` for 64
#      decode steps) and of llama.cpp with 2 threads on the same file (bench_generate.py llama).
#
#   PYTHON=/path/to/venv/bin/python LLAMA_PYTHON=/path/to/llama-venv/bin/python \
#       BIN=target/release/attn-trace bash tests/bench/bench_generate.sh
#
# Needs hyperfine, GNU time and jq, a release build, tests/fetch-smollm2.sh, PYTHON with
# fixtures/oracle/requirements-gguf.txt and LLAMA_PYTHON with llama-cpp-python (0.3.x; pip
# builds llama.cpp, minutes on 2 cores). RUNS (default 3) and PY_RUNS (default 2) set
# hyperfine's runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-.cache/oracle-venv/bin/python}"
LLAMA_PYTHON="${LLAMA_PYTHON:-$PYTHON}"
BIN="${BIN:-target/release/attn-trace}"
M="${M:-.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}"
OUT="${OUT:-$(mktemp -d)}"; mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
[ -x "$BIN" ] || { echo "build first: cargo build --release (or set BIN)" >&2; exit 2; }
[ -f "$M" ] || { echo "needs $M: bash tests/fetch-smollm2.sh" >&2; exit 2; }
. tests/bench/bench_lib.sh

# A prompt of exactly 32 tokens, word by word from bench_gguf.py's paragraph, counted by
# attn-trace and checked against transformers' count.
count() { "$BIN" "$1" --model "$M" --steps tokens --format json --top-k 0 2> /dev/null | jq '.input.tokens | length'; }
words=$("$PYTHON" -c 'import sys; sys.path.insert(0, "tests/bench"); import bench_gguf; print(bench_gguf.PARAGRAPH)')
S32=""
for w in $words; do
    c=$(count "${S32:+$S32 }$w"); [ "$c" -gt 32 ] && break
    S32="${S32:+$S32 }$w"; [ "$c" -eq 32 ] && break
done
while [ "$(count "$S32")" -lt 32 ]; do S32="$S32 the"; done
py=$("$PYTHON" tests/bench/bench_gguf.py count --sentence "$S32")
[ "$(count "$S32")" = 32 ] && [ "$py" = 32 ] || { echo "the prompt is $py tokens in transformers" >&2; exit 1; }
export BIN PYTHON OUT M S32

machine_line
echo "commit: $(commit_of_bin)"
echo "binary: $BIN; $(hyperfine --version); $("$PYTHON" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "torch threads", torch.get_num_threads())'); llama-cpp-python $("$LLAMA_PYTHON" -c 'import llama_cpp; print(llama_cpp.__version__)')"
echo "model: $M ($(stat -c %s "$M") bytes); prompt (32 tokens in both tokenizers): \"$S32\""
echo "load before the runs: $(cut -d' ' -f1-3 /proc/loadavg); other busy processes: $(busy)"
echo
echo "| case | attn-trace median (min–max) | attn-trace peak | other median (min–max) | other peak | ratio |"
echo "|---|---|---|---|---|---|"
row "32-token prompt + 64 new tokens, every layer's weights of every step as JSON: attn-trace against transformers' generate(output_attentions=True) + json.dump" "${RUNS:-3}" \
    "\$BIN \"\$S32\" --model \$M --generate 64 --ignore-eos --steps weights --format json > \$OUT/gen.json" \
    "\$PYTHON tests/bench/bench_generate.py trace --sentence \"\$S32\" --new 64 --out \$OUT/gen.py.json" "${PY_RUNS:-2}"
row "the cost of tracing: recording every step of every pass (JSON, all steps) against the same generation's summary table (its weights only; the other column)" "${RUNS:-3}" \
    "\$BIN \"\$S32\" --model \$M --generate 64 --ignore-eos --format json > \$OUT/gen.all.json" \
    "\$BIN \"\$S32\" --model \$M --generate 64 --ignore-eos > \$OUT/gen.txt" "${RUNS:-3}"
echo
# Both sides generated the same tokens?
"$PYTHON" - "$OUT/gen.json" "$OUT/gen.py.json" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ours = [t["id"] for t in a["generation"]["tokens"]]
print(f"same 64 tokens on both sides: {ours == b['generated']}; same 64 weights rows (max |diff| over every layer, head and step): ", end="")
worst = 0.0
for t, step in enumerate(a["generation"]["steps"], start=1):
    for s in step["steps"]:
        l = s["layer"]
        for h, row in enumerate(s["values"]):
            theirs = b["attentions"][t][l][h][0]
            worst = max(worst, max(abs(x - y) for x, y in zip(row[0], theirs)))
print(f"{worst:.1e}")
PY
echo
gen_ms() { # median over RUNS of attn-trace's --timings "generation" lap for --generate $1
    for _ in $(seq "${RUNS:-3}"); do
        "$BIN" "$S32" --model "$M" --generate "$1" --ignore-eos --steps tokens --top-k 1 --timings 2>&1 > /dev/null \
            | grep -o 'generation [0-9.]* ms' | grep -o '[0-9.]*'
    done | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'
}
p=$(gen_ms 1); g=$(gen_ms 65)
echo "attn-trace (f32 on dequantized weights, recording the weights): prompt $(awk -v p="$p" 'BEGIN {printf "%.0f", 32 / (p / 1000)}') tokens/s (${p} ms for 32), decode $(awk -v p="$p" -v g="$g" 'BEGIN {printf "%.1f", 64 / ((g - p) / 1000)}') tokens/s ($(awk -v p="$p" -v g="$g" 'BEGIN {printf "%.0f", g - p}') ms for 64)"
for _ in $(seq "${RUNS:-3}"); do "$LLAMA_PYTHON" tests/bench/bench_generate.py llama --sentence "$S32" --new 64 --threads 2; done > "$OUT/llama.jsonl"
"$PYTHON" - "$OUT/llama.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
pt = statistics.median(r["prompt_tps"] for r in rows)
dt = statistics.median(r["decode_tps"] for r in rows)
print(f"llama.cpp (llama-cpp-python {rows[0]['llama_cpp_python']}, {rows[0]['threads']} threads, Q4_1 kernels): "
      f"prompt {pt:.0f} tokens/s ({rows[0]['prompt_tokens']} tokens), decode {dt:.1f} tokens/s ({rows[0]['decode_tokens']} tokens), median of {len(rows)}")
PY
echo
echo "commands (hyperfine runs them with sh -c; \$BIN, \$PYTHON, \$M, \$S32 and \$OUT as above):"
printf '%s\n' "${COMMANDS[@]}"
echo "output sizes:"
ls -l "$OUT" | awk 'NR > 1 {printf "    %s %.1f MB\n", $NF, $5 / 1e6}'
