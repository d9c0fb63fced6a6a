#!/usr/bin/env bash
# Set everything up and run the detector on the bundled sample corpus of rental listings,
# printing verdicts as they are produced and a summary at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh test
mkdir -p .cache/demo
.venv/bin/stream-dedup dedup examples/listings.jsonl --output .cache/demo/verdicts.jsonl "$@"
echo "verdicts: .cache/demo/verdicts.jsonl; the first duplicates found:"
grep '"duplicate"' .cache/demo/verdicts.jsonl | head -n 10
