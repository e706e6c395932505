"""examples/testing is what users copy: it must stay green."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
