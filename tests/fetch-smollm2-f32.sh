#!/usr/bin/env bash
# Make SmolLM2's F32 twin available at
# <repo>/.cache/models/smollm2/SmolLM2-135M-Instruct.F32.gguf: every tensor of the Q4_1 file
# (tests/fetch-smollm2.sh) dequantized by the `gguf` package, every metadata key kept
# (fixtures/compare/dequantize_gguf.py). The real-model test of `attn-trace compare` and the
# example of docs/COMPARE.md set the two side by side.
#
# Idempotent: an existing twin newer than its source is kept. The script needs gguf and
# numpy: $PYTHON when it has them (default python3), else a virtualenv made once under
# .cache/gguf-venv with the versions of fixtures/oracle/requirements-gguf.txt.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$REPO_ROOT/.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEST="$REPO_ROOT/.cache/models/smollm2/SmolLM2-135M-Instruct.F32.gguf"
PYTHON="${PYTHON:-python3}"

if [[ ! -f "$SRC" ]]; then
    bash "$REPO_ROOT/tests/fetch-smollm2.sh"
fi
if [[ -f "$DEST" && "$DEST" -nt "$SRC" ]]; then
    echo "SmolLM2 F32 twin already present at $DEST"
    exit 0
fi
if ! "$PYTHON" -c 'import gguf, numpy' 2>/dev/null; then
    VENV="$REPO_ROOT/.cache/gguf-venv"
    if ! "$VENV/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
        echo "fetch-smollm2-f32.sh: making $VENV (gguf, numpy)" >&2
        "$PYTHON" -m venv "$VENV"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check gguf==0.19.0 numpy==2.1.3 >&2
    fi
    PYTHON="$VENV/bin/python"
fi
"$PYTHON" "$REPO_ROOT/fixtures/compare/dequantize_gguf.py" "$SRC" "$DEST"
echo "SmolLM2 F32 twin ready at $DEST"
