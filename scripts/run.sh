#!/usr/bin/env bash
# Install and start a single-node broker on 127.0.0.1:9092 with data in ./moldau-data.
# Extra arguments go to `moldau server` (e.g. -o num.partitions=6).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh run
exec "${PYTHON:-python3}" -m moldau server \
  -o listeners=PLAINTEXT://127.0.0.1:9092 -o log.dirs=./moldau-data "$@"
