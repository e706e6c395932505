#!/usr/bin/env bash
# Renew requirements/constraints.txt: the newest releases pyproject.toml admits for
# moldau[test] (test and lint tools, PySpark, the console) and everything they pull in,
# resolved in a scratch virtualenv and pinned with `pip freeze`. scripts/setup.sh installs
# with these pins, so a new release of a tool reaches CI only through a commit of this file;
# run the tests before committing it. PYTHON=... picks the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$PY" -m venv "$scratch/venv"
"$scratch/venv/bin/python" -m pip install -q --disable-pip-version-check -e ".[test,spark]"
{
  echo "# Every package moldau[test] installs, pinned (scripts/refresh-constraints.sh)."
  echo "# Used by scripts/setup.sh as pip's -c; the ranges for users stay in pyproject.toml."
  "$scratch/venv/bin/python" -m pip freeze --exclude-editable --all \
    | grep -vE '^(pip|setuptools|wheel)=='
} >requirements/constraints.txt
echo "requirements/constraints.txt: $(grep -c '==' requirements/constraints.txt) pins"
