#!/usr/bin/env bash
# Install everything the tests need (scripts/setup.sh test: the .venv, PySpark, kcat, a JDK),
# then ruff, mypy and pytest from .venv. Extra arguments go to pytest (e.g. tests/unit -x).
# Without arguments (as CI runs it) a representative part of tests/spark (batch and streaming
# reads, exactly-once writes, restarts, read_committed) runs a second time on the oldest PySpark that
# moldau[spark] admits (.venv-spark-oldest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
PY=.venv/bin/python
"$PY" -m ruff check .
"$PY" -m mypy
status=0
"$PY" -m pytest -q -p no:cacheprovider "$@" || status=$?
if [ $# -eq 0 ]; then
  echo "test.sh: Spark tests on PySpark $(.venv-spark-oldest/bin/python -c 'import pyspark; print(pyspark.__version__)')"
  .venv-spark-oldest/bin/python -m pytest -q -p no:cacheprovider \
    tests/spark/test_read.py tests/spark/test_write.py -k "one_task_per_partition or \
      restart_from_checkpoint or read_committed or lands_once or (replayed_batch and exactly)" \
    || status=$?
fi
exit "$status"
