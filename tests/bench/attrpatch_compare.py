#!/usr/bin/env python3
"""Attribution patching against exact activation patching on one model: Spearman's rank
correlation between the two grids, and the cells that disagree most (BENCHMARKS.md, "Attribution
patching"). Needs only the standard library.

    python3 tests/bench/attrpatch_compare.py BIN CLEAN CORRUPTED A B --model M [--what heads|resid]
                                            [--oracle FILE]

Runs `BIN CLEAN --model M --patch CORRUPTED --metric A B --patch-what W --steps tokens
--format json` with `--patch-method exact` and `attribution`, ranks both grids' effects, and
prints rho, the largest rank disagreements and, with --oracle (a grid written by
`fixtures/oracle/attrpatch_oracle.py gguf --out FILE`), the largest difference from PyTorch.
"""

import argparse
import json
import subprocess


def ranks(xs):
    """Average ranks (ties share the mean of their positions), 1-based."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb)


def grid(args, method):
    cmd = [args.bin, args.clean, "--model", args.model, "--patch", args.corrupted, "--metric", args.a, args.b,
           "--patch-what", args.what, "--patch-method", method, "--steps", "tokens", "--format", "json"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["patching"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for a in ("bin", "clean", "corrupted", "a", "b"):
        ap.add_argument(a)
    ap.add_argument("--model", required=True)
    ap.add_argument("--what", default="heads", choices=["heads", "resid"])
    ap.add_argument("--oracle")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    exact, approx = grid(args, "exact"), grid(args, "attribution")
    key = "head" if args.what == "heads" else "position"
    cells = [(r["layer"], r[key]) for r in exact["rows"]]
    e = [r["effect"] for r in exact["rows"]]
    a = [r["effect"] for r in approx["rows"]]
    print(f"clean {exact['clean_metric']:.4f}, corrupted {exact['corrupted_metric']:.4f}, {len(cells)} cells")
    print(f"Spearman rho (attribution vs exact effects): {spearman(e, a):.4f}")
    print(f"Pearson r: {spearman_free_pearson(e, a):.4f}")
    re_, ra = ranks(e), ranks(a)
    n = len(e)
    top_e = sorted(range(n), key=lambda i: -abs(e[i]))[:args.top]
    print("strongest exact cells (layer, index): exact effect, attribution effect, rank exact/attribution:")
    for i in top_e:
        print(f"  {cells[i]}: {e[i]:+.4f} {a[i]:+.4f}  {n + 1 - re_[i]:.0f}/{n + 1 - ra[i]:.0f}")
    worst = sorted(range(n), key=lambda i: -abs(re_[i] - ra[i]))[:args.top]
    print("largest rank disagreements:")
    for i in worst:
        print(f"  {cells[i]}: exact {e[i]:+.4f} (rank {n + 1 - re_[i]:.0f}), "
              f"attribution {a[i]:+.4f} (rank {n + 1 - ra[i]:.0f})")
    big = sorted(range(n), key=lambda i: -abs(e[i] - a[i]))[:args.top]
    print("largest effect differences:")
    for i in big:
        print(f"  {cells[i]}: exact {e[i]:+.4f}, attribution {a[i]:+.4f}")
    if args.oracle:
        o = json.load(open(args.oracle))
        dm = max(abs(x["metric"] - y["metric"]) for x, y in zip(approx["rows"], o["rows"]))
        de = max(abs(x["effect"] - y["effect"]) for x, y in zip(approx["rows"], o["rows"]))
        print(f"against PyTorch autograd: clean {o['clean_metric']:.6f} vs {approx['clean_metric']:.6f}, "
              f"corrupted {o['corrupted_metric']:.6f} vs {approx['corrupted_metric']:.6f}; "
              f"max |metric diff| {dm:.2e}, max |effect diff| {de:.2e}")


def spearman_free_pearson(a, b):
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    return cov / ((sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5)


if __name__ == "__main__":
    main()
