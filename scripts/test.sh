#!/usr/bin/env bash
# Set everything up and run the tests: the README's test command, and what CI runs.
# Extra arguments go to pytest (e.g. `scripts/test.sh -m long` for the long runs).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh test
# promtool, the Kubernetes schema validator, hadolint, compose: tests/deploy runs them.
scripts/validate-deploy.sh --install
# Headless Chromium: the status page, the S-curve plot and the report are tested rendered.
scripts/install-chromium.sh
# The Kafka tests start a real broker from Apache's jars unless KAFKA_BOOTSTRAP_SERVERS
# is set or a Docker engine answers; fetch the jars up front so a failure says so clearly.
if [ -z "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
    scripts/kafka/broker.sh fetch
fi
.venv/bin/ruff check stream_dedup tests benchmarks
.venv/bin/mypy stream_dedup
if [ "$#" -eq 0 ]; then
    set -- -m "not long"
fi
.venv/bin/python -m pytest "$@"
