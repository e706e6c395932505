"""Every client reads a tiered topic from offset 0: one broker on the ``file`` remote
storage manager, one topic produced once in many small segments, most of which have left
the disk; aiokafka, kcat and the Java client each read the whole log back, record for
record at the acknowledged offsets."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.testing import broker
from moldau.testing.process import BrokerProcess
from tests.integration.helpers import (
    Acked,
    Consumed,
    Rec,
    assert_log_matches,
    chunks,
    consume_aiokafka,
    consume_kcat,
    produce_confluent,
)
from tests.integration.test_clients import records_for
from tests.java.client import JavaClient
from tests.tiered.test_tiered_broker import TIERED, file_tier_configs, local_bases, wait_for

TOPIC = "tiered-clients"
N_RECORDS = 600


@pytest.fixture(scope="module")
def tiered_log(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[BrokerProcess, list[Rec], Acked]]:
    """The broker and the topic's records, the older ones only in the remote tier."""
    remote = tmp_path_factory.mktemp("remote")
    with broker(**file_tier_configs(remote, 1)) as b:
        b.create_topic(TOPIC, 1, **{k.replace(".", "_"): v for k, v in TIERED.items()})
        records = [
            Rec(r.key, r.value, r.headers, partition=0)
            for r in records_for("kcat", N_RECORDS, seed=20)
        ]
        acked: Acked = {}
        for chunk in chunks(records, 50):  # one batch each: many segments
            acked |= produce_confluent(b.bootstrap, TOPIC, chunk, "lz4")
        # copied, then gone from the disk: most of the log is remote only
        wait_for(lambda: local_bases(b, TOPIC)[0] > N_RECORDS // 2, "segments to leave the disk")
        assert any(Path(remote).rglob("*.log"))
        yield b, records, acked


def check(tiered_log: tuple[BrokerProcess, list[Rec], Acked], consumed: Consumed) -> None:
    _, records, acked = tiered_log
    assert_log_matches(records, consumed, acked=acked)


def test_aiokafka_reads_from_offset_0(tiered_log: tuple[BrokerProcess, list[Rec], Acked]) -> None:
    b = tiered_log[0]
    check(tiered_log, consume_aiokafka(b.bootstrap, TOPIC, {0: (0, N_RECORDS)}))


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_reads_from_offset_0(tiered_log: tuple[BrokerProcess, list[Rec], Acked]) -> None:
    check(tiered_log, consume_kcat(tiered_log[0].bootstrap, TOPIC))


def test_java_client_reads_from_offset_0(
    tiered_log: tuple[BrokerProcess, list[Rec], Acked], java: JavaClient
) -> None:
    check(tiered_log, java.consume(tiered_log[0].bootstrap, TOPIC))
