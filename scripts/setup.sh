#!/usr/bin/env bash
# Create (or reuse) the project virtualenv in .venv and install the package with its test tools.
# Idempotent and quiet on repeat runs: pip only downloads what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
# Reinstall only when the dependency list changed since the last install.
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)-${1:-test}
if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[${1:-test}]"
    rm -f .venv/.installed-*
    touch "$stamp"
fi
