#!/usr/bin/env bash
# Whole-process benchmark of issue 32's encoder–decoders against Hugging Face transformers
# (BENCHMARKS.md, "Encoder–decoders (issue 32)"): a t5-base-shaped random checkpoint
# (tests/bench/make_t5_base.py, float32, 223 M parameters), 64 source tokens into the encoder,
# 32 target tokens teacher-forced into the decoder (its start token, then the target shifted
# right, as transformers' `_shift_right(labels)`); every layer's attention weights (encoder
# self-attention, decoder self-attention, cross-attention) and hidden states of both stacks
# written as JSON to a file by both sides. The two tools are run alternately (attn-trace,
# transformers, attn-trace, …) after one warm-up each, each run under /usr/bin/time -v, which
# gives its wall time (process start to exit, the JSON written) and its peak resident memory;
# the table has the minimum and the median of each.
#
#   PYTHON=/work/venvs/oracle/bin/python BIN=target/release/attn-trace RUNS=3 \
#       bash tests/bench/bench_seq2seq.sh
#
# Needs: GNU time and jq (apt-get install time jq), a release build, PYTHON pointing at a venv
# with transformers 4.46.3 and torch (fixtures/oracle/requirements-decoder.txt). The first run
# makes the checkpoint into .cache/bench/t5-base (git-ignored, 850 MiB, half a minute). RUNS
# (default 5) runs of each tool. Outputs go to $OUT (default a fresh temporary directory).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-/work/venvs/oracle/bin/python}"
BIN="${BIN:-target/release/attn-trace}"
RUNS="${RUNS:-5}"
OUT="${OUT:-$(mktemp -d)}"
T5=.cache/bench/t5-base
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
[ -x "$BIN" ] || { echo "build first: cargo build --release (or set BIN)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
command -v jq > /dev/null || { echo "needs jq: apt-get install jq" >&2; exit 2; }
[ -f "$T5/model.safetensors" ] || "$PYTHON" tests/bench/make_t5_base.py

# 64 source tokens and 32 target tokens (each with its </s>) under fixtures/seq2seq/t5's
# tokenizer, which the checkpoint carries; the source's last word only pads it to 64.
export SRC="A small cat sat on the warm mat near the door, and my feet are big. The small cat sat on the warm mat near the door, and my feet are big. my"
export TGT="the small cat sat on the warm mat near the door, and my feet are big."

# Both sides must see the same tokens: transformers' counts, then attn-trace's ids against
# transformers' (the encoder's input and the decoder's shifted-right input).
read -r ns nt <<< "$("$PYTHON" tests/bench/bench_seq2seq.py count --model $T5 --source "$SRC" --target "$TGT" 2> /dev/null)"
[ "$ns" = 64 ] && [ "$nt" = 32 ] || { echo "transformers makes $ns source and $nt target tokens; want 64 and 32" >&2; exit 1; }
"$BIN" "$SRC" --model $T5 --target "$TGT" --steps decoder.layers.0.cross_attn.weights --format json --top-k 0 \
    | jq -c '[.input.token_ids, .input.target.token_ids]' > "$OUT/ids.rs.json"

. tests/bench/bench_lib.sh
export BIN PYTHON OUT T5

# One timed run: wall seconds and peak MiB of `bash -c CMD`, from /usr/bin/time -v.
timed() {
    local f; f=$(mktemp)
    /usr/bin/time -v -o "$f" bash -c "$1" > /dev/null 2>&1 || { echo "failed: $1" >&2; cat "$f" >&2; exit 1; }
    awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]}
                /Maximum resident set size/ {m = $2 / 1024} END {printf "%.3f %.0f\n", s, m}' "$f"
    rm -f "$f"
}

