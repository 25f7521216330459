#!/usr/bin/env bash
# Checks examples/attention.py against attn-trace, as a course's CI would: a numpy encoder
# built from attn-trace's saved weights and their metadata (settings and token ids) must match
# attn-trace's trace (diff exits 0), and a deliberately broken one must not (diff exits 1,
# naming attn.scores first, with the hint that the scores were not divided by √d_k). Then
# checks docs/DIFF.md's one-liners that load a --save-trace file in Python.
# Needs python3 (a venv with numpy and safetensors is made under .cache/) and cargo.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.cache/venv-examples
[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check numpy safetensors
PY="$VENV/bin/python"
cargo build --quiet --locked
ATTN=target/debug/attn-trace
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT

S="my shoes are small, my feet are big."
# The weights file carries the settings and the input: attention.py reads them from its metadata.
"$ATTN" "$S" --heads 2 --layers 2 --causal --save-weights "$T/w.safetensors" --format json > "$T/reference.json"

echo "== examples/attention.py matches attn-trace"
"$PY" examples/attention.py --weights "$T/w.safetensors" > "$T/mine.json"
"$ATTN" diff "$T/mine.json" "$T/reference.json"

echo "== the weights file alone reproduces the reference trace"
"$ATTN" --weights "$T/w.safetensors" --format json > "$T/again.json"
"$PY" - "$T" <<'PY'
import json, sys
a, b = (json.load(open(f"{sys.argv[1]}/{n}.json")) for n in ("reference", "again"))
assert a["input"] == b["input"] and a["steps"] == b["steps"], "the file alone gives another trace"
PY

echo "== a broken implementation does not (diff exits 1)"
"$PY" examples/attention.py --weights "$T/w.safetensors" --broken > "$T/broken.json"
status=0
"$ATTN" diff "$T/broken.json" "$T/reference.json" > "$T/report.txt" || status=$?
if [[ $status -ne 1 ]] || ! grep -q "^first divergence: layers.0.attn.scores " "$T/report.txt" \
    || ! grep -q "^hint: .*not divided by √d_k" "$T/report.txt"; then
    cat "$T/report.txt"
    echo "examples/check.sh: expected exit 1 at layers.0.attn.scores with a scale hint, got exit $status" >&2
    exit 1
fi
head -7 "$T/report.txt"

echo "== docs/DIFF.md's one-liners load --save-trace files with the JSON's numbers"
"$ATTN" "$S" --heads 2 --causal --save-trace "$T/t.npz" --format json > "$T/t.json"
"$ATTN" "$S" --heads 2 --causal --save-trace "$T/t.safetensors" > /dev/null
"$PY" - "$T" <<'PY'
import json, sys
import numpy, safetensors, safetensors.numpy
t = sys.argv[1]
w = numpy.load(f"{t}/t.npz")["layers.0.attn.weights"]  # docs/DIFF.md's one-liners
st = safetensors.numpy.load_file(f"{t}/t.safetensors")
npz = numpy.load(f"{t}/t.npz")
assert w.dtype == numpy.float32 and w.shape == (2, 8, 8)
doc = json.load(open(f"{t}/t.json"))
for s in doc["steps"]:
    if s["id"] == "tokens":
        with safetensors.safe_open(f"{t}/t.safetensors", "np") as f:  # tokens: metadata in safetensors
            assert list(npz["tokens"]) == s["values"] == json.loads(f.metadata()["tokens"])
        continue
    want = numpy.array(s["values"], dtype=npz[s["id"]].dtype)  # "-inf" strings parse as floats
    for got in (npz[s["id"]], st[s["id"]]):
        assert got.shape == tuple(s["shape"]) and numpy.array_equal(got, want), s["id"]
print(f"{len(doc['steps'])} steps: npz and safetensors hold the JSON's numbers")
PY
echo "examples: all checks passed"
