#!/usr/bin/env bash
# The byte-identity sweep of issue 49: run a fixed list of commands with the binary BIN and
# keep everything each one produced, so that two binaries (before and after a refactor) can be
# compared byte for byte with tests/sweep/compare.sh.
#
#   tests/sweep/identical.sh BIN OUTDIR
#
# For command NN (named NN-name) OUTDIR holds NN-name.out (stdout), NN-name.err (stderr),
# NN-name.rc (the exit code), and NN-name.FILE for every file the command wrote
# (--save-trace, --save-weights, --html, --svg). Commands run from the repository root with a
# fixed environment (no terminal, no colour variables), so the same binary gives the same bytes;
# the files are written to the cwd-relative folder target/sweep.work (the same path on every
# run, since some outputs name it) and moved into OUTDIR after each command: run one sweep at
# a time per checkout. Models: the toy (no --model), fixtures/decoders/{gpt2,llama-gqa,gemma2,
# mixtral,qwen2_moe,qwen2}, fixtures/seq2seq/{t5,bart}, fixtures/tiny-bert(-mlm), the tiny GGUF
# files in fixtures/gguf/ and SmolLM2 (tests/fetch-smollm2.sh; its commands are skipped, and
# say so, when the file is absent). A few commands are deliberate refusals (exit 2): their
# messages are output too.
set -uo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 BIN OUTDIR" >&2
    exit 2
fi
BIN="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
mkdir -p "$2"
OUT="$(cd "$2" && pwd)"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 2
W=target/sweep.work
N=0
START=$(date +%s.%N)

S="my shoes are small, my feet are big."
CLEAN="my shoes are small, my feet are"
CORRUPT="my shoes are big, my feet are"
G=fixtures/decoders/gpt2
L=fixtures/decoders/llama-gqa
GEM=fixtures/decoders/gemma2
MIX=fixtures/decoders/mixtral
QMOE=fixtures/decoders/qwen2_moe
QWEN=fixtures/decoders/qwen2
T5=fixtures/seq2seq/t5
BART=fixtures/seq2seq/bart
BERT=fixtures/tiny-bert
MLM=fixtures/tiny-bert-mlm
TG=fixtures/gguf/tiny-llama.gguf
TGF=fixtures/gguf/tiny-llama-f32.gguf
SMOL=.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
VG=fixtures/oracle/steer/gpt2.npy
VL=fixtures/oracle/steer/llama-gqa.npy
SW=tests/sweep

