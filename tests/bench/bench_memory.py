#!/usr/bin/env python3
"""The memory estimate against the measured peak (issue 48, class 1; BENCHMARKS.md, "The memory
estimate against the measured peak").

    python3 tests/bench/bench_memory.py [--bin target/release/attn-trace] [--only NAME,...]

For each shape people use, two runs of the release binary:

1. the run itself, under GNU time (`/usr/bin/time -f %M`, the child's peak resident set size,
   which is getrusage's ru_maxrss), stdout to /dev/null;
2. the same command with `--timings`, whose stderr line says the estimate the run was checked
   against (`peak resident memory … (estimated …)`): the largest estimate of the run.

A `serve` row starts `attn-trace serve`, sends one request, and reads the server's peak
(`VmHWM` in /proc/PID/status) after it. The server prints no estimate; it converts the whole
model once when it fits (`limits::whole_model_fits`), as a generation does, so its row's
estimate is the command line's for the same request with `--generate 1` (which makes the same
choice), a proxy said as such in the table.

Prints the machine (CPU model, cores, RAM), then one Markdown row per shape: estimate,
measured peak, their ratio (estimate / measured; the target is 1.0–1.25), and the command.
Needs the real models of tests/fetch-*.sh in .cache/models/.
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SMOL = ".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOL_F32 = ".cache/models/smollm2/SmolLM2-135M-Instruct.F32.gguf"
MINILM = ".cache/models/all-MiniLM-L6-v2"
SHOES = "my shoes are small, my feet are big."


def words(n):
    """A text of about n tokens on the toy model (one token per word) and on SmolLM2."""
    base = "the cat sat on the mat while my shoes were small and my feet were big".split()
    return " ".join(base[i % len(base)] for i in range(n))


def batch_file():
    path = os.path.join(tempfile.gettempdir(), "attn-trace-bench-batch.txt")
    with open(path, "w") as f:
        f.write("".join(f"{SHOES} {i}\n" for i in range(40)))
    return path


# name, arguments (after the binary). Each is a shape named in issue 48.
SHAPES = [
    ("default toy", [SHOES]),
    ("1,000 tiny layers", [SHOES, "--layers", "1000"]),
    ("20,000 tiny layers", [SHOES, "--layers", "20000"]),
    ("20,000 tiny layers, JSON", [SHOES, "--layers", "20000", "--format", "json"]),
    ("two huge layers", [SHOES, "--d-model", "2048", "--d-ff", "8192", "--heads", "16", "--layers", "2"]),
    ("two huge layers, summary only", [SHOES, "--d-model", "2048", "--d-ff", "8192", "--heads", "16",
                                       "--layers", "2", "--steps", "none"]),
    ("toy, 2,000 tokens, 4 layers", [words(2000), "--max-len", "2048", "--layers", "4", "--heads", "4",
                                     "--d-model", "64", "--steps", "none", "--stats"]),
    ("toy, 1,000 tokens, weights as JSON", [words(1000), "--max-len", "1024", "--heads", "2",
                                            "--steps", "weights", "--format", "json"]),
    ("toy batch of 40", ["--batch", "@BATCH"]),
    ("toy batch of 40, JSON", ["--batch", "@BATCH", "--format", "json"]),
    ("toy GPT, generate 40", [SHOES, "--norm", "pre", "--causal", "--layers", "4", "--heads", "4", "--d-model", "64",
                              "--lm-head", "tied", "--max-len", "64", "--generate", "40", "--steps", "none"]),
    ("SmolLM2 Q4_1, summary", ["The capital of France is", "--model", SMOL]),
    ("SmolLM2 Q4_1, JSON of every step", ["The capital of France is", "--model", SMOL, "--format", "json"]),
    ("SmolLM2 Q4_1, 2,000 tokens", [words(2000), "--model", SMOL, "--stats"]),
    ("SmolLM2 Q4_1, generate 32", ["The capital of France is", "--model", SMOL, "--generate", "32",
                                   "--steps", "none"]),
    ("SmolLM2 Q4_1, patching sweep", ["The capital of France is", "--model", SMOL, "--patch",
                                      "The capital of Italy is", "--metric", " Paris", " Rome", "--steps", "none"]),
    ("SmolLM2 F32, summary", ["The capital of France is", "--model", SMOL_F32]),
    ("SmolLM2 Q4_1, ggml arithmetic", ["The capital of France is", "--model", SMOL, "--arithmetic", "ggml",
                                       "--steps", "none"]),
    ("MiniLM, summary", [SHOES, "--model", MINILM]),
    ("MiniLM, 256 tokens, JSON", [words(250), "--model", MINILM, "--format", "json"]),
]
SERVE = ("serve SmolLM2 Q4_1, one trace", ["--model", SMOL], ["The capital of France is", "--steps", "weights"])

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def size(text):
    num, unit = text.split()
    return float(num) * UNITS[unit]


def args_of(args, batch):
    return [batch if a == "@BATCH" else a for a in args]


def estimate(binary, args):
    """The estimate the run was checked against, from `--timings`' line."""
    p = subprocess.run([binary, *args, "--timings"], cwd=ROOT, capture_output=True, text=True)
    m = re.search(r"\(estimated ([0-9.]+ [KMGT]?i?B)\)", p.stderr)
    if m is None:
        # Before the estimate was printed by --timings, a refusal named it ("this run needs about …").
        p = subprocess.run([binary, *args, "--max-memory", "1B"], cwd=ROOT, capture_output=True, text=True)
        m = re.search(r"needs about ([0-9.]+ [KMGT]?i?B)", p.stderr)
    if m is None:
        sys.exit(f"no estimate from {args[:3]}…: {p.stderr.strip()[-400:]}")
    return size(m.group(1))


