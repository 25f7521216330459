#!/usr/bin/env bash
# Whole-process benchmark of the families of issue 30 against Hugging Face transformers
# (BENCHMARKS.md, "New families (issue 30)"): Gemma 3 270M from its Q4_K_M GGUF, and a ~1 B
# Mixtral-shaped random checkpoint in bf16 (tests/bench/make_moe_1b.py). One input of 128
# tokens each; every layer's attention weights and hidden states written as JSON to a file by
# both sides. The two tools are run alternately (attn-trace, transformers, attn-trace, …), each
# run under /usr/bin/time -v, which gives its wall time (process start to exit, the JSON
# written) and its peak resident memory; the table has the minimum and the median of each.
#
#   PYTHON=/work/venvs/fam-new/bin/python BIN=target/release/attn-trace \
#       GGUF_FROM=/work/venvs/oracle/lib/python3.11/site-packages \
#       bash tests/bench/bench_families.sh
#
# Needs: GNU time and jq, a release build, PYTHON pointing at a venv with transformers 4.51.0 and
# torch (fixtures/oracle/requirements-gemma3-gguf.txt), and the `gguf` package: in that venv, or
# in the site-packages folder GGUF_FROM, which is then put on PYTHONPATH through a folder holding
# only gguf (.cache/bench/pylib). LLAMA_PYTHON (a venv with llama-cpp-python,
# requirements-tokenize.txt), when set, checks that llama.cpp makes the same 128 Gemma tokens.
# The first run makes the Mixtral checkpoint into .cache/bench/mixtral-1b (git-ignored, 1.8 GB,
# half a minute). RUNS (default 5) runs of each tool per case; ONLY=gemma3 or ONLY=mixtral runs
# one case. Outputs go to $OUT (default a fresh temporary directory).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-/work/venvs/fam-new/bin/python}"
BIN="${BIN:-target/release/attn-trace}"
RUNS="${RUNS:-5}"
OUT="${OUT:-$(mktemp -d)}"
GEMMA=.cache/models/gemma3/gemma-3-270m-q4_k_m.gguf
MOE=.cache/bench/mixtral-1b
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
[ -x "$BIN" ] || { echo "build first: cargo build --release (or set BIN)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
command -v jq > /dev/null || { echo "needs jq: apt-get install jq" >&2; exit 2; }
if ! "$PYTHON" -c 'import gguf' 2> /dev/null; then
    [ -n "${GGUF_FROM:-}" ] && [ -d "$GGUF_FROM/gguf" ] || { echo "no gguf package: set GGUF_FROM" >&2; exit 2; }
    mkdir -p .cache/bench/pylib && ln -sfn "$GGUF_FROM/gguf" .cache/bench/pylib/gguf
    export PYTHONPATH=$PWD/.cache/bench/pylib
fi
[ -f "$MOE/model.safetensors" ] || "$PYTHON" tests/bench/make_moe_1b.py

# Gemma 3: the first 128 tokens (BOS included) of the Gemma 3 oracle's long text, newlines as
# spaces (llama.cpp's tokenizer, the GGUF's own).
export SG="A language model reads a sentence one token at a time. Each token is first turned into a vector by looking up a row of a large table, and that vector is then passed through a stack of layers. In every layer, the attention step lets each position look back at the positions before it and decide how much of each to take in. The feed-forward step that follows works on every position on its own, mixing the numbers it has gathered and writing the result back into the stream that runs from the first layer to the last. This model is small by today's standards: it has eighteen layers, four query heads that"
# Mixtral: 128 tokens (BOS included) with fixtures/decoders/mixtral/tokenizer.json.
export SM="The capital of France is Paris. my shoes are small, my feet are big. The capital of Italy is Rome, and the capital of Spain is Madrid. The quick brown fox jumps over the lazy dog. The capital of France is Paris. my shoes are small, my feet are big. The capital of Italy is Rome, and the capital of Spain is Madrid. The quick brown fox jumps over the lazy dog. The capital of France is Paris. my shoes are small, my feet are big. the"

# Both sides must see the same 128 tokens.
IDS=$("$BIN" "$SG" --model $GEMMA --steps tokens --format json --top-k 0 | jq -c '[.input.token_ids[]]')
[ "$(jq length <<< "$IDS")" = 128 ] || { echo "gemma3: $(jq length <<< "$IDS") tokens in attn-trace; want 128" >&2; exit 1; }
if [ -n "${LLAMA_PYTHON:-}" ]; then
    LL=$("$LLAMA_PYTHON" -c 'import sys, json; from llama_cpp import Llama
l = Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
print(json.dumps(l.tokenize(sys.argv[2].encode(), add_bos=True, special=False), separators=(",", ":")))' $GEMMA "$SG" 2> /dev/null)
    [ "$LL" = "$IDS" ] || { echo "gemma3: llama.cpp's tokens differ from attn-trace's" >&2; exit 1; }
    echo "gemma3: llama.cpp and attn-trace make the same 128 tokens"
fi
export IDS=$(jq -r 'map(tostring) | join(",")' <<< "$IDS")
py=$("$PYTHON" tests/bench/bench_decoders.py count --model $MOE --sentence "$SM" 2> /dev/null)
rs=$("$BIN" "$SM" --model $MOE --steps tokens --format json --top-k 0 | jq '.input.tokens | length')
[ "$py" = 128 ] && [ "$rs" = 128 ] || { echo "mixtral: $py tokens in transformers, $rs in attn-trace; want 128" >&2; exit 1; }

. tests/bench/bench_lib.sh
export BIN PYTHON OUT GEMMA MOE

# One timed run: wall seconds and peak MiB of `bash -c CMD`, from /usr/bin/time -v.
timed() {
    local f; f=$(mktemp)
    /usr/bin/time -v -o "$f" bash -c "$1" > /dev/null 2>&1 || { echo "failed: $1" >&2; cat "$f" >&2; exit 1; }
    awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]}
                /Maximum resident set size/ {m = $2 / 1024} END {printf "%.3f %.0f\n", s, m}' "$f"
    rm -f "$f"
}

