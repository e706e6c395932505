"""A real broker and one local Spark per test module; for the direct read of the remote
tier, a broker tiering to the module's `store`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from moldau.spark.session import local_session
from moldau.testing import BrokerProcess
from tests.spark.remote_tier import tiered_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("broker")) as running:
        yield running


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = local_session("moldau-tests", master="local[2]", shuffle_partitions=2)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def tiered(store: dict[str, str]) -> Iterator[BrokerProcess]:
    """A broker tiering a 2-partition topic to the module's `store` fixture (the remote
    storage manager's broker settings), its first segments only remote."""
    with tiered_broker(store) as b:
        yield b
