#!/usr/bin/env python3
"""Two builds of attn-trace on the same command, interleaved (A, B, A, B, …) so that a load
that changes during the runs weighs on both alike; prints each one's median and best wall
time and whether their standard outputs were the same bytes.

    python3 tests/bench/ab.py RUNS BIN_A BIN_B ARGS...

e.g. a build of an older commit against this one:
    python3 tests/bench/ab.py 8 /tmp/attn-trace-old target/release/attn-trace "hi" \\
        --model .cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf --steps output --format json
"""

import statistics
import subprocess
import sys
import time

runs, bins, args = int(sys.argv[1]), sys.argv[2:4], sys.argv[4:]
times = {b: [] for b in bins}
outs = {}
for i in range(runs + 1):  # the first round warms the page cache and is not counted
    for b in bins:
        start = time.perf_counter()
        r = subprocess.run([b] + args, capture_output=True)
        took = time.perf_counter() - start
        if i:
            times[b].append(took)
        outs[b] = r.stdout
for b in bins:
    print(f"{b}: median {statistics.median(times[b]) * 1000:.0f} ms (best {min(times[b]) * 1000:.0f} ms) over {runs} runs")
print("same stdout:", outs[bins[0]] == outs[bins[1]])