# name, attn-trace command, transformers command: one warm-up of each, then RUNS alternating
# pairs; prints a table row and keeps every run in $OUT/runs.tsv.
ROWS=() COMMANDS=()
pair() {
    local name=$1 rust=$2 py=$3 i r p
    timed "$rust" > /dev/null; [ -n "$py" ] && timed "$py" > /dev/null
    for i in $(seq "$RUNS"); do
        r=$(timed "$rust"); echo -e "$name\tattn-trace\t$i\t$r" >> "$OUT/runs.tsv"
        if [ -n "$py" ]; then p=$(timed "$py"); echo -e "$name\ttransformers\t$i\t$p" >> "$OUT/runs.tsv"; fi
        echo "  $name, run $i: attn-trace $r${py:+, transformers $p} (s MiB)" >&2
    done
    ROWS+=("$(python3 - "$OUT/runs.tsv" "$name" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
name = sys.argv[2]
def of(tool):
    r = [(float(l[3].split()[0]), float(l[3].split()[1])) for l in rows if l[0] == name and l[1] == tool]
    return r
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
echo "binary: $BIN, sha256 $(sha256sum "$BIN" | cut -c1-16), $("$BIN" --version); $("$PYTHON" -c 'import os, torch, transformers, importlib.metadata as m
g = [d for d in m.distributions(path=[os.environ.get("GGUF_FROM", "")] + __import__("sys").path) if d.metadata["Name"] == "gguf"]
print("torch", torch.__version__, "transformers", transformers.__version__, "gguf", g[0].version if g else "?", "torch threads", torch.get_num_threads())')"
echo "load before the runs: $(cut -d' ' -f1-3 /proc/loadavg); other busy processes: $(busy)"
echo "outputs in $OUT; $RUNS alternating runs of each tool per case, after one warm-up of each"
: > "$OUT/runs.tsv"
if [ "${ONLY:-gemma3}" = gemma3 ]; then
    pair "Gemma 3 270M Q4_K_M GGUF, 128 tokens, weights + hidden states, JSON to a file" \
        "\$BIN \"\$SG\" --model \$GEMMA --steps weights,add_norm2.sum --format json > \$OUT/gemma3.json" \
        "\$PYTHON tests/bench/bench_families.py gemma3 --ids \$IDS --out \$OUT/gemma3.py.json"
    pair "… attn-trace, --steps output --format json --top-k 0 (load and forward pass, no LM head, one small tensor written)" \
        "\$BIN \"\$SG\" --model \$GEMMA --steps output --format json --top-k 0 > \$OUT/gemma3.output0.json" ""
fi
if [ "${ONLY:-mixtral}" = mixtral ]; then
    pair "Mixtral shape, 0.94 B (bf16), 128 tokens, weights + hidden states, JSON to a file" \
        "\$BIN \"\$SM\" --model \$MOE --steps weights,add_norm2.sum --format json > \$OUT/mixtral.json" \
        "\$PYTHON tests/bench/bench_decoders.py trace --model \$MOE --sentence \"\$SM\" --out \$OUT/mixtral.py.json"
    pair "… attn-trace, --steps output --format json --top-k 0 (load and forward pass, no LM head, one small tensor written)" \
        "\$BIN \"\$SM\" --model \$MOE --steps output --format json --top-k 0 > \$OUT/mixtral.output0.json" ""
fi
echo "load after the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| case | attn-trace min / median wall | attn-trace peak RSS | transformers min / median wall | transformers peak RSS | median ratio |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "commands (run with bash -c under /usr/bin/time -v; \$BIN, \$PYTHON, \$OUT as above, \$SG and \$SM the two"
echo "128-token inputs, \$IDS the Gemma tokens as attn-trace makes them, \$GEMMA=$GEMMA, \$MOE=$MOE):"
printf '%s\n' "${COMMANDS[@]}"
echo
echo "output sizes:"
ls -l "$OUT" | awk 'NR > 1 && $NF ~ /json$/ {printf "    %s %.1f MB\n", $NF, $5 / 1e6}'
echo "transformers' stages (one run each, --timings):"
[ "${ONLY:-gemma3}" = gemma3 ] && "$PYTHON" tests/bench/bench_families.py gemma3 --ids "$IDS" --out "$OUT/stages.json" --timings 2>&1 | sed 's/^/    gemma3: /'
[ "${ONLY:-mixtral}" = mixtral ] && "$PYTHON" tests/bench/bench_decoders.py trace --model $MOE --sentence "$SM" --out "$OUT/stages.json" --timings 2>&1 | sed 's/^/    mixtral: /'
rm -f "$OUT/stages.json"
