"""llama.cpp's prompt processing of a GGUF file, timed (BENCHMARKS.md, "Share of the peak").

    python llama_pp.py tokenize --model FILE --text TEXT [--tokens N]
        prints, as JSON, the ids llama.cpp makes of TEXT (BOS added); with --tokens, of the
        longest prefix of TEXT's words that makes at most N tokens, and that prefix
    python llama_pp.py time --model FILE --ids I,I,… [--threads 2] [--runs 5] [--logits all|last] [--flash-attn on|off]
        prints, as JSON, the seconds of each timed llama_decode of the whole prompt as one
        batch (one untimed warm-up first; the cache cleared before each), best and median

The prompt is decoded by one `llama_decode` call of a batch holding every position (n_batch =
n_ubatch = the prompt's length), so the time is llama.cpp's own prompt processing on
`--threads` threads, without llama-cpp-python's copies of the logits into numpy. `--logits
all` asks for the logits of every position (the head at every position, as attn-trace
computes them for its predictions), `last` for the last one only (llama.cpp's usual prompt
processing). Needs llama-cpp-python (fixtures/oracle/requirements-tokenize.txt).
"""

import argparse
import json
import statistics
import sys
import time

import llama_cpp
from llama_cpp import Llama


def tokenize(args):
    llm = Llama(model_path=args.model, vocab_only=True, verbose=False)
    ids = lambda t: llm.tokenize(t.encode(), add_bos=True, special=False)
    text = args.text
    if args.tokens:
        words = args.text.split(" ")
        lo, hi = 1, len(words)  # the largest word count whose prefix makes <= N tokens
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(ids(" ".join(words[:mid]))) <= args.tokens:
                lo = mid
            else:
                hi = mid - 1
        text = " ".join(words[:lo])
    print(json.dumps({"ids": ids(text), "text": text}, ensure_ascii=False))


def decode_seconds(llm, ids, logits_all):
    n = len(ids)
    ctx = llm._ctx.ctx
    batch = llama_cpp.llama_batch_init(n, 0, 1)
    try:
        for i, t in enumerate(ids):
            batch.token[i] = t
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = logits_all or i == n - 1
        batch.n_tokens = n
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        start = time.perf_counter()
        rc = llama_cpp.llama_decode(ctx, batch)
        took = time.perf_counter() - start
        if rc != 0:
            sys.exit(f"llama_decode returned {rc}")
        return took
    finally:
        llama_cpp.llama_batch_free(batch)


def timed(args):
    ids = [int(i) for i in args.ids.split(",")]
    n = len(ids)
    llm = Llama(
        model_path=args.model,
        n_ctx=max(n, 64),
        n_batch=n,
        n_ubatch=n,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        logits_all=args.logits == "all",
        flash_attn=args.flash_attn == "on",
        verbose=False,
    )
    decode_seconds(llm, ids, args.logits == "all")  # warm-up: pages, buffers, repacking
    runs = [decode_seconds(llm, ids, args.logits == "all") for _ in range(args.runs)]
    print(
        json.dumps(
            {
                "tokens": n,
                "threads": args.threads,
                "logits": args.logits,
                "seconds": runs,
                "best": min(runs),
                "median": statistics.median(runs),
                "llama_cpp_python": llama_cpp.__version__,
                "system_info": llama_cpp.llama_print_system_info().decode().strip(),
            }
        )
    )


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokenize")
    t.add_argument("--model", required=True)
    t.add_argument("--text", required=True)
    t.add_argument("--tokens", type=int)
    r = sub.add_parser("time")
    r.add_argument("--model", required=True)
    r.add_argument("--ids", required=True)
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--runs", type=int, default=5)
    r.add_argument("--flash-attn", choices=["on", "off"], default="off",
                   help="llama.cpp's flash attention (off: the kernels --arithmetic ggml reproduces)")
    r.add_argument("--logits", choices=["all", "last"], default="all")
    args = p.parse_args()
    tokenize(args) if args.cmd == "tokenize" else timed(args)


if __name__ == "__main__":
    main()
