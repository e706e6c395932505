"""Which seeds a seeded simulation test runs, and how a failing one is replayed alone."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


def seeds(share: int) -> Sequence[int]:
    """``MOLDAU_SIM_SEED`` alone (replaying a failure), else the first
    ``MOLDAU_SIM_EXAMPLES // share`` seeds (the suite's budget, this test's share of it)."""
    one = os.environ.get("MOLDAU_SIM_SEED")
    if one:
        return [int(one)]
    return range(int(os.environ.get("MOLDAU_SIM_EXAMPLES", "2000")) // share)


@contextmanager
def replay_hint(seed: int, test_file: str, error: type[AssertionError]) -> Iterator[None]:
    """Re-raise an ``error`` with the seed and the command that replays it alone."""
    try:
        yield
    except error as e:
        raise error(
            f"seed {seed}: {e}\nreplay: MOLDAU_SIM_SEED={seed} python3 -m pytest -q {test_file}"
        ) from e
