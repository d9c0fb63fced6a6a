#!/usr/bin/env bash
# The main job on an embedded default: set up .venv, start a local Kafka broker (Apache's
# jars, KRaft, 127.0.0.1), run the worker, feed it the bundled sample corpus (rental
# listings with re-posted near-copies), and show the verdicts as they are committed.
# Everything is stopped at the end; the broker's data stays in .cache/demo.
#   DEMO_PORT (default 9092) broker port, DEMO_METRICS_PORT (default 9400) metrics port.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${DEMO_PORT:-9092}
METRICS_PORT=${DEMO_METRICS_PORT:-9400}
BOOTSTRAP="127.0.0.1:$PORT"
DEMO=.cache/demo

scripts/setup.sh test
scripts/kafka/broker.sh fetch
mkdir -p "$DEMO"
scripts/kafka/broker.sh stop --data "$DEMO/kafka" >/dev/null 2>&1 || true
scripts/kafka/broker.sh start --port "$PORT" --data "$DEMO/kafka" >/dev/null
worker_pid=
cleanup() {
    if [[ -n "$worker_pid" ]] && kill -0 "$worker_pid" 2>/dev/null; then
        kill -TERM "$worker_pid"; wait "$worker_pid" || true
    fi
    scripts/kafka/broker.sh stop --data "$DEMO/kafka" >/dev/null
}
trap cleanup EXIT
echo "Kafka broker on $BOOTSTRAP (data in $DEMO/kafka)"

# The topics: documents in (3 partitions), verdicts and dead letters out. The worker
# creates its changelog topic itself.
.venv/bin/stream-dedup produce-sample --bootstrap-servers "$BOOTSTRAP" --topic documents --count 0

.venv/bin/stream-dedup run --bootstrap-servers "$BOOTSTRAP" --snapshot-dir "$DEMO/snapshots" \
    --metrics-port "$METRICS_PORT" --log-format json --instance-id demo "$@" >"$DEMO/worker.log" 2>&1 &
worker_pid=$!
echo "worker started (pid $worker_pid, log $DEMO/worker.log)"
echo "metrics: http://127.0.0.1:$METRICS_PORT/metrics  health: /healthz  readiness: /readyz"

.venv/bin/stream-dedup produce-sample --bootstrap-servers "$BOOTSTRAP" --topic documents --count 600 --rate 200 &
echo "feeding 600 sample listings at 200/s; verdicts as they are committed:"
.venv/bin/stream-dedup watch --bootstrap-servers "$BOOTSTRAP" --topic verdicts --count 600 --idle-seconds 30
wait %2 2>/dev/null || true

echo
echo "a few metrics from http://127.0.0.1:$METRICS_PORT/metrics:"
.venv/bin/python - "$METRICS_PORT" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode()
wanted = ("stream_dedup_documents_total{", "stream_dedup_indexed_documents ", "stream_dedup_role{",
          "stream_dedup_transactions_total{")
print("\n".join(line for line in text.splitlines() if line.startswith(wanted)))
PY
