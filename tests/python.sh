#!/usr/bin/env bash
# The Python wheel (docs/PYTHON.md): builds it with maturin in the dev profile, which reuses
# the dependencies `cargo test` compiled (same target folder and profile), installs it into a
# venv under .cache/ (made from python/tests/requirements.txt, once), checks that it imports
# with no Rust toolchain on PATH, then runs pytest: the API against the command and PyTorch's
# oracle fixtures, the wheel's `attn-trace` command against the binary, and the example
# notebook executed headless (nbclient). ATTN_TRACE_PY_VENV puts the venv elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${ATTN_TRACE_PY_VENV:-.cache/py-venv}
req=python/tests/requirements.txt
if ! cmp -s "$req" "$venv/requirements.txt" 2>/dev/null; then
  echo "python: building $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  cp "$req" "$venv/requirements.txt"
fi

cargo build --locked -q   # the binary the API is compared with
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
"$venv/bin/maturin" build --quiet --locked --profile dev --out "$wheels" --interpreter "$venv/bin/python"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheels"/attn_trace-*.whl
# The wheel needs no toolchain: import it with a PATH that has no cargo or rustc.
env -i PATH=/usr/bin:/bin HOME="$HOME" "$venv/bin/python" -c \
  'import attn_trace; assert attn_trace.trace("my shoes are small", heads=2).steps["layers.0.attn.weights"].shape == (2, 4, 4)'
ATTN_TRACE_ARTIFACTS=${ATTN_TRACE_ARTIFACTS:-.cache/artifacts} "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
