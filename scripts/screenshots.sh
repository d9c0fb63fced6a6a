#!/usr/bin/env bash
# Regenerate the README's pictures from real runs, never by hand:
#
#   docs/images/status-page.png  the status page of a worker that judged the bundled sample
#                                corpus (rental listings with re-posted near-copies) fed at
#                                a changing rate through a local Kafka broker
#   docs/images/report.png       the report of `stream-dedup dedup --report` on that corpus
#   docs/images/s-curve.svg      `stream-dedup params --sample` on that corpus, `--plot`
#
# Takes about three minutes (the page's charts need a couple of minutes of samples).
# Everything it starts is stopped at the end; its scratch files are in .cache/screenshots.
#   SCREENSHOTS_PORT (default 9192) broker port, SCREENSHOTS_METRICS_PORT (default 9401).
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${SCREENSHOTS_PORT:-9192}
METRICS_PORT=${SCREENSHOTS_METRICS_PORT:-9401}
BOOTSTRAP="127.0.0.1:$PORT"
WORK=.cache/screenshots
IMAGES=docs/images
SAMPLE=stream_dedup/samples/listings.jsonl

scripts/setup.sh test
scripts/install-chromium.sh
scripts/kafka/broker.sh fetch
mkdir -p "$WORK" "$IMAGES"

shoot() {  # shoot URL FILE WIDTH,HEIGHT
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$WORK/chromium" \
        --screenshot="$2" --window-size="$3" "$1" >>"$WORK/chromium.log" 2>&1
    echo "wrote $2"
}

# 1. The offline pictures.
.venv/bin/stream-dedup dedup "$SAMPLE" --output "$WORK/verdicts.jsonl" --report "$WORK/report.html"
shoot "file://$PWD/$WORK/report.html" "$IMAGES/report.png" 1280,1150
.venv/bin/stream-dedup params --sample "$SAMPLE" --plot "$IMAGES/s-curve.svg" >/dev/null
echo "wrote $IMAGES/s-curve.svg"

# 2. A live worker's status page.
rm -rf "$WORK/kafka" "$WORK/snapshots"
scripts/kafka/broker.sh stop --data "$WORK/kafka" >/dev/null 2>&1 || true
scripts/kafka/broker.sh start --port "$PORT" --data "$WORK/kafka" >/dev/null
worker_pid=
cleanup() {
    if [[ -n "$worker_pid" ]] && kill -0 "$worker_pid" 2>/dev/null; then
        kill -TERM "$worker_pid"; wait "$worker_pid" || true
    fi
    scripts/kafka/broker.sh stop --data "$WORK/kafka" >/dev/null
}
trap cleanup EXIT
.venv/bin/stream-dedup produce-sample --bootstrap-servers "$BOOTSTRAP" --topic documents --count 0
.venv/bin/stream-dedup run --bootstrap-servers "$BOOTSTRAP" --snapshot-dir "$WORK/snapshots" \
    --metrics-port "$METRICS_PORT" --snapshot-interval-seconds 20 --log-format json --instance-id screenshots \
    >"$WORK/worker.log" 2>&1 &
worker_pid=$!

# The sample once, at a rate that changes every 30 s (documents per second, seconds), so
# that the charts have a shape: about two minutes.
.venv/bin/python - "$BOOTSTRAP" "$SAMPLE" <<'PY'
import json, sys, time
from kafka import KafkaProducer

bootstrap, sample = sys.argv[1:]
documents = [json.loads(line) for line in open(sample, encoding="utf-8") if line.strip()]
producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
sent = 0
for rate, seconds in ((2.0, 30), (5.0, 30), (1.0, 30), (4.0, float("inf"))):
    started = time.monotonic()
    while time.monotonic() - started < seconds and sent < len(documents):
        document = documents[sent]
        producer.send("documents", key=document["id"].encode(), value=json.dumps(document).encode())
        producer.flush()
        sent += 1
        time.sleep(1.0 / rate)
producer.close()
print(f"fed {sent} documents", file=sys.stderr)
PY
sleep 12  # two more samples: the last batches show in the charts
shoot "http://127.0.0.1:$METRICS_PORT/" "$IMAGES/status-page.png" 1280,1100
