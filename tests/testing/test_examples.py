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


README = Path(__file__).parents[2] / "README.md"


def _readme_snippets() -> list[str]:
    """The README's Python blocks that run Moldau through `moldau.testing`."""
    blocks = README.read_text().split("```python\n")[1:]
    return [b.split("```", 1)[0] for b in blocks if "from moldau.testing import" in b]


@pytest.mark.slow
@pytest.mark.parametrize("snippet", _readme_snippets(), ids=lambda s: s.split("\n")[0])
def test_readme_snippets_run_as_written(snippet: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", snippet], capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, snippet + result.stderr[-4000:]


def test_the_readme_has_the_broker_and_the_cluster_snippets() -> None:
    assert [s.split("\n")[0] for s in _readme_snippets()] == [
        "from moldau.testing import broker",
        "from moldau.testing import cluster",
    ]
