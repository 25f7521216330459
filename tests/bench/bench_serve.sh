#!/usr/bin/env bash
# `attn-trace serve` against the command line (issue 35, BENCHMARKS.md): the warm time of a
# request to POST /api/trace (p50 and p95 over N sequential requests, each on its own
# connection, from the request's first byte to the answer's last) against the whole process
# `attn-trace PROMPT --model M --format json` for the same trace (interleaved with the
# requests), and requests per second at saturation (C clients at once). The answer's bytes
# are checked to be the command's. Needs: python3, a build (BIN, default
# target/release/attn-trace) and the model (MODEL, default SmolLM2 Q4_1 from
# tests/fetch-model.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="${BIN:-target/release/attn-trace}"
MODEL="${MODEL:-.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}"
N="${N:-100}"
C="${C:-4}"
# 32 tokens with SmolLM2's tokenizer.
PROMPT="${PROMPT:-The quick brown fox jumps over the lazy dog while the farmer watches from the old wooden fence near the river, thinking about the harvest that will come in the autumn}"
[ -x "$BIN" ] || { echo "build first: cargo build --release (or set BIN)" >&2; exit 2; }

echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(free -g | awk '/Mem:/ {print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg); $BIN"
echo "model: $MODEL; tokens: $("$BIN" "$PROMPT" --model "$MODEL" --format json 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["input"]["tokens"]))')"

log=$(mktemp)
"$BIN" serve --port 0 --model "$MODEL" 2> "$log" &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 600); do grep -q listening "$log" && break; sleep 0.1; done
port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$')

# ENDPOINT=view measures what the server's page asks after each change (POST /api/view: the
# --html page and the predictions, from one trace) against `--html FILE`; the default,
# ENDPOINT=trace, the JSON document of every step against `--format json`.
ENDPOINT="${ENDPOINT:-trace}"
expected=$(mktemp)
if [ "$ENDPOINT" = view ]; then
    "$BIN" "$PROMPT" --model "$MODEL" --html "$expected" --quiet > /dev/null
else
    "$BIN" "$PROMPT" --model "$MODEL" --format json > "$expected" 2>/dev/null
fi

# The command line's runs are interleaved with the requests (one after every N / RUNS of
# them), so that a load that changes during the run weighs on both sides alike; each is the
# whole process's wall time, as `hyperfine -N` measures it.
python3 - "$port" "$PROMPT" "$N" "$C" "$BIN" "$MODEL" "$expected" "$ENDPOINT" "${RUNS:-10}" <<'PY'
import json, os, statistics, subprocess, sys, tempfile, threading, time
port, prompt, n, c = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
binary, model, endpoint, runs = sys.argv[5], sys.argv[6], sys.argv[8], int(sys.argv[9])
want = open(sys.argv[7], "rb").read()
body = json.dumps({"args": [prompt]})
out = tempfile.NamedTemporaryFile(suffix=".html", delete=False).name
if endpoint == "view":
    command = [binary, prompt, "--model", model, "--html", out, "--quiet"]
else:
    command = [binary, prompt, "--model", model, "--format", "json"]

sys.path.insert(0, "tests/bench")
from ab_serve import request  # one POST on its own connection; exits on a status other than 200

def one():
    t = time.perf_counter()
    _, got = request(port, endpoint, body)
    if endpoint == "view":
        got = json.loads(got)["page"].encode()
    assert got == want, got[:200]
    return time.perf_counter() - t

def cli():
    t = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t

for _ in range(3):
    one()  # warm
cli()
times, clis = [], []
every = max(1, n // runs)
for i in range(n):
    times.append(one())
    if i % every == every - 1 and len(clis) < runs:
        clis.append(cli())
os.unlink(out)
times.sort()
p50, p95 = times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.95))]
done, lock = [0], threading.Lock()
def client(k):
    for _ in range(k):
        one()
        with lock:
            done[0] += 1
t = time.perf_counter()
threads = [threading.Thread(target=client, args=(max(1, n // c),)) for _ in range(c)]
[th.start() for th in threads]
[th.join() for th in threads]
rps = done[0] / (time.perf_counter() - t)
cm = statistics.median(clis)
what = "--html FILE" if endpoint == "view" else "--format json"
print()
print(f"| case | serve p50 | serve p95 | command line `{what}` (median of {len(clis)}, whole process, interleaved) | ratio (p50) | saturation |")
print("|---|---|---|---|---|---|")
print(f"| {n} requests to /api/{endpoint} | {p50*1000:.1f} ms | {p95*1000:.1f} ms | {cm*1000:.1f} ms | {cm/p50:.1f}× faster | {rps:.1f} requests/s ({c} clients) |")
PY
rm -f "$expected"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
