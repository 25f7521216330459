"""A transformer encoder layer in numpy, checked against attn-trace.

Reads the parameters attn-trace saved with --save-weights (README, "Weight files") and
writes this implementation's own trace as a JSON object of named tensors, using attn-trace's
step ids. `attn-trace diff mine.json reference.json` then says whether, and where, the two
computations part ways. Post-norm, ReLU, learned positions: attn-trace's defaults.

    python3 attention.py "my shoes are small" --weights w.safetensors --heads 2 > mine.json
"""
import argparse, json, sys
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("sentence")
p.add_argument("--weights", required=True)
p.add_argument("--heads", type=int, default=1)
p.add_argument("--broken", action="store_true", help="forget to scale the scores (to see diff fail)")
args = p.parse_args()

# safetensors is an 8-byte header length, a JSON header, then the raw little-endian data.
raw = open(args.weights, "rb").read()
n = int.from_bytes(raw[:8], "little")
header = json.loads(raw[8 : 8 + n])
W = {k: np.frombuffer(raw[8 + n + v["data_offsets"][0] : 8 + n + v["data_offsets"][1]], np.float32).reshape(v["shape"])
     for k, v in header.items() if k != "__metadata__"}

# attn-trace's toy tokenizer: delete commas, split on spaces, ids in order of first appearance.
words = args.sentence.replace(",", "").split()
vocab = {}
ids = [vocab.setdefault(w, len(vocab)) for w in words]

trace = {}
def record(name, x):
    trace[name] = np.asarray(x, np.float32).tolist()
    return x

def layer_norm(x, eps=1e-5):  # PyTorch's: biased variance, weight 1 and bias 0 here
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)

def heads(x):  # [pos, heads*d] -> [head, pos, d]
    return x.reshape(len(ids), args.heads, -1).transpose(1, 0, 2)

x = record("embed.sum", record("embed.token", W["embed.token.weight"][ids])
           + record("embed.position", W["embed.position.weight"][: len(ids)]))
L = "layers.0."
q = record(L + "attn.q", heads(x @ W[L + "attn.q_proj.weight"].T))              # [head, pos, d_k]
k = record(L + "attn.k", heads(x @ W[L + "attn.k_proj.weight"].T))
v = record(L + "attn.v", heads(x @ W[L + "attn.v_proj.weight"].T))
raw_scores = record(L + "attn.raw_scores", q @ k.transpose(0, 2, 1))         # [head, query, key]
scale = 1.0 if args.broken else 1 / np.sqrt(q.shape[-1])
scores = record(L + "attn.scores", raw_scores * scale)
e = np.exp(scores - scores.max(-1, keepdims=True))
weights = record(L + "attn.weights", e / e.sum(-1, keepdims=True))            # rows sum to 1
context = record(L + "attn.context", weights @ v)                             # [head, pos, d_v]
concat = record(L + "attn.concat", context.transpose(1, 0, 2).reshape(len(ids), -1))
attn_out = record(L + "attn.out", concat @ W[L + "attn.out_proj.weight"].T)
h = record(L + "add_norm1.out", layer_norm(record(L + "add_norm1.sum", x + attn_out)))
hidden = record(L + "ffn.hidden", h @ W[L + "ffn.linear1.weight"].T + W[L + "ffn.linear1.bias"])
act = record(L + "ffn.act", np.maximum(hidden, 0))
ffn_out = record(L + "ffn.out", act @ W[L + "ffn.linear2.weight"].T + W[L + "ffn.linear2.bias"])
record("output", record(L + "add_norm2.out", layer_norm(record(L + "add_norm2.sum", h + ffn_out))))

json.dump(trace, sys.stdout)
