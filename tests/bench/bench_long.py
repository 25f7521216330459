#!/usr/bin/env python3
"""The transformers side of the long-context benchmark (BENCHMARKS.md, "Long contexts (issue 36,
item 4)"): per-head statistics of SmolLM2's attention over a long input, as attn-trace's
`--stats` defines them (docs/OUTPUT.md; src/views/analysis.rs), computed the two ways a
transformers user would:

    python bench_long.py --gguf FILE --text FILE --mode all|hooked [--out FILE]

- `all`: one forward pass with output_attentions=True (eager attention, float32), then the
  statistics from the returned weights: every layer's [heads, N, N] is held at once.
- `hooked`: the careful way: a forward hook on each layer's self-attention reduces that
  layer's weights to the statistics as soon as they exist and drops them, so one layer's are
  held at a time (output_attentions=True is still what makes eager attention return them).

The input is the text of FILE, tokenized by the GGUF file's tokenizer without special tokens
(as attn-trace tokenizes it: tests/bench/bench_long.sh gives both the same file), the model
read from the GGUF file as tests/bench/bench_gguf.py reads it. Prints one JSON line: tokens, seconds (model call and statistics, not loading),
peak resident memory (ru_maxrss) and, with --out, writes the statistics to FILE.
Everything is local (HF_HUB_OFFLINE=1).
"""

import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402


def stats(w):
    """w: [heads, n, n] float32 weights of one layer -> per head (entropy, distance, first, previous),
    in float64 one head at a time (a float64 copy of every head at once would double the peak)."""
    n = w.shape[-1]
    pos = torch.arange(n, dtype=torch.float64)
    rows = []
    for h in range(w.shape[0]):
        x = w[h].double()
        ent = -torch.where(x > 0, x * torch.log(x), torch.zeros_like(x)).sum(-1).mean().item()
        dist = (x * (pos[:, None] - pos[None, :]).abs()).sum(-1).mean().item()
        prev = x[torch.arange(1, n), torch.arange(0, n - 1)].mean().item() if n > 1 else None
        rows.append({"entropy": ent, "mean_distance": dist, "first_token": x[:, 0].mean().item(), "previous_token": prev})
        del x
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--mode", choices=["all", "hooked"], required=True)
    ap.add_argument("--out")
    a = ap.parse_args()
    torch.set_num_threads(2)
    folder, name = os.path.split(os.path.abspath(a.gguf))
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    text = open(a.text, encoding="utf-8").read().strip()
    ids = torch.tensor([tok(text, add_special_tokens=False).input_ids])
    rows = []
    start = time.perf_counter()
    with torch.no_grad():
        if a.mode == "all":
            out = model(ids, output_attentions=True, use_cache=False)
            for layer, w in enumerate(out.attentions):
                rows += [dict(layer=layer, head=h, **s) for h, s in enumerate(stats(w[0]))]
        else:
            def hook(layer):
                def f(_module, _inputs, output):
                    rows.extend(dict(layer=layer, head=h, **s) for h, s in enumerate(stats(output[1][0])))
                    return (output[0], None) + tuple(output[2:])
                return f
            for layer, block in enumerate(model.model.layers):
                block.self_attn.register_forward_hook(hook(layer))
            model(ids, output_attentions=True, use_cache=False)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"tokens": ids.shape[1], "mode": a.mode, "seconds": round(seconds, 2), "peak_mib": round(peak, 1)}))
    if a.out:
        json.dump(rows, open(a.out, "w"))


if __name__ == "__main__":
    sys.exit(main())
