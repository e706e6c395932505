"""examples/testing is what users copy: it must stay green."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples" / "testing"


def test_the_example_test_modules_pass() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "."],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    passed = [line for line in result.stdout.splitlines() if line.startswith("PASSED")]
    assert len(passed) == 7, result.stdout[-4000:]


@pytest.mark.slow
def test_a_fresh_virtualenv_needs_only_pip_install(tmp_path: Path) -> None:
    """The issue's promise: `pip install <checkout> pytest confluent-kafka` and nothing else."""
    checkout = Path(__file__).parents[2]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", str(checkout), "pytest", "confluent-kafka"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert install.returncode == 0, install.stderr[-4000:]
    result = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "test_orders_confluent.py"],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert sum(line.startswith("PASSED") for line in result.stdout.splitlines()) == 4
