#!/usr/bin/env python3
"""The transformers side of the Gemma 3 GGUF benchmark (BENCHMARKS.md, "New families (issue 30)").
The Mixtral-shaped checkpoint's side is tests/bench/bench_decoders.py `trace` (an ordinary
Hugging Face folder); this file is for the GGUF, which transformers cannot read by itself.

    python bench_families.py gemma3 --ids I,I,… --out FILE [--timings]
        The "Python route" timed as a whole process: build transformers' Gemma3ForCausalLM
        from .cache/models/gemma3/gemma-3-270m-q4_k_m.gguf exactly as the test oracle does
        (fixtures/oracle/gemma3_gguf_oracle.py `load_model`: transformers 4.51.0's GGUF loader
        does not know `gemma3`, so the config is read from the file's metadata, the model is
        made with Gemma3ForCausalLM(config) and every tensor is dequantized by the `gguf`
        package and loaded with load_state_dict), eager attention, float32; run the token ids
        once under torch.no_grad() with output_attentions=True and output_hidden_states=True,
        and write every layer's attention weights and every hidden state as JSON (json.dump of
        .tolist()) to FILE: the same work as
        `attn-trace S --model FILE.gguf --steps weights,add_norm2.sum --format json`.

The token ids are given, not made here: transformers has no tokenizer for a gemma3 GGUF. They are
llama.cpp's (BOS added), which bench_families.sh checks against attn-trace's before timing.
Needs transformers 4.51.0, torch and gguf (requirements-gemma3-gguf.txt). --timings prints each
stage's time on stderr; it does not change the work. Everything is local (HF_HUB_OFFLINE=1).
"""

import os
import time

START = time.perf_counter()
STAGES = []

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "fixtures" / "oracle"))


def timings(args):
    if not args.timings:
        return
    prev = START
    for name, t in STAGES:
        print(f"{name}: {(t - prev) * 1000:.0f} ms", file=sys.stderr)
        prev = t
    print(f"total in Python (after interpreter start-up): {(prev - START) * 1000:.0f} ms", file=sys.stderr)


def cmd_gemma3(args):
    import torch

    import gemma3_gguf_oracle as oracle

    STAGES.append(("import torch and the oracle", time.perf_counter()))
    model, _facts = oracle.load_model()
    model.eval()
    STAGES.append(("build the model (config, init, dequantize, load_state_dict)", time.perf_counter()))
    ids = torch.tensor([[int(i) for i in args.ids.split(",")]])
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True, output_hidden_states=True)
    STAGES.append(("forward (logits included)", time.perf_counter()))
    doc = {
        "input_ids": ids[0].tolist(),
        "attentions": [a[0].tolist() for a in out.attentions],
        "hidden_states": [h[0].tolist() for h in out.hidden_states],
    }
    STAGES.append((".tolist()", time.perf_counter()))
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    STAGES.append(("json.dump", time.perf_counter()))
    timings(args)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gemma3", help="trace token ids with transformers' Gemma 3, JSON to FILE")
    g.add_argument("--ids", required=True, help="comma-separated token ids")
    g.add_argument("--out", required=True)
    g.add_argument("--timings", action="store_true", help="print each stage's time on stderr")
    args = ap.parse_args()
    {"gemma3": cmd_gemma3}[args.cmd](args)


if __name__ == "__main__":
    main()
