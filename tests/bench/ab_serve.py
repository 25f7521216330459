#!/usr/bin/env python3
"""Two builds' servers side by side: both serve the same model at once, each on its own port,
and the same request goes to one then the other (the order alternating each round), so a load
that changes during the run weighs on both alike; prints each one's p50, p95 and best time and
whether their answers were the same bytes. As `tests/bench/ab.py` does for the command line.

    python3 tests/bench/ab_serve.py BIN_A BIN_B [ROUNDS]

ENDPOINT (default view), MODEL (default SmolLM2 Q4_1 from tests/fetch-smollm2.sh) and ARGS (a
JSON list of options after the prompt) set the request; the prompt is bench_serve.sh's 32
tokens. Each request is on its own connection, timed from its first byte to the answer's last.
"""

import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

MODEL = os.environ.get("MODEL", ".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPT = (
    "The quick brown fox jumps over the lazy dog while the farmer watches from the old wooden "
    "fence near the river, thinking about the harvest that will come in the autumn"
)


def serve(binary):
    """A server on a free port, and that port once it listens."""
    p = subprocess.Popen([binary, "serve", "--port", "0", "--model", MODEL], stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if "listening on http://127.0.0.1:" in line:
            # Drained from here on, so that a full pipe never stalls the server.
            threading.Thread(target=p.stderr.read, daemon=True).start()
            return p, int(line.split("127.0.0.1:")[1].split()[0].strip("/"))
    raise SystemExit(f"{binary}: the server stopped before listening")


def request(port, endpoint, body):
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", "/api/" + endpoint, body, {"Content-Type": "application/json"})
    r = c.getresponse()
    got = r.read()
    c.close()
    if r.status != 200:
        raise SystemExit(f"HTTP {r.status}: {got[:300]!r}")
    return time.perf_counter() - t, got


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    binaries = sys.argv[1:3]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    endpoint = os.environ.get("ENDPOINT", "view")
    body = json.dumps({"args": [PROMPT] + json.loads(os.environ.get("ARGS", "[]"))})
    servers = [serve(b) for b in binaries]
    try:
        answers = []
        for _, port in servers:
            for _ in range(3):  # warm
                _, got = request(port, endpoint, body)
            answers.append(got)
        times = [[], []]
        for r in range(rounds):
            for i in (0, 1) if r % 2 == 0 else (1, 0):
                times[i].append(request(servers[i][1], endpoint, body)[0])
        for b, ts in zip(binaries, times):
            ts = sorted(ts)
            p95 = ts[max(0, int(0.95 * len(ts)) - 1)]
            print(f"{b}: p50 {statistics.median(ts) * 1e3:.1f} ms, p95 {p95 * 1e3:.1f} ms, best {ts[0] * 1e3:.1f} ms over {rounds}")
        print("same answers:", answers[0] == answers[1], "· load", " ".join(open("/proc/loadavg").read().split()[:3]))
    finally:
        for p, _ in servers:
            p.kill()


if __name__ == "__main__":
    main()
