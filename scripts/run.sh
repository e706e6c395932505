#!/usr/bin/env bash
# Install (into the checkout's virtualenv .venv, once: scripts/setup.sh) and start a
# single-node broker on 127.0.0.1:9092 with data in ./moldau-data, configured by
# config/server.properties. Extra arguments go to `moldau server` (e.g. -o num.partitions=6).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh run
exec .venv/bin/python -m moldau server --config config/server.properties "$@"
