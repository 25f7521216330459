#!/usr/bin/env bash
# `attn-trace serve` against the command line (issue 35, BENCHMARKS.md): the warm time of a
# request to POST /api/trace (p50 and p95 over N sequential requests, each on its own
# connection, from the request's first byte to the answer's last) against the whole process
# `attn-trace PROMPT --model M --format json` for the same trace (hyperfine), and requests per
# second at saturation (C clients at once). The answer's bytes are checked to be the command's.
# Needs: python3, hyperfine, a build (BIN, default target/release/attn-trace) and the model
# (MODEL, default SmolLM2 Q4_1 from tests/fetch-model.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="${BIN:-target/release/attn-trace}"
MODEL="${MODEL:-.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}"
N="${N:-100}"
C="${C:-4}"
# 32 tokens with SmolLM2's tokenizer.
PROMPT="${PROMPT:-The quick brown fox jumps over the lazy dog while the farmer watches from the old wooden fence near the river, thinking about the harvest that will come in the autumn}"
[ -x "$BIN" ] || { echo "build first: cargo build --release (or set BIN)" >&2; exit 2; }

echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(free -g | awk '/Mem:/ {print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg); $BIN; $(hyperfine --version)"
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
cli_json=$(mktemp)
expected=$(mktemp)
if [ "$ENDPOINT" = view ]; then
    command="$BIN '$PROMPT' --model $MODEL --html $expected --quiet"
else
    command="$BIN '$PROMPT' --model $MODEL --format json"
fi
hyperfine -N --warmup 1 --runs "${RUNS:-10}" --export-json "$cli_json" "$command" > /dev/null 2>&1 ||
    hyperfine --warmup 1 --runs "${RUNS:-10}" --export-json "$cli_json" "$command" > /dev/null
[ "$ENDPOINT" = view ] || "$BIN" "$PROMPT" --model "$MODEL" --format json > "$expected" 2>/dev/null

python3 - "$port" "$PROMPT" "$N" "$C" "$cli_json" "$expected" "$ENDPOINT" <<'PY'
import http.client, json, statistics, sys, threading, time
port, prompt, n, c = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
endpoint = sys.argv[7]
cli = json.load(open(sys.argv[5]))["results"][0]
want = open(sys.argv[6], "rb").read()
body = json.dumps({"args": [prompt]})

def one():
    t = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("POST", "/api/" + endpoint, body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    got = r.read()
    conn.close()
    if endpoint == "view":
        got = json.loads(got)["page"].encode()
    assert r.status == 200 and got == want, (r.status, got[:200])
    return time.perf_counter() - t

for _ in range(3):
    one()  # warm
times = sorted(one() for _ in range(n))
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
cm = cli["median"]
print()
print("| case | serve p50 | serve p95 | command line (median, whole process) | ratio (p50) | saturation |")
print("|---|---|---|---|---|---|")
print(f"| {n} requests to /api/{endpoint} | {p50*1000:.1f} ms | {p95*1000:.1f} ms | {cm*1000:.1f} ms | {cm/p50:.1f}× faster | {rps:.1f} requests/s ({c} clients) |")
PY
rm -f "$cli_json" "$expected"
