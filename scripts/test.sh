#!/usr/bin/env bash
# Install everything the tests need (Python deps, PySpark, kcat, a JDK) and run them.
# Extra arguments go to pytest (e.g. tests/unit -x).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
PY="${PYTHON:-python3}"
"$PY" -m ruff check .
"$PY" -m mypy
exec "$PY" -m pytest -q -p no:cacheprovider "$@"
