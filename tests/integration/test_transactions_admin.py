"""`moldau transactions` (ListTransactions, DescribeTransactions, DescribeProducers,
WriteTxnMarkers) against a broker with live transactions and a hanging one."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from moldau.cli.transactions import AdminError, TransactionsAdmin
from moldau.records.record import build_batch
from moldau.testing import BrokerProcess
from tests.integration.helpers import (
    PRODUCE_VERSION,
    RawClient,
    create_topic,
    init_producer_id,
    partition_results,
    produce_request,
)
from tests.integration.test_cli import failure, moldau
from tests.integration.txn_helpers import (
    DEADLINE_S,
    end_offsets,
    read_confluent,
    send_txn,
    txn_producer,
)


def as_json(broker: BrokerProcess, command: str) -> object:
    return json.loads(moldau(broker, f"transactions {command} --json").stdout)


def test_list_and_describe(broker: BrokerProcess, topic: str) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic, 3)
    done, open_ = txn_producer(bs, f"{topic}-done"), txn_producer(bs, f"{topic}-open")
    send_txn(done, topic, [(0, b"x")], commit=True)
    open_.begin_transaction()
    open_.produce(topic, value=b"y", partition=1)
    open_.produce(topic, value=b"z", partition=2)
    open_.flush(DEADLINE_S)

    listed = {t["transactional_id"]: t for t in as_json(broker, "list")}  # type: ignore[union-attr]
    assert listed[f"{topic}-open"]["state"] == "Ongoing"
    assert listed[f"{topic}-done"]["state"] in ("CompleteCommit", "PrepareCommit")
    ongoing = as_json(broker, "list --state Ongoing")
    assert f"{topic}-open" in [t["transactional_id"] for t in ongoing]  # type: ignore[union-attr]
    assert f"{topic}-done" not in [t["transactional_id"] for t in ongoing]  # type: ignore[union-attr]
    assert "unknown states: Bogus" in failure(broker, "transactions list --state Bogus")

    described = as_json(broker, f"describe {topic}-open")
    assert isinstance(described, dict)
    assert described["state"] == "Ongoing"
    assert described["partitions"] == [f"{topic}-1", f"{topic}-2"]
    assert described["producer_id"] == listed[f"{topic}-open"]["producer_id"]
    assert described["timeout_ms"] == 60000 and described["start_time_ms"] > 0
    text = moldau(broker, f"transactions describe {topic}-open").stdout
    assert "State: Ongoing" in text and f"{topic}-2" in text
    assert "TRANSACTIONAL_ID_NOT_FOUND" in failure(broker, "transactions describe nobody")

    producers = as_json(broker, f"describe-producers --topic {topic} --partition 1")
    assert isinstance(producers, list)
    (entry,) = producers
    assert entry["producer_id"] == described["producer_id"]
    assert entry["current_txn_start_offset"] == 0
    open_.commit_transaction(DEADLINE_S)


def test_abort_a_hanging_transaction(tmp_path: Path, topic: str) -> None:
    """A transactional batch no coordinator knows of (a leader without KIP-890
    verification, as before Kafka 3.6, takes it) holds the LSO until
    `transactions abort`."""
    with BrokerProcess(
        tmp_path / "broker", {"transaction.partition.verification.enable": "false"}
    ) as broker:
        hanging_transaction_aborted(broker, topic)


def hanging_transaction_aborted(broker: BrokerProcess, topic: str) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic, 1)
    with RawClient(bs) as raw:
        pid, epoch = init_producer_id(raw)
        batch = build_batch(
            [(None, b"hanging")], producer_id=pid, producer_epoch=epoch, base_sequence=0,
            is_transactional=True,
        )  # fmt: skip
        request = produce_request(topic, {0: batch})
        request.transactional_id = f"{topic}-ghost"  # never initialised: unknown to it
        response = raw.request(request, PRODUCE_VERSION)
        assert partition_results(response)[0].error_code == 0
    later = txn_producer(bs, f"{topic}-later")
    send_txn(later, topic, [(0, b"committed")], commit=True)
    assert end_offsets(bs, topic, 1, "read_committed") == {0: 0}
    assert "no open transaction starts at offset 5" in failure(
        broker, f"transactions abort --topic {topic} --partition 0 --start-offset 5"
    )
    out = moldau(broker, f"transactions abort --topic {topic} --partition 0 --start-offset 0")
    assert f"producer {pid}" in out.stdout
    deadline = time.monotonic() + DEADLINE_S
    while end_offsets(bs, topic, 1, "read_committed") != {0: 4}:  # 2 records + 2 markers
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert read_confluent(bs, topic, 1, "read_committed") == {0: [b"committed"]}
    assert read_confluent(bs, topic, 1, "read_uncommitted") == {0: [b"hanging", b"committed"]}


def test_idle_transactional_ids_expire(tmp_path: Path, topic: str) -> None:
    """transactional.id.expiration.ms after its last transaction an id is forgotten
    (a tombstone in __transaction_state); the next producer with it starts afresh."""
    with BrokerProcess(
        tmp_path / "broker",
        {
            "transactional.id.expiration.ms": "1500",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "300",
        },
    ) as broker:
        bs = broker.bootstrap
        create_topic(bs, topic, 1)
        tid = f"{topic}-id"
        send_txn(txn_producer(bs, tid), topic, [(0, b"x")], commit=True)
        first = asyncio.run(describe(bs, tid))
        assert first["state"] in ("CompleteCommit", "PrepareCommit")
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                asyncio.run(describe(bs, tid))
            except AdminError as e:
                assert "TRANSACTIONAL_ID_NOT_FOUND" in str(e)
                break
            assert time.monotonic() < deadline, "the idle transactional id never expired"
            time.sleep(0.2)
        send_txn(txn_producer(bs, tid), topic, [(0, b"y")], commit=True)
        again = asyncio.run(describe(bs, tid))
        assert again["producer_id"] != first["producer_id"] and again["producer_epoch"] == 0


async def describe(bs: str, tid: str) -> dict[str, Any]:
    admin = TransactionsAdmin(bs)
    try:
        return await admin.describe(tid)
    finally:
        admin.close()