# name, attn-trace command, transformers command (or ""): one warm-up of each, then RUNS
# alternating pairs; prints a table row and keeps every run in $OUT/runs.tsv.
ROWS=() COMMANDS=()
pair() {
    local name=$1 rust=$2 py=$3 i r p
    timed "$rust" > /dev/null; [ -n "$py" ] && timed "$py" > /dev/null
    for i in $(seq "$RUNS"); do
        r=$(timed "$rust"); echo -e "$name\tattn-trace\t$i\t$r" >> "$OUT/runs.tsv"
        if [ -n "$py" ]; then p=$(timed "$py"); echo -e "$name\ttransformers\t$i\t$p" >> "$OUT/runs.tsv"; fi
        echo "  $name, run $i: attn-trace $r${py:+, transformers $p} (s MiB); load $(cut -d' ' -f1 /proc/loadavg)" >&2
    done
    ROWS+=("$(python3 - "$OUT/runs.tsv" "$name" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
name = sys.argv[2]
def of(tool):
    return [(float(l[3].split()[0]), float(l[3].split()[1])) for l in rows if l[0] == name and l[1] == tool]
def t(s):
    return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"
def cells(r):
    w, m = [x[0] for x in r], [x[1] for x in r]
    return f"{t(min(w))} / {t(st.median(w))} | {max(m):.0f} MiB", st.median(w), min(w), max(m)
a = cells(of("attn-trace"))
p = of("transformers")
if p:
    b = cells(p)
    print(f"| {name} | {a[0]} | {b[0]} | {b[1] / a[1]:.1f}× (min {b[2] / a[2]:.1f}×), {a[3] / b[3]:.2f} of the memory |")
else:
    print(f"| {name} | {a[0]} | | | |")
PY
)")
    COMMANDS+=("$name:" "    $rust" ${py:+"    $py"})
}

machine_line
echo "cpu: $(lscpu | awk -F': +' '/^Model name/ {print $2}'), $(nproc) cores; RAM $(free -m | awk '/Mem:/ {print $2}') MiB"
echo "commit: $(commit_of_bin)"
echo "binary: $BIN, sha256 $(sha256sum "$BIN" | cut -c1-16), $("$BIN" --version); $("$PYTHON" -c 'import torch, transformers
print("torch", torch.__version__, "transformers", transformers.__version__, "torch threads", torch.get_num_threads())')"
echo "load before the runs: $(cut -d' ' -f1-3 /proc/loadavg); other busy processes: $(busy)"
echo "outputs in $OUT; $RUNS alternating runs of each tool, after one warm-up of each"
: > "$OUT/runs.tsv"
pair "t5-base shape (f32, 223 M), 64 + 32 tokens, weights + hidden states of both stacks, JSON to a file" \
    "\$BIN \"\$SRC\" --model \$T5 --target \"\$TGT\" --steps attn.weights,cross_attn.weights,add_norm2.sum --format json > \$OUT/t5.json" \
    "\$PYTHON tests/bench/bench_seq2seq.py trace --model \$T5 --source \"\$SRC\" --target \"\$TGT\" --out \$OUT/t5.py.json"
pair "… attn-trace, --steps output --format json --top-k 0 (load and both stacks' forward passes, one small tensor written)" \
    "\$BIN \"\$SRC\" --model \$T5 --target \"\$TGT\" --steps output --format json --top-k 0 > \$OUT/t5.output0.json" ""
echo "load after the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
py_ids=$(jq -c '[.input_ids, .decoder_input_ids]' "$OUT/t5.py.json")
[ "$py_ids" = "$(cat "$OUT/ids.rs.json")" ] && echo "token ids: the same on both sides (64 source, 32 decoder)" \
    || { echo "token ids differ: attn-trace $(cat "$OUT/ids.rs.json"), transformers $py_ids" >&2; exit 1; }
echo
echo "| case | attn-trace min / median wall | attn-trace peak RSS | transformers min / median wall | transformers peak RSS | median ratio |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "commands (run with bash -c under /usr/bin/time -v; \$BIN, \$PYTHON, \$OUT as above, \$SRC and \$TGT the"
echo "64- and 32-token texts, \$T5=$T5):"
printf '%s\n' "${COMMANDS[@]}"
echo
echo "output sizes:"
ls -l "$OUT" | awk 'NR > 1 && $NF ~ /json$/ {printf "    %s %.1f MB\n", $NF, $5 / 1e6}'
echo "stages (one run each, --timings):"
"$PYTHON" tests/bench/bench_seq2seq.py trace --model $T5 --source "$SRC" --target "$TGT" --out "$OUT/stages.json" --timings 2>&1 | sed 's/^/    transformers: /'
"$BIN" "$SRC" --model $T5 --target "$TGT" --steps attn.weights,cross_attn.weights,add_norm2.sum --format json --timings 2>&1 > "$OUT/stages.json" | sed 's/^/    attn-trace: /'
rm -f "$OUT/stages.json"