def measured(binary, args):
    """The peak resident set size of the whole run, from GNU time's %M (KiB)."""
    with tempfile.NamedTemporaryFile("r") as t:
        p = subprocess.run(["/usr/bin/time", "-o", t.name, "-f", "%M %e", binary, *args], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit(f"{args[:3]}… failed: {p.stderr.strip()[-400:]}")
        kib, secs = t.read().split()[-2:]
    return int(kib) * 1024, float(secs)


def vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def serve_peak(binary, model_args, request):
    """The server's peak after one request: started, one POST /api/trace answered, VmHWM read."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([binary, "serve", "--port", str(port), *model_args], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in server.stderr:
            if "listening on" in line:
                break
        body = json.dumps({"args": request}).encode()
        host = f"127.0.0.1:{port}"
        req = urllib.request.Request(f"http://{host}/api/trace", data=body,
                                     headers={"Content-Type": "application/json", "Host": host})
        start = time.perf_counter()
        with urllib.request.urlopen(req, timeout=600) as r:
            r.read()
        took = time.perf_counter() - start
        return vm_hwm(server.pid), took
    finally:
        server.terminate()
        server.wait()


def machine():
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
    return f"{model}, {os.cpu_count()} cores, {mem / (1 << 20):.1f} GiB RAM"


def human(b):
    for unit in ["B", "KiB", "MiB", "GiB", "TiB"]:
        if b < 1024 or unit == "TiB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{b:.0f} B"
        b /= 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/attn-trace")
    ap.add_argument("--only", help="comma-separated shape names (substrings)")
    a = ap.parse_args()
    binary = os.path.join(ROOT, a.bin) if not os.path.isabs(a.bin) else a.bin
    batch = batch_file()
    chosen = [s for s in SHAPES + [SERVE] if not a.only or any(o in s[0] for o in a.only.split(","))]
    commit = subprocess.run(["git", "log", "--oneline", "-1"], cwd=ROOT, capture_output=True, text=True).stdout
    print(f"machine: {machine()}; commit {commit.strip()[:60]}")
    print("peak: /usr/bin/time -f %M (ru_maxrss of the child); serve: VmHWM of the server after one request\n")
    print("| shape | estimate | measured peak | estimate / peak | time | command |")
    print("|---|---|---|---|---|---|")
    worst = []
    for shape in chosen:
        if shape is SERVE:
            name, model_args, request = shape
            est = estimate(binary, [*request, *model_args, "--generate", "1"])
            peak, secs = serve_peak(binary, model_args, request)
            shown = ("attn-trace serve " + " ".join(model_args) + " + POST /api/trace " + json.dumps(request)
                     + "; estimate: the same with --generate 1")
        else:
            name, args = shape
            args = args_of(args, batch)
            est = estimate(binary, args)
            peak, secs = measured(binary, args)
            shown = "attn-trace " + " ".join(f'"{x[:40]}…"' if len(x) > 40 else (f'"{x}"' if " " in x else x)
                                              for x in args)
        ratio = est / peak
        worst.append(ratio)
        flag = "" if 1.0 <= ratio <= 1.25 else " **(outside 1.0–1.25)**"
        print(f"| {name} | {human(est)} | {human(peak)} | {ratio:.2f}{flag} | {secs:.1f} s | `{shown}` |",
              flush=True)
    print(f"\nratios: {min(worst):.2f}–{max(worst):.2f} over {len(worst)} shapes")


if __name__ == "__main__":
    main()
