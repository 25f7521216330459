#!/usr/bin/env python3
"""The other side of the generation benchmark (BENCHMARKS.md, "Generation (issue 31)").

    python bench_generate.py trace --sentence S --new N --out FILE [--timings]
        What a user of transformers writes to trace a generation: load SmolLM2-135M-Instruct
        from its GGUF file (bench_gguf.py's loader: eager attention, float32, lm_head tied),
        `generate(do_sample=False, max_new_tokens=N, min_new_tokens=N, output_attentions=True,
        return_dict_in_generate=True)` on S's ids, and write every step's attention weights of
        every layer as JSON (json.dump of .tolist()): the same numbers as
        `attn-trace S --model FILE.gguf --generate N --ignore-eos --steps weights --format json`.

    python bench_generate.py llama --sentence S --new N [--threads 2]
        The engine people run: llama.cpp (llama-cpp-python, its own build) on the same GGUF file
        with 2 threads. Evaluates S's tokens (prompt processing), then N greedy tokens one at a
        time (decode), and prints prompt and decode tokens per second from llama.cpp's own
        timers (llama_perf_context), and the tokens it wrote.
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
sys.path.insert(0, str(HERE))


def cmd_trace(args):
    import torch

    import bench_gguf as g

    path = g.gguf_path(args.gguf)
    tok = g.load_tokenizer(path)
    model = g.load_model(path)
    ids = torch.tensor([g.ids_of(tok, args.sentence)])
    with torch.no_grad():
        out = model.generate(
            ids, do_sample=False, max_new_tokens=args.new, min_new_tokens=args.new,
            output_attentions=True, return_dict_in_generate=True, pad_token_id=0,
        )
    STAGES.append(("generate", time.perf_counter()))
    doc = {
        "input_ids": ids[0].tolist(),
        "generated": out.sequences[0, ids.shape[1]:].tolist(),
        # attentions[t][l]: [1, heads, rows, keys]; step 0 the prompt's rows, then one row each.
        "attentions": [[a[0].tolist() for a in step] for step in out.attentions],
    }
    STAGES.append((".tolist()", time.perf_counter()))
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    STAGES.append(("json.dump", time.perf_counter()))
    if args.timings:
        prev = START
        for name, t in STAGES:
            print(f"{name}: {(t - prev) * 1000:.0f} ms", file=sys.stderr)
            prev = t


def cmd_llama(args):
    import llama_cpp

    path = str(Path(args.gguf)) if args.gguf else str(HERE.parent.parent / ".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    llm = llama_cpp.Llama(model_path=path, n_threads=args.threads, n_threads_batch=args.threads, n_ctx=512,
                          n_batch=512, verbose=False, logits_all=False)
    ids = llm.tokenize(args.sentence.encode(), add_bos=False, special=False)
    llm.reset()
    llama_cpp.llama_perf_context_reset(llm.ctx)
    llm.eval(ids)
    out = []
    for _ in range(args.new):
        tok = llm.sample(top_k=1, temp=0.0)
        out.append(tok)
        llm.eval([tok])
    perf = llama_cpp.llama_perf_context(llm.ctx)
    prompt_tps = perf.n_p_eval / (perf.t_p_eval_ms / 1000) if perf.t_p_eval_ms else float("nan")
    decode_tps = perf.n_eval / (perf.t_eval_ms / 1000) if perf.t_eval_ms else float("nan")
    print(json.dumps({"prompt_tokens": perf.n_p_eval, "prompt_ms": perf.t_p_eval_ms, "prompt_tps": prompt_tps,
                      "decode_tokens": perf.n_eval, "decode_ms": perf.t_eval_ms, "decode_tps": decode_tps,
                      "threads": args.threads, "llama_cpp_python": llama_cpp.__version__,
                      "generated": out}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace")
    t.add_argument("--sentence", required=True)
    t.add_argument("--new", type=int, required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--gguf")
    t.add_argument("--timings", action="store_true")
    t.set_defaults(func=cmd_trace)
    l = sub.add_parser("llama")
    l.add_argument("--sentence", required=True)
    l.add_argument("--new", type=int, required=True)
    l.add_argument("--threads", type=int, default=2)
    l.add_argument("--gguf")
    l.set_defaults(func=cmd_llama)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
