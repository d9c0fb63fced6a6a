#!/usr/bin/env bash
# The main job on an embedded default: set up .venv, start a local Kafka broker (Apache's
# jars, KRaft, 127.0.0.1), run the worker, feed it the bundled sample corpus (rental
# listings with re-posted near-copies), show the first duplicates as they are committed,
# then a summary: documents, duplicates, dead letters, throughput, latency, example pairs
# side by side, and where to look next. On a terminal the worker then keeps running until
# Enter, so that its status page and metrics can be looked at; everything is stopped at
# the end. Each run starts from an empty broker and index in .cache/demo, so that what it
# shows is this run's verdicts (the data stays there afterwards, to look at).
#   DEMO_PORT (default 9092) broker port, DEMO_METRICS_PORT (default 9400) metrics port.
#   Extra arguments go to `stream-dedup run` (e.g. --threshold 0.9).
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${DEMO_PORT:-9092}
METRICS_PORT=${DEMO_METRICS_PORT:-9400}
DEMO=.cache/demo
# Settings every stream-dedup command below takes (run, produce-sample and watch alike).
export STREAM_DEDUP_BOOTSTRAP_SERVERS="127.0.0.1:$PORT" STREAM_DEDUP_METRICS_PORT="$METRICS_PORT"

scripts/setup.sh test
scripts/kafka/broker.sh fetch
mkdir -p "$DEMO"
scripts/kafka/broker.sh stop --data "$DEMO/kafka" >/dev/null 2>&1 || true
rm -rf "$DEMO/kafka" "$DEMO/snapshots"
scripts/kafka/broker.sh start --port "$PORT" --data "$DEMO/kafka" >/dev/null
worker_pid=
cleanup() {
    if [[ -n "$worker_pid" ]] && kill -0 "$worker_pid" 2>/dev/null; then
        kill -TERM "$worker_pid"; wait "$worker_pid" || true
    fi
    scripts/kafka/broker.sh stop --data "$DEMO/kafka" >/dev/null
}
trap cleanup EXIT
echo "Kafka broker on $STREAM_DEDUP_BOOTSTRAP_SERVERS (data in $DEMO/kafka)"

# The input topic with 3 partitions; the worker creates the verdict, dead-letter and changelog topics.
.venv/bin/stream-dedup produce-sample --topic documents --count 0

.venv/bin/stream-dedup run --snapshot-dir "$DEMO/snapshots" --log-format json --instance-id demo "$@" \
    >"$DEMO/worker.log" 2>&1 &
worker_pid=$!
echo "worker started (pid $worker_pid, log $DEMO/worker.log)"
# Ready (its /readyz answers) before anything is fed; a worker that stopped says why.
until .venv/bin/python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$METRICS_PORT/readyz', timeout=1)" \
    2>/dev/null; do
    if ! kill -0 "$worker_pid" 2>/dev/null; then
        echo "the worker stopped; the end of its log ($DEMO/worker.log):" >&2
        tail -n 3 "$DEMO/worker.log" >&2
        exit 1
    fi
    sleep 0.5
done

.venv/bin/stream-dedup produce-sample --topic documents --count 600 --rate 200 2>>"$DEMO/producer.log" &
echo "feeding 600 sample listings at 200/s; the first duplicates as they are committed:"
echo
.venv/bin/stream-dedup watch --format text --duplicates-only --max-lines 10 --dead-letters --summary \
    --count 600 --idle-seconds 30
wait %2 2>/dev/null || true

if [[ -t 0 && -t 1 ]]; then
    echo
    read -r -p "The worker keeps running, so the links above work. Press Enter to stop everything. " _ || true
fi
