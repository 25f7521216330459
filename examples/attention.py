"""A transformer encoder in numpy, checked against attn-trace.

Reads the parameters attn-trace saved with --save-weights (docs/TOY.md, "Weight files") and
writes this implementation's own trace as a JSON object of named tensors, using attn-trace's
step ids. `attn-trace diff mine.json reference.json` then says whether, and where, the two
computations part ways. The settings (heads, layers, causal mask, scale, eps) and the input
(token ids) come from the file's metadata, so nothing is repeated on the command line and no
tokenizer is re-implemented. Post-norm, ReLU, learned positions: attn-trace's defaults.

    python3 attention.py --weights w.safetensors > mine.json
"""
import argparse, json, sys
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--weights", required=True)
p.add_argument("--broken", action="store_true", help="forget to scale the scores (to see diff fail)")
args = p.parse_args()

# safetensors is an 8-byte header length, a JSON header, then the raw little-endian data.
# The header's "__metadata__" is what safetensors.safe_open(path, "np").metadata() returns:
# attn-trace's settings and input, every value a string.
raw = open(args.weights, "rb").read()
n = int.from_bytes(raw[:8], "little")
header = json.loads(raw[8 : 8 + n])
W = {k: np.frombuffer(raw[8 + n + v["data_offsets"][0] : 8 + n + v["data_offsets"][1]], np.float32).reshape(v["shape"])
     for k, v in header.items() if k != "__metadata__"}
meta = header["__metadata__"]
assert meta["format"] == "attn-trace-weights", "not a file written by attn-trace --save-weights"
for key, want in [("norm", "post"), ("activation", "relu"), ("positions", "learned"), ("rms_norm", "false"),
                  ("gated_ffn", "false"), ("lm_head", "none")]:
    if meta[key] != want:
        sys.exit(f"attention.py implements {key} {want}; the file has {meta[key]}")
n_heads, n_layers = int(meta["heads"]), int(meta["layers"])
scale, eps, causal = float(meta["scale"]), float(meta["eps"]), meta["causal"] == "true"
ids = json.loads(meta["token_ids"])  # the tokens attn-trace's tokenizer gave

trace = {}
def record(name, x):
    trace[name] = np.asarray(x, np.float32).tolist()
    return x

def layer_norm(x, name):  # PyTorch's: biased variance; weight and bias from the file
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y * W.get(L + name + ".weight", 1) + W.get(L + name + ".bias", 0)

def linear(x, name):  # nn.Linear: x·Wᵀ + b (biases only where the file has them)
    return x @ W[L + name + ".weight"].T + W.get(L + name + ".bias", 0)

def heads(x):  # [pos, heads*d] -> [head, pos, d]
    return x.reshape(len(ids), n_heads, -1).transpose(1, 0, 2)

x = record("embed.sum", record("embed.token", W["embed.token.weight"][ids])
           + record("embed.position", W["embed.position.weight"][: len(ids)]))
for layer in range(n_layers):
    L = f"layers.{layer}."
    q = record(L + "attn.q", heads(linear(x, "attn.q_proj")))                  # [head, pos, d_k]
    k = record(L + "attn.k", heads(linear(x, "attn.k_proj")))
    v = record(L + "attn.v", heads(linear(x, "attn.v_proj")))
    raw_scores = record(L + "attn.raw_scores", q @ k.transpose(0, 2, 1))     # [head, query, key]
    scores = raw_scores * (1.0 if args.broken else scale)
    if causal:  # a query sees itself and the keys before it
        scores = np.where(np.triu(np.ones((len(ids), len(ids)), bool), 1), -np.inf, scores)
    scores = record(L + "attn.scores", scores)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    weights = record(L + "attn.weights", e / e.sum(-1, keepdims=True))        # rows sum to 1
    context = record(L + "attn.context", weights @ v)                         # [head, pos, d_v]
    concat = record(L + "attn.concat", context.transpose(1, 0, 2).reshape(len(ids), -1))
    attn_out = record(L + "attn.out", linear(concat, "attn.out_proj"))
    h = record(L + "add_norm1.out", layer_norm(record(L + "add_norm1.sum", x + attn_out), "norm1"))
    hidden = record(L + "ffn.hidden", linear(h, "ffn.linear1"))
    act = record(L + "ffn.act", np.maximum(hidden, 0))
    ffn_out = record(L + "ffn.out", linear(act, "ffn.linear2"))
    x = record(L + "add_norm2.out", layer_norm(record(L + "add_norm2.sum", h + ffn_out), "norm2"))
record("output", x)

# Masked scores are -inf, which Python's json writes as -Infinity (not strict JSON);
# attn-trace diff reads it as Python means it.
json.dump(trace, sys.stdout)
