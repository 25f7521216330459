#!/usr/bin/env python3
"""The transformers side of the encoder–decoder benchmark (BENCHMARKS.md, "Encoder–decoders
(issue 32)"; tests/bench/bench_seq2seq.sh).

    python bench_seq2seq.py trace --model DIR --source S --target T --out FILE [--timings]
        The "Python route" timed as a whole process: load DIR with AutoModelForSeq2SeqLM (eager
        attention, float32) and AutoTokenizer, tokenize S (the encoder's input) and T (labels,
        </s> added), make the decoder's input as transformers does in training
        (model._shift_right(labels): the decoder start token, then the labels but the last),
        run one forward pass under torch.no_grad() with output_attentions=True and
        output_hidden_states=True, and write every layer's attention weights (encoder
        self-attention, decoder self-attention, cross-attention) and every hidden state of both
        stacks as JSON (json.dump of .tolist()) to FILE. The same work as
        `attn-trace S --model DIR --target T --steps attn.weights,cross_attn.weights,add_norm2.sum
        --format json`. --timings prints each stage's time on stderr; it does not change the work.

    python bench_seq2seq.py count --model DIR --source S --target T
        Print how many tokens transformers makes of S and of T (with </s>): the benchmark wants
        64 and 32.

Needs transformers 4.46.3 and torch (/work/venvs/oracle). Everything is local (HF_HUB_OFFLINE=1).
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


def timings(args):
    if not args.timings:
        return
    prev = START
    for name, t in STAGES:
        print(f"{name}: {(t - prev) * 1000:.0f} ms", file=sys.stderr)
        prev = t
    print(f"total in Python (after interpreter start-up): {(prev - START) * 1000:.0f} ms", file=sys.stderr)


def cmd_count(args):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model)
    print(len(tok(args.source)["input_ids"]), len(tok(text_target=args.target)["input_ids"]))


def cmd_trace(args):
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    STAGES.append(("import torch and transformers", time.perf_counter()))
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSeq2SeqLM.from_pretrained(args.model, attn_implementation="eager",
                                                  torch_dtype=torch.float32)
    model.eval()
    STAGES.append(("load the tokenizer and the model", time.perf_counter()))
    ids = tok(args.source, return_tensors="pt")["input_ids"]
    labels = tok(text_target=args.target, return_tensors="pt")["input_ids"]
    dec = model._shift_right(labels)
    with torch.no_grad():
        out = model(input_ids=ids, decoder_input_ids=dec, output_attentions=True,
                    output_hidden_states=True)
    STAGES.append(("forward (logits included)", time.perf_counter()))
    doc = {
        "input_ids": ids[0].tolist(),
        "decoder_input_ids": dec[0].tolist(),
        "encoder_attentions": [a[0].tolist() for a in out.encoder_attentions],
        "decoder_attentions": [a[0].tolist() for a in out.decoder_attentions],
        "cross_attentions": [a[0].tolist() for a in out.cross_attentions],
        "encoder_hidden_states": [h[0].tolist() for h in out.encoder_hidden_states],
        "decoder_hidden_states": [h[0].tolist() for h in out.decoder_hidden_states],
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
    for name in ("trace", "count"):
        p = sub.add_parser(name)
        p.add_argument("--model", required=True)
        p.add_argument("--source", required=True)
        p.add_argument("--target", required=True)
        if name == "trace":
            p.add_argument("--out", required=True)
            p.add_argument("--timings", action="store_true", help="print each stage's time on stderr")
    args = ap.parse_args()
    {"trace": cmd_trace, "count": cmd_count}[args.cmd](args)


if __name__ == "__main__":
    main()
