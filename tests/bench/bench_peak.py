"""The forward pass's GFLOP/s and share of the f32 peak for the benchmark models, next to
llama.cpp's prompt processing of the same GGUF files (BENCHMARKS.md, "Share of the peak").

    python3 tests/bench/bench_peak.py [--peak GFLOPS] [--runs 3] [--only "NAME, N tokens|…"]
    python3 tests/bench/bench_peak.py --table A.json,B.json [--peak GFLOPS]   (rows of earlier runs)

attn-trace's side is `--timings`: each run prints the forward pass's operations (every matrix
product, `config::flops`), its time, and the f32 peak measured after the run; the row takes
the best (and the median) forward pass of `--runs` runs after one warm-up. The share is of
`--peak` (the f32 peak `cargo bench --bench peak` printed), else of the best peak the runs'
`--timings` measured. llama.cpp's side is `tests/bench/llama_pp.py time` in LLAMA_PYTHON (a
venv with llama-cpp-python): one `llama_decode` of the whole prompt on 2 threads, with the
logits of every position (the work attn-trace does) and of the last one only (llama.cpp's
usual prompt processing), converted to GFLOP/s with attn-trace's count of the same work (the
last-logit count is the layers' and one position's head). Both sides get the same token ids
(checked). Machine, load averages and commands are printed with the table.

Needs a release build (BIN, default target/release/attn-trace), jq-free; the models of
tests/fetch-smollm2.sh, tests/fetch-smollm2-f32.sh, tests/fetch-gemma3.sh, tests/fetch-model.sh
(MiniLM), and, for the Mixtral-shaped row, tests/bench/make_moe_1b.py's checkpoint.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.environ.get("BIN", "target/release/attn-trace")
LLAMA_PYTHON = os.environ.get("LLAMA_PYTHON", "/work/venvs/llama/bin/python")
SMOL = ".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOL_F32 = ".cache/models/smollm2/SmolLM2-135M-Instruct.F32.gguf"
GEMMA = ".cache/models/gemma3/gemma-3-270m-q4_k_m.gguf"
MINILM = ".cache/models/all-MiniLM-L6-v2"
MOE = ".cache/bench/mixtral-1b"

# A text longer than 512 tokens for every tokenizer here, cut to each length by words.
PARAGRAPH = (
    "A language model reads a sentence one token at a time. Each token is first turned into a vector by "
    "looking up a row of a large table, and that vector is then passed through a stack of layers. In every "
    "layer, the attention step lets each position look back at the positions before it and decide how much "
    "of each to take in. The feed-forward step that follows works on every position on its own, mixing the "
    "numbers it has gathered and writing the result back into the stream that runs from the first layer to "
    "the last. This model is small by today's standards: it has many layers, a few query heads that share "
    "their keys and values, and a vocabulary of tens of thousands of tokens."
)
TEXT = " ".join([PARAGRAPH] * 8)

# name, model, tokens, extra attn-trace flags, whether llama.cpp runs the file.
CASES = [
    ("SmolLM2 Q4_1", SMOL, 32, [], True),
    ("SmolLM2 Q4_1", SMOL, 128, [], True),
    ("SmolLM2 Q4_1", SMOL, 512, [], True),
    ("SmolLM2 F32", SMOL_F32, 128, [], True),
    ("SmolLM2 F32", SMOL_F32, 512, [], True),
    ("SmolLM2 Q4_1, every layer's weights + hidden states recorded", SMOL, 512, ["--steps", "weights,add_norm2.sum"], False),
    ("Gemma 3 270M Q4_K_M", GEMMA, 128, [], True),
    ("all-MiniLM-L6-v2", MINILM, 12, [], False),
    ("all-MiniLM-L6-v2", MINILM, 256, [], False),
    ("Mixtral shape 0.94 B (bf16)", MOE, 128, [], False),
]


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True, **kw)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def attn_ids(model, text):
    out = run([BIN, text, "--model", model, "--steps", "tokens", "--format", "json", "--top-k", "0"]).stdout
    return json.loads(out)["input"]["token_ids"]


def cut(model, n, gguf):
    """The longest prefix of TEXT's words that makes at most n tokens, and its ids."""
    if gguf:
        r = json.loads(run([LLAMA_PYTHON, "tests/bench/llama_pp.py", "tokenize", "--model", model, "--text", TEXT, "--tokens", str(n)]).stdout)
        return r["text"], r["ids"]
    words = TEXT.split(" ")
    lo, hi = 1, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            fits = len(attn_ids(model, " ".join(words[:mid]))) <= n
        except subprocess.CalledProcessError:  # past the model's positions: refused
            fits = False
        if fits:
            lo = mid
        else:
            hi = mid - 1
    text = " ".join(words[:lo])
    return text, attn_ids(model, text)


def timings(cmd):
    """(FLOP, forward-pass ms, peak GFLOP/s) from one --timings run."""
    err = run(["bash", "-c", cmd + " --timings > /dev/null"]).stderr
    flops = next(l for l in err.splitlines() if l.startswith("attn-trace: flops: forward pass: "))
    count, rest = flops.split(": ")[3].split(" FLOP in ")
    peak = next(l for l in err.splitlines() if l.startswith("attn-trace: f32 peak: "))
    return int(count), float(rest.split(" ms")[0]), float(peak.split(": ")[2].split(" GFLOP/s")[0])


