#!/usr/bin/env python3
"""Writes a t5-base-shaped checkpoint with random weights, for the benchmark "Encoder–decoders
(issue 32)" in BENCHMARKS.md (tests/bench/bench_seq2seq.sh).

    /work/venvs/oracle/bin/python tests/bench/make_t5_base.py [--out DIR]   # transformers 4.46.3

The model is transformers' own T5ForConditionalGeneration, made from t5-base's config with
torch.manual_seed(0) and transformers' T5 init (initializer_factor 1.0), in float32 as t5-base
is stored, and written with save_pretrained (safetensors, one file):

    d_model 768, d_kv 64, 12 heads, d_ff 3072 (ReLU, not gated), 12 encoder + 12 decoder
    layers, vocabulary 32128, relative position buckets 32, max distance 128, tied embeddings
    and head (T5 v1.0: the head's input rescaled by d_model^-0.5), layer_norm_epsilon 1e-6,
    decoder start = pad = 0, eos 1: 223 M parameters (892 MB in f32).

The tokenizer is fixtures/seq2seq/t5's (a Unigram of 125 pieces with <pad> </s> <unk>, "$A </s>"):
every id it makes is below 32128, so each has an embedding row; the other 32003 rows are never
looked up. Its tokenizer_config.json gets t5-base's model_max_length (512). Nothing here is
committed: the default output is .cache/bench/t5-base (git-ignored). A folder that already has
model.safetensors is left alone.
"""
import argparse
import json
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TOKENIZER_DIR = REPO / "fixtures" / "seq2seq" / "t5"
OUT = REPO / ".cache" / "bench" / "t5-base"
MAX_LEN = 512


def config():
    from transformers import T5Config

    # t5-base's config.json (google-t5/t5-base), less its task_specific_params
    return T5Config(
        vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_decoder_layers=12,
        num_heads=12, relative_attention_num_buckets=32, relative_attention_max_distance=128,
        dropout_rate=0.1, layer_norm_epsilon=1e-6, initializer_factor=1.0,
        feed_forward_proj="relu", is_encoder_decoder=True, tie_word_embeddings=True,
        use_cache=True, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
        n_positions=512,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    d = Path(args.out)
    if (d / "model.safetensors").exists():
        print(f"{d}: already there, left alone", file=sys.stderr)
        return
    import torch
    from transformers import T5ForConditionalGeneration

    d.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(config())
    model.eval()
    n = sum(p.numel() for p in model.parameters())
    model.save_pretrained(d, safe_serialization=True, max_shard_size="100GB")
    del model
    for f in ("tokenizer.json", "special_tokens_map.json"):
        shutil.copyfile(TOKENIZER_DIR / f, d / f)
    tc = json.loads((TOKENIZER_DIR / "tokenizer_config.json").read_text())
    tc["model_max_length"] = MAX_LEN
    (d / "tokenizer_config.json").write_text(json.dumps(tc, indent=2) + "\n")
    size = (d / "model.safetensors").stat().st_size
    print(f"{d}: t5-base shape, {n / 1e6:.0f} M parameters, float32, model.safetensors "
          f"{size / 2**20:.0f} MiB", file=sys.stderr)


if __name__ == "__main__":
    main()
