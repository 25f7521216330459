#!/usr/bin/env bash
# Every finite f32, formatted by vendor/zmij and by zmij 1.0.23 from crates.io: must match.
set -euo pipefail
cd "$(dirname "$0")"
cargo run --release --quiet