def llama(model, ids, logits, runs):
    cmd = [LLAMA_PYTHON, "tests/bench/llama_pp.py", "time", "--model", model, "--ids", ",".join(map(str, ids))]
    cmd += ["--threads", "2", "--runs", str(runs), "--logits", logits]
    return json.loads(run(cmd).stdout)


def case(name, model, n, extra, gguf, runs):
    before = loadavg().split()[0]
    text, ids = cut(model, n, gguf)
    mine = attn_ids(model, text)
    assert mine == ids, f"{name}: llama.cpp's ids differ from attn-trace's"
    quoted = text.replace("'", "'\\''")
    cmd = f"{BIN} '{quoted}' --model {model} " + " ".join(extra or ["--steps", "output"]) + " --format json"
    timings(cmd)  # warm-up: the file in the page cache
    runs_ = [timings(cmd) for _ in range(runs)]
    flops = runs_[0][0]
    ms = [r[1] for r in runs_]
    row = {"name": name, "tokens": len(ids), "flops": flops, "best_ms": min(ms), "median_ms": statistics.median(ms)}
    row["timings_peaks"] = [r[2] for r in runs_]
    row["command"] = f"{BIN} \"<{len(ids)} tokens>\" --model {model} " + " ".join(extra or ["--steps", "output"]) + " --format json --timings > /dev/null"
    if gguf:
        bare = timings(f"{BIN} '{quoted}' --model {model} --steps output --top-k 0 --format json")[0]
        row["flops_last"] = bare + (flops - bare) // len(ids)
        row["llama_all"] = llama(model, ids, "all", max(runs, 3))
        row["llama_last"] = llama(model, ids, "last", max(runs, 3))
    row["load"] = f"{before} → {loadavg().split()[0]}"
    return row


def table(rows, peak):
    def rate(flops, seconds):
        g = flops / 1e9 / seconds
        return f"{g:.1f} GFLOP/s, **{g / peak:.2f}**"

    print("| case | tokens | GFLOP | attn-trace forward pass, best (median) | its rate, share of peak |"
          " llama.cpp, logits at every position: best (median), tokens/s | its rate, share |"
          " llama.cpp, last logit only: best, tokens/s | its rate (its GFLOP), share | load (1 min) before → after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cells = [r["name"], str(r["tokens"]), f"{r['flops'] / 1e9:.2f}",
                 f"{r['best_ms']:.0f} ms ({r['median_ms']:.0f} ms)", rate(r["flops"], r["best_ms"] / 1e3)]
        if "llama_all" in r:
            a, l = r["llama_all"], r["llama_last"]
            cells += [f"{a['best'] * 1e3:.0f} ms ({a['median'] * 1e3:.0f} ms), {r['tokens'] / a['best']:.0f}",
                      rate(r["flops"], a["best"]),
                      f"{l['best'] * 1e3:.0f} ms, {r['tokens'] / l['best']:.0f}",
                      rate(r["flops_last"], l["best"]).replace(" GFLOP/s,", f" GFLOP/s ({r['flops_last'] / 1e9:.2f}),")]
        else:
            cells += ["", "", "", ""]
        cells.append(r["load"])
        print("| " + " | ".join(cells) + " |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--peak", type=float, help="the f32 peak in GFLOP/s (cargo bench --bench peak)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--only", help='substrings of "NAME, N tokens", separated by |')
    p.add_argument("--table", help="comma-separated OUT_JSON files of earlier runs: print their rows as one table")
    args = p.parse_args()
    if args.table:
        rows = [r for f in args.table.split(",") for r in json.load(open(f))]
        table(rows, args.peak or max(p for r in rows for p in r["timings_peaks"]))
        return
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    print(f"machine: {os.cpu_count()} cores, {cpu}; load average before: {loadavg()}")
    print(f"binary: {BIN}, {run([BIN, '--version']).stdout.strip()}; commit {run(['git', 'log', '--oneline', '-1']).stdout.strip()}")
    rows = []
    for name, model, n, extra, gguf in CASES:
        if args.only and not any(s in f"{name}, {n} tokens" for s in args.only.split("|")):
            continue
        if not os.path.exists(os.path.join(ROOT, model)):
            print(f"skipped (no {model}): {name}", file=sys.stderr)
            continue
        rows.append(case(name, model, n, extra, gguf, args.runs))
        print(f"  {name}, {n} tokens: done; load average {loadavg()}", file=sys.stderr)
    seen = max(p for r in rows for p in r["timings_peaks"])
    peak = args.peak or seen
    print(f"load average after: {loadavg()}")
    print(f"f32 peak for the shares: {peak:.1f} GFLOP/s ({'--peak, from cargo bench --bench peak' if args.peak else 'the best --timings measured'});"
          f" --timings measured {min(p for r in rows for p in r['timings_peaks']):.1f}–{seen:.1f} GFLOP/s in these runs")
    if any("llama_all" in r for r in rows):
        a = next(r["llama_all"] for r in rows if "llama_all" in r)
        print(f"llama-cpp-python {a['llama_cpp_python']}, {a['threads']} threads; {a['system_info']}")
    print()
    table(rows, peak)
    print()
    print("commands (attn-trace; llama.cpp: tests/bench/llama_pp.py time --model FILE --ids <the same ids> --threads 2 --logits all|last):")
    for r in rows:
        print(f"    {r['command']}")
    json.dump(rows, open(os.environ.get("OUT_JSON", "/tmp/bench_peak.json"), "w"), indent=1)
    print("(rows also as JSON in OUT_JSON, default /tmp/bench_peak.json)")


if __name__ == "__main__":
    main()
