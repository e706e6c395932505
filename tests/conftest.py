"""Settings for the whole suite."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from tests.java.client import JavaClient, java_client

# Timing belongs to benchmarks: a loaded 2-core CI machine must not turn a slow example
# into a failure (hypothesis' default deadline is 200 ms per example).
settings.register_profile("moldau", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("moldau")


@pytest.fixture(scope="session")
def java() -> JavaClient:
    """The Kafka Java client's test driver, compiled once for the whole run."""
    client = java_client()
    if client is None:
        pytest.skip("no JDK found (javac): scripts/setup.sh test installs openjdk-17-jdk-headless")
    return client
