#!/usr/bin/env python3
"""Writes a ~1 B-parameter Mixtral-shaped checkpoint with random weights in bf16, for the
benchmark "New families (issue 30)" in BENCHMARKS.md (tests/bench/bench_families.sh).

    python tests/bench/make_moe_1b.py [--out DIR]     # transformers + torch (the fam-new venv)

The model is transformers' own MixtralForCausalLM, made from this config with
torch.manual_seed(0) and transformers' init (normal, std = initializer_range 0.02), directly in
bfloat16, and written with save_pretrained (safetensors, one file):

    hidden 1024, 12 layers, 16 query heads over 4 key/value heads (d_head 64), 8 experts per
    layer, top-2 routing, expert FFN 3072 (SiLU, gate/up/down), vocabulary 416, untied head,
    rope_theta 1e6, 2048 positions: 0.94 B parameters (1.9 GB in bf16, 3.8 GB in f32).

The tokenizer is fixtures/decoders/mixtral's (a byte-level BPE of 400 tokens with <unk> <s>
</s>, BOS added); vocab_size 416 is that fixture's (the 400 tokens padded to a multiple of 16),
so every id the tokenizer makes has an embedding row. Its tokenizer_config.json gets the
model's model_max_length. Nothing here is committed: the default output is
.cache/bench/mixtral-1b (git-ignored). A folder that already has model.safetensors is left alone.
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
TOKENIZER_DIR = REPO / "fixtures" / "decoders" / "mixtral"
OUT = REPO / ".cache" / "bench" / "mixtral-1b"
MAX_LEN = 2048


def config():
    from transformers import MixtralConfig

    return MixtralConfig(
        vocab_size=416, hidden_size=1024, intermediate_size=3072, num_hidden_layers=12,
        num_attention_heads=16, num_key_value_heads=4, num_local_experts=8,
        num_experts_per_tok=2, max_position_embeddings=MAX_LEN, rope_theta=1e6,
        rms_norm_eps=1e-5, initializer_range=0.02, tie_word_embeddings=False,
        sliding_window=None, bos_token_id=1, eos_token_id=2, pad_token_id=None,
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
    from transformers import AutoModelForCausalLM

    d.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config(), torch_dtype=torch.bfloat16)
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
    print(f"{d}: Mixtral shape, {n / 1e9:.3f} B parameters, bfloat16, model.safetensors "
          f"{size / 2**20:.0f} MiB", file=sys.stderr)


if __name__ == "__main__":
    main()