# run NAME ARG...: one command of the sweep.
run() {
    local name
    name=$(printf '%02d-%s' "$N" "$1")
    shift
    N=$((N + 1))
    rm -rf "$W" && mkdir -p "$W"
    env -i PATH="$PATH" HOME="$HOME" LANG=C.UTF-8 "$BIN" "$@" </dev/null >"$OUT/$name.out" 2>"$OUT/$name.err"
    echo $? >"$OUT/$name.rc"
    for f in "$W"/*; do
        [[ -e "$f" ]] && mv "$f" "$OUT/$name.$(basename "$f")"
    done
}

# smol NAME ARG...: a command on SmolLM2, skipped (with a note in OUTDIR) when it is absent.
smol() {
    if [[ -f "$SMOL" ]]; then
        run "$@"
    else
        echo "skipped: $SMOL is absent (tests/fetch-smollm2.sh)" >"$OUT/$(printf '%02d-%s' "$N" "$1").skipped"
        N=$((N + 1))
    fi
}

# The toy model: every format, the files, the analyses it supports.
run toy-table "$S"
run toy-json "$S" --format json
run toy-jsonl "$S" --format jsonl
run toy-heatmap "$S" --format heatmap --color never
run toy-heads "$S" --heads 4 --layers 2 --causal --steps weights,context --head 1,3
run toy-files "$S" --heads 2 --html $W/page.html --svg $W/maps.svg --save-trace $W/t.safetensors
run toy-npz "$S" --heads 2 --causal --save-trace $W/t.npz --names transformer-lens
run toy-weights "$S" --heads 2 --save-weights $W/w.safetensors --steps none
run toy-ablate "$S" --heads 2 --layers 2 --ablate 1.1 --format json
run toy-ablate-mean "$S" --heads 2 --layers 2 --ablate 0.0,1.1 --ablate-mode mean --steps context
run toy-knockout "$S" --heads 2 --layers 2 --knockout '0.1:5->2' --knockout '1:6->small' --steps weights
run toy-focus-explain "$S" --heads 2 --focus feet --explain
run toy-stats "$S" --heads 4 --causal --stats --rollout --steps none
run llama-induction --model $L --stats --induction 6 --steps none
run toy-query-tile "$S" --heads 4 --layers 2 --causal --stats --query-tile 3 --steps output
run toy-lm-lens "$S" --causal --lm-head own --heads 2 --lens --steps none
run toy-attribute "the cat sat on the mat" --causal --lm-head own --attribute --steps tokens
run toy-generate "my shoes are" --causal --lm-head tied --heads 2 --max-len 16 --generate 4 --steps none
run toy-params "$S" --heads 2 --layer 0 --params --steps none
run toy-batch --batch $SW/batch.txt --heads 2 --causal --format json
run toy-batch-files --batch $SW/batch.txt --heads 2 --html $W/batch.html --svg $W/batch.svg --steps none
run toy-batch-jsonl --batch $SW/batch.txt --format jsonl --steps output
run toy-refuse-ablate "$S" --ablate 3.0
run schema schema

# GPT-2.
run gpt2-table "$S" --model $G
run gpt2-json "$S" --model $G --format json
run gpt2-jsonl "$S" --model $G --format jsonl --steps weights,logits
run gpt2-files "$S" --model $G --html $W/page.html --svg $W/maps.svg --save-trace $W/t.npz --steps none
run gpt2-tl "$S" --model $G --save-trace $W/t.safetensors --names transformer-lens --steps none
run gpt2-ablate "$S" --model $G --ablate 1.2 --format json --steps context
run gpt2-ablate-mean "$S" --model $G --ablate 1.2 --ablate-mode mean --steps context,logits
run gpt2-knockout "$S" --model $G --knockout '0.1:5->2' --knockout '1:6->small' --steps weights
run gpt2-steer "$S" --model $G --steer 1:$VG@2 --format json --steps output
run gpt2-steer-from "$CLEAN" --model $G --steer-from Love Hate --at-layer 1 --alpha 2 --generate 3 --ignore-eos
run gpt2-patch-heads "$CLEAN" --model $G --patch "$CORRUPT" --metric " big" " small"
run gpt2-patch-json "$CLEAN" --model $G --patch "$CORRUPT" --metric " big" " small" --format json --steps none
run gpt2-patch-resid "$CLEAN" --model $G --patch "$CORRUPT" --metric " big" " small" --patch-what resid
run gpt2-patch-heatmap "$CLEAN" --model $G --patch "$CORRUPT" --metric " big" " small" --format heatmap --color never
run gpt2-patch-attribution "$CLEAN" --model $G --patch "$CORRUPT" --metric " big" " small" --patch-method attribution --steps tokens --width 200
run gpt2-patch-attribution-json "$CLEAN" --model $G --patch "$CORRUPT" --metric " big" " small" --patch-method attribution --format json --steps none
run gpt2-patch-path-q "$CLEAN" --model $G --patch "$CORRUPT" --metric " big" " small" --patch-path 1.1:q --steps tokens --width 200
run gpt2-patch-path-logits "$CLEAN" --model $G --patch "$CORRUPT" --metric " big" " small" --patch-path logits --format heatmap --color never
run gpt2-patch-files "$CLEAN" --model $G --patch "$CORRUPT" --metric " big" " small" --html $W/p.html --svg $W/p.svg --steps none
run gpt2-attribute "$CLEAN" --model $G --attribute " big" " small"
run gpt2-attribute-json "$CLEAN" --model $G --attribute " big" " small" --format json --steps none
run gpt2-lens "$S" --model $G --lens --lens-track " big" --steps none
run gpt2-explain "$S" --model $G --focus feet --explain --layer 1
run gpt2-generate "$CLEAN" --model $G --generate 4 --ignore-eos --format json --steps logits
run gpt2-generate-attribute "$CLEAN" --model $G --generate 3 --ignore-eos --attribute --at gen:1 --steps none
run gpt2-generate-html "$CLEAN" --model $G --generate 3 --ignore-eos --html $W/g.html --steps none
run gpt2-refuse-check "$S" --model $G --check
run gpt2-query-tile "$S" --model $G --stats --query-tile 2 --steps output --head 0,3
run gpt2-batch --batch $SW/batch-gpt2.txt --model $G --format json --steps logits
run gpt2-refuse-patch-path "$CLEAN" --model $G --patch "$CORRUPT" --metric " big" " small" --patch-path 0.1:q

# Llama with grouped-query attention.
run llama-table "$S" --model $L
run llama-json "$S" --model $L --format json --steps weights,logits
run llama-ablate "$S" --model $L --ablate 1.2 --ablate-mode mean --knockout '1.0:6->2' --steps context
run llama-steer "$S" --model $L --steer "1:$VL@-2.5@3" --format json --steps output
run llama-patch "$CLEAN" --model $L --patch "$CORRUPT" --metric " big" " small" --format json --steps none
run llama-patch-attribution "$CLEAN" --model $L --patch "$CORRUPT" --metric " big" " small" --patch-method attribution --steps none
run llama-patch-path "$CLEAN" --model $L --patch "$CORRUPT" --metric " big" " small" --patch-path 1.0:v --steps none
run llama-attribute "$CLEAN" --model $L --attribute " big" " small" --format json --steps none
run llama-lens "$S" --model $L --lens --steps none
run llama-generate "$CLEAN" --model $L --generate 4 --ignore-eos --steps logits
run llama-check "$S" --model $L --check --format json --steps none
run llama-tiles "$S" --model $L --query-tile 3 --stats --steps none

# Gemma 2.
run gemma2-table "$S" --model $GEM
run gemma2-json "$S" --model $GEM --format json --steps all,logits
run gemma2-attribute "my shoes are" --model $GEM --attribute " big" " small" --steps none
run gemma2-ablate "$S" --model $GEM --ablate 0.1 --knockout '1:4->1' --format jsonl --steps context,weights
run gemma2-patch "$CLEAN" --model $GEM --patch "$CORRUPT" --metric " big" " small" --steps none
run gemma2-generate "$CLEAN" --model $GEM --generate 3 --ignore-eos --steps none

# Mixtures of experts.
run mixtral-json "$S" --model $MIX --format json --steps ffn.router.weights,logits
run mixtral-ablate-expert "$S" --model $MIX --ablate-expert 0.0,0.1 --format json --steps logits
run mixtral-attribute "$CLEAN" --model $MIX --attribute " big" " small" --steps none
run qwen2moe-table "$S" --model $QMOE --steps ffn.router.weights,logits
run qwen2moe-ablate-expert "$S" --model $QMOE --ablate-expert 1.0 --steps logits
run moe-refuse "$S" --model $L --ablate-expert 0.0

# Encoder–decoders.
run t5-target "my shoes are small" --model $T5 --target "the shoes" --format json --steps all,logits
run t5-ablate "my shoes are small" --model $T5 --target "the shoes" --ablate enc.0.1,cross.1.0 --steps weights
run t5-generate "my shoes are small" --model $T5 --generate 3 --steps cross_attn.weights
run t5-html "my shoes are small" --model $T5 --target "the shoes" --html $W/t5.html --svg $W/t5.svg --steps none
run bart-target "my shoes are small" --model $BART --target "the shoes" --format json --steps weights,logits
run bart-generate "my shoes are small" --model $BART --generate 3 --stack encoder --format heatmap --color never
run t5-refuse "my shoes" --model $T5 --ablate 0.1

# BERT.
run bert-pair "my shoes are small." "my feet are big." --model $BERT --format json
run bert-patch "my shoes are small." --model $BERT --patch "my feet are big."
run mlm-attribute "my [MASK] is small." --model $MLM --attribute feet --steps none
run mlm-check "my [MASK] is small." --model $MLM --check

# Chat templates.
run qwen2-chat "Hi" --model $QWEN --chat --steps tokens
run qwen2-chat-generate "Hi" --model $QWEN --chat --system "Be brief." --generate 3 --ignore-eos --steps none

# GGUF and llama.cpp's arithmetic.
run gguf-table "Hello world" --model $TG --steps logits
run gguf-ggml "The capital of France is" --model $TG --arithmetic ggml --format json --steps logits
run gguf-ggml-generate "Hello" --model $TG --arithmetic ggml --generate 3 --ignore-eos --steps ids -q
run gguf-f32-ablate "Hello world" --model $TGF --ablate 0.1 --steps context
smol smol-table "The capital of France is" --model $SMOL --steps none
smol smol-json "The capital of France is" --model $SMOL --format json --steps logits --layer 0 --head 0
smol smol-ggml "Paris" --model $SMOL --arithmetic ggml --steps logits
smol smol-generate "The capital of France is" --model $SMOL --generate 3 --steps none
smol smol-chat "Hi" --model $SMOL --chat --generate 3 --steps none
smol smol-attribute "The capital of France is" --model $SMOL --attribute " Paris" " London" --steps none
smol smol-lens "The capital of France is" --model $SMOL --lens --lens-track " Paris" --layer 29 --steps none

# compare and diff.
run compare-gguf compare "Hello world" --model $TG --model $TGF --format json
run compare-tuned compare "$S" --model $L --model fixtures/compare/llama-gqa-tuned
run compare-heatmap compare "$S" --model $L --model fixtures/compare/llama-gqa-tuned --format heatmap --color never
run compare-files compare "$S" --model $L --model fixtures/compare/llama-gqa-tuned --html $W/c.html --svg $W/c.svg
run diff diff fixtures/compare/traces/a.json fixtures/compare/traces/a.json

rm -rf "$W"
END=$(date +%s.%N)
echo "$N commands in $(echo "$END - $START" | bc) s into $OUT"
