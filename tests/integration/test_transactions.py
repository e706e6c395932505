"""Transactions end to end on one broker, with real clients.

Transactional producers (confluent-kafka, kafka-python, aiokafka) commit and abort
interleaved transactions across partitions; readers of every client then see exactly the
committed records under read_committed and everything under read_uncommitted. An open
transaction holds the last stable offset; fenced zombies, offsets committed in a
transaction, the transaction timeout and the coordinator's answers are checked too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.structs import OffsetAndMetadata as KpOffsetAndMetadata

from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from moldau.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from moldau.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from moldau.protocol.messages.end_txn_request import EndTxnRequest
from moldau.protocol.messages.init_producer_id_request import InitProducerIdRequest
from moldau.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
)
from moldau.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from moldau.records.record import build_batch
from moldau.testing import BrokerProcess
from tests.integration.helpers import (
    PRODUCE_VERSION,
    RawClient,
    create_topic,
    partition_results,
    produce_request,
)
from tests.integration.txn_helpers import (
    DEADLINE_S,
    READERS,
    by_partition,
    end_offsets,
    read_confluent,
    send_txn,
    txn_producer,
    values,
)

PARTITIONS = 3


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module; timed-out transactions are aborted within a second and
    transaction.max.timeout.ms is small enough to be exceeded by a client."""
    with BrokerProcess(
        tmp_path_factory.mktemp("txn-broker"),
        {
            "num.partitions": str(PARTITIONS),
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
            "transaction.max.timeout.ms": "120000",
        },
    ) as running:
        yield running


def test_interleaved_commits_and_aborts(txn_broker: BrokerProcess, topic: str) -> None:
    """Two transactional producers interleave transactions on every partition, and a
    plain producer writes between them: read_committed readers of all three clients see
    exactly the committed and plain records, in log order; read_uncommitted see all."""
    bs = txn_broker.bootstrap
    create_topic(bs, topic, PARTITIONS)
    a = txn_producer(bs, f"{topic}-a")
    b = txn_producer(bs, f"{topic}-b")
    plain = Producer({"bootstrap.servers": bs})
    committed: list[tuple[int, bytes]] = []
    everything: list[tuple[int, bytes]] = []
    for round_ in range(4):
        a.begin_transaction()
        b.begin_transaction()
        batch_a, batch_b = values(PARTITIONS, f"a{round_}", 9), values(PARTITIONS, f"b{round_}", 6)
        plain_batch = values(PARTITIONS, f"plain{round_}", 3)
        for (pa, va), (pb, vb) in zip(batch_a, batch_b + batch_b[:3], strict=True):
            a.produce(topic, value=va, partition=pa)
            a.flush(DEADLINE_S)
            b.produce(topic, value=vb, partition=pb)
            b.flush(DEADLINE_S)
        for pp, vp in plain_batch:
            plain.produce(topic, value=vp, partition=pp)
        plain.flush(DEADLINE_S)
        commit_a, commit_b = round_ % 2 == 0, round_ % 3 != 1
        (a.commit_transaction if commit_a else a.abort_transaction)(DEADLINE_S)
        (b.commit_transaction if commit_b else b.abort_transaction)(DEADLINE_S)
        sent_b = batch_b + batch_b[:3]
        # Log order per partition: a and b alternate (each flushed), then the plain ones.
        for ra, rb in zip(batch_a, sent_b, strict=True):
            everything += [ra, rb]
            committed += [r for r, ok in ((ra, commit_a), (rb, commit_b)) if ok]
        everything += plain_batch
        committed += plain_batch
    expected_committed, expected_all = (
        by_partition(PARTITIONS, committed),
        by_partition(PARTITIONS, everything),
    )
    for name, read in READERS.items():
        assert read(bs, topic, PARTITIONS, "read_committed") == expected_committed, name
        assert read(bs, topic, PARTITIONS, "read_uncommitted") == expected_all, name


def test_open_transaction_holds_the_last_stable_offset(
    txn_broker: BrokerProcess, topic: str
) -> None:
    bs = txn_broker.bootstrap
    create_topic(bs, topic, PARTITIONS)
    early, late = txn_producer(bs, f"{topic}-early"), txn_producer(bs, f"{topic}-late")
    send_txn(late, topic, [(0, b"before")], commit=True)  # offsets 0 and 1 (marker)
    early.begin_transaction()
    early.produce(topic, value=b"open", partition=0)  # offset 2: the LSO stops here
    early.flush(DEADLINE_S)
    send_txn(late, topic, [(0, b"after"), (1, b"other")], commit=True)
    assert read_confluent(bs, topic, PARTITIONS, "read_committed") == {
        0: [b"before"],
        1: [b"other"],
        2: [],
    }
    assert end_offsets(bs, topic, PARTITIONS, "read_committed") == {0: 2, 1: 2, 2: 0}
    assert end_offsets(bs, topic, PARTITIONS, "read_uncommitted") == {0: 5, 1: 2, 2: 0}
    early.commit_transaction(DEADLINE_S)
    assert end_offsets(bs, topic, PARTITIONS, "read_committed") == {0: 6, 1: 2, 2: 0}
    assert read_confluent(bs, topic, PARTITIONS, "read_committed") == {
        0: [b"before", b"open", b"after"],
        1: [b"other"],
        2: [],
    }


def test_zombie_producer_is_fenced(txn_broker: BrokerProcess, topic: str) -> None:
    """A second producer with the same transactional id aborts the first one's open
    transaction and fences it: the zombie can neither commit nor write again."""
    bs = txn_broker.bootstrap
    create_topic(bs, topic, PARTITIONS)
    zombie = txn_producer(bs, f"{topic}-id")
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=1)
    zombie.flush(DEADLINE_S)
    successor = txn_producer(bs, f"{topic}-id")
    send_txn(successor, topic, [(1, b"successor")], commit=True)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(DEADLINE_S)
    assert raised.value.args[0].fatal(), raised.value
    assert read_confluent(bs, topic, PARTITIONS, "read_committed") == {
        0: [],
        1: [b"successor"],
        2: [],
    }
    assert read_confluent(bs, topic, PARTITIONS, "read_uncommitted")[1] == [
        b"zombie",
        b"successor",
    ]


def offset_fetch(bs: str, group: str, topic: str, require_stable: bool) -> tuple[int, int]:
    """(error code, committed offset) of ``topic``-0 with OffsetFetch v7."""
    with RawClient(bs) as raw:
        response = raw.request(
            OffsetFetchRequest(
                group_id=group,
                topics=[OffsetFetchRequestTopic(name=topic, partition_indexes=[0])],
                require_stable=require_stable,
            ),
            7,
        )
    (partition,) = response.topics[0].partitions
    return partition.error_code, partition.committed_offset


def stable_offset(bs: str, group: str, topic: str) -> int:
    """The committed offset once no transaction has one pending (a consumer's retry)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        error, offset = offset_fetch(bs, group, topic, True)
        if error != ErrorCode.UNSTABLE_OFFSET_COMMIT:
            assert error == ErrorCode.NONE
            return offset
        assert time.monotonic() < deadline, "the offset commit never became stable"
        time.sleep(0.05)


def test_offsets_committed_in_a_transaction(txn_broker: BrokerProcess, topic: str) -> None:
    """send_offsets_to_transaction: the offset is pending (UNSTABLE_OFFSET_COMMIT for
    require_stable, the old value otherwise) until the commit, dropped by an abort."""
    bs = txn_broker.bootstrap
    create_topic(bs, topic, 1)
    group = f"{topic}-group"
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group})
    metadata = consumer.consumer_group_metadata()
    producer = txn_producer(bs, f"{topic}-id")

    def send_offset(offset: int) -> None:
        producer.begin_transaction()
        producer.produce(topic, value=f"v{offset}".encode(), partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, offset)], metadata, DEADLINE_S
        )
        producer.flush(DEADLINE_S)

    try:
        send_offset(7)
        assert offset_fetch(bs, group, topic, True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        assert offset_fetch(bs, group, topic, False) == (ErrorCode.NONE, -1)
        producer.commit_transaction(DEADLINE_S)
        # EndTxn answers once the commit is decided; the markers follow (as in Kafka).
        assert stable_offset(bs, group, topic) == 7
        send_offset(9)
        producer.abort_transaction(DEADLINE_S)
        assert stable_offset(bs, group, topic) == 7
        (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=DEADLINE_S)
        assert committed.offset == 7
    finally:
        consumer.close()


def test_kafka_python_and_aiokafka_send_offsets(txn_broker: BrokerProcess, topic: str) -> None:
    """The older TxnOffsetCommit/AddOffsetsToTxn versions of kafka-python and aiokafka:
    offsets become committed with the transaction, not with an aborted one."""
    bs = txn_broker.bootstrap
    create_topic(bs, topic, 1)
    kp_group, aio_group = f"{topic}-kp", f"{topic}-aio"
    kp = KafkaProducer(bootstrap_servers=bs, transactional_id=f"{topic}-kp")
    kp.init_transactions()
    for offset, commit in ((5, True), (8, False)):
        kp.begin_transaction()
        kp.send(topic, value=b"kp", partition=0)
        kp.send_offsets_to_transaction(
            {KpTopicPartition(topic, 0): KpOffsetAndMetadata(offset, "", -1)},
            kp_group,
        )
        kp.flush()
        kp.commit_transaction() if commit else kp.abort_transaction()
    kp.close()

    async def aio() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=f"{topic}-aio")
        await producer.start()
        try:
            for offset, commit in ((3, True), (9, False)):
                await producer.begin_transaction()
                await (await producer.send(topic, value=b"aio", partition=0))
                await producer.send_offsets_to_transaction(
                    {AioTopicPartition(topic, 0): offset}, aio_group
                )
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(aio())
    assert stable_offset(bs, kp_group, topic) == 5
    assert stable_offset(bs, aio_group, topic) == 3
    assert read_confluent(bs, topic, 1, "read_committed") == {0: [b"kp", b"aio"]}


def test_timed_out_transaction_is_aborted(txn_broker: BrokerProcess, topic: str) -> None:
    """A transaction open past transaction.timeout.ms is aborted by the coordinator: the
    LSO moves past it and its producer is fenced."""
    bs = txn_broker.bootstrap
    create_topic(bs, topic, PARTITIONS)
    producer = txn_producer(bs, f"{topic}-id", **{"transaction.timeout.ms": 1500})
    producer.begin_transaction()
    producer.produce(topic, value=b"forgotten", partition=2)
    producer.flush(DEADLINE_S)
    assert end_offsets(bs, topic, PARTITIONS, "read_committed")[2] == 0
    deadline = time.monotonic() + DEADLINE_S
    while end_offsets(bs, topic, PARTITIONS, "read_committed")[2] != 2:  # record + marker
        assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
        time.sleep(0.2)
    assert read_confluent(bs, topic, PARTITIONS, "read_committed")[2] == []
    with pytest.raises(KafkaException):
        producer.commit_transaction(DEADLINE_S)


def test_init_producer_id_answers(txn_broker: BrokerProcess, topic: str) -> None:
    """InitProducerId with a transactional id: epoch bumps, a retry with the current
    (id, epoch) bumps again (KIP-360), an old epoch is fenced, a timeout above
    transaction.max.timeout.ms is refused."""
    bs = txn_broker.bootstrap
    txn_producer(bs, f"{topic}-warmup")  # the coordinator's partitions exist and are loaded

    def init(version: int = 4, **fields: object) -> tuple[int, int, int]:
        request = InitProducerIdRequest(
            transactional_id=f"{topic}-id", transaction_timeout_ms=60000
        )
        for name, value in fields.items():
            setattr(request, name, value)
        deadline = time.monotonic() + DEADLINE_S
        while True:
            r = raw.request(request, version)
            if r.error_code not in (
                ErrorCode.NOT_COORDINATOR,
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ):
                return r.error_code, r.producer_id, r.producer_epoch
            assert time.monotonic() < deadline
            time.sleep(0.1)

    with RawClient(bs) as raw:
        code, pid, epoch = init()
        assert (code, epoch) == (ErrorCode.NONE, 0) and pid >= 0
        assert init() == (ErrorCode.NONE, pid, 1)
        assert init(producer_id=pid, producer_epoch=1) == (ErrorCode.NONE, pid, 2)
        assert init(producer_id=pid, producer_epoch=1) == (ErrorCode.NONE, pid, 2)  # retry
        assert init(producer_id=pid, producer_epoch=0)[0] == ErrorCode.PRODUCER_FENCED
        assert init(3, producer_id=pid, producer_epoch=0)[0] == ErrorCode.INVALID_PRODUCER_EPOCH
        too_long = init(transaction_timeout_ms=120001)[0]
        assert too_long == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert init(transaction_timeout_ms=0)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT


def test_partition_leaders_verify_transactions(txn_broker: BrokerProcess, topic: str) -> None:
    """KIP-890: a transactional batch on a partition its producer never added is refused
    (no hanging transaction can start), and AddPartitionsToTxn v4 (verify only) answers
    per partition."""
    bs = txn_broker.bootstrap
    create_topic(bs, topic, PARTITIONS)
    txn_producer(bs, f"{topic}-warmup")  # the coordinator's partitions exist and are loaded
    tid = f"{topic}-id"
    with RawClient(bs) as raw:
        init = raw.request(
            InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000), 4
        )
        assert init.error_code == ErrorCode.NONE
        pid, epoch = init.producer_id, init.producer_epoch
        sequences = dict.fromkeys(range(PARTITIONS), 0)

        def produce(partition: int) -> int:
            batch = build_batch(
                [(None, f"p{partition}".encode())], producer_id=pid, producer_epoch=epoch,
                base_sequence=sequences[partition], is_transactional=True,
            )  # fmt: skip
            request = produce_request(topic, {partition: batch})
            request.transactional_id = tid
            code = partition_results(raw.request(request, PRODUCE_VERSION))[partition].error_code
            if code == ErrorCode.NONE:
                sequences[partition] += 1
            return int(code)

        def topics(*partitions: int) -> list[AddPartitionsToTxnTopic]:
            return [AddPartitionsToTxnTopic(name=topic, partitions=list(partitions))]

        assert produce(0) == ErrorCode.INVALID_TXN_STATE
        added = raw.request(
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics(0),
            ),
            3,
        )  # fmt: skip
        assert [
            r.partition_error_code
            for r in added.results_by_topic_v3_and_below[0].results_by_partition
        ] == [0]
        verified = raw.request(
            AddPartitionsToTxnRequest(
                transactions=[
                    AddPartitionsToTxnTransaction(
                        transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                        verify_only=True, topics=topics(0, 1),
                    )
                ]
            ),
            4,
        )  # fmt: skip
        (result,) = verified.results_by_transaction
        assert {
            r.partition_index: r.partition_error_code
            for r in result.topic_results[0].results_by_partition
        } == {0: ErrorCode.NONE, 1: ErrorCode.TRANSACTION_ABORTABLE}
        assert produce(0) == ErrorCode.NONE
        assert produce(1) == ErrorCode.INVALID_TXN_STATE
        ended = raw.request(
            EndTxnRequest(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True
            ),
            3,
        )
        assert ended.error_code == ErrorCode.NONE
    deadline = time.monotonic() + DEADLINE_S
    while end_offsets(bs, topic, PARTITIONS, "read_committed")[0] != 2:
        assert time.monotonic() < deadline, "the commit marker never arrived"
        time.sleep(0.1)
    assert read_confluent(bs, topic, PARTITIONS, "read_uncommitted") == {0: [b"p0"], 1: [], 2: []}


def test_requests_about_unknown_transactions_get_kafka_errors(
    txn_broker: BrokerProcess, topic: str
) -> None:
    """Wrong or unknown ids and partitions get Kafka's error codes; nothing crashes."""
    bs = txn_broker.bootstrap
    txn_producer(bs, f"{topic}-warmup")  # the coordinator's partitions exist and are loaded
    unknown = f"{topic}-nobody"
    with RawClient(bs) as raw:
        ended = raw.request(
            EndTxnRequest(
                transactional_id=unknown, producer_id=7, producer_epoch=0, committed=True
            ),
            3,
        )
        assert ended.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        added = raw.request(
            AddOffsetsToTxnRequest(
                transactional_id=unknown, producer_id=7, producer_epoch=0, group_id="g"
            ),
            3,
        )
        assert added.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        partitions = raw.request(
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=unknown, v3_and_below_producer_id=7,
                v3_and_below_producer_epoch=0,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name="no-such-topic", partitions=[0])],
            ),
            3,
        )  # fmt: skip
        (result,) = partitions.results_by_topic_v3_and_below[0].results_by_partition
        assert result.partition_error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        described = raw.request(DescribeTransactionsRequest(transactional_ids=[unknown, ""]), 0)
        assert [s.error_code for s in described.transaction_states] == [
            ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
            ErrorCode.INVALID_REQUEST,
        ]
        markers = raw.request(
            WriteTxnMarkersRequest(
                markers=[
                    WritableTxnMarker(
                        producer_id=7, producer_epoch=0, transaction_result=False,
                        topics=[WritableTxnMarkerTopic(name="no-such-topic", partition_indexes=[0])],
                        coordinator_epoch=0,
                    )
                ]
            ),
            1,
        )  # fmt: skip
        code = markers.markers[0].topics[0].partitions[0].error_code
        assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_kafka_python_and_aiokafka_producers(txn_broker: BrokerProcess, topic: str) -> None:
    """kafka-python's and aiokafka's transactional producers commit and abort."""
    bs = txn_broker.bootstrap
    create_topic(bs, topic, PARTITIONS)
    kp = KafkaProducer(bootstrap_servers=bs, transactional_id=f"{topic}-kp")
    kp.init_transactions()
    for commit in (True, False, True):
        kp.begin_transaction()
        for p, v in values(PARTITIONS, f"kp-{commit}", 4):
            kp.send(topic, value=v, partition=p)
        kp.flush()  # an abort drops what is still unsent: these reach the log first
        kp.commit_transaction() if commit else kp.abort_transaction()
    kp.close()

    async def aio() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=f"{topic}-aio")
        await producer.start()
        try:
            for commit in (False, True):
                await producer.begin_transaction()
                for p, v in values(PARTITIONS, f"aio-{commit}", 4):
                    await (await producer.send(topic, value=v, partition=p))
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(aio())
    expected = by_partition(
        PARTITIONS, values(PARTITIONS, "kp-True", 4) * 2 + values(PARTITIONS, "aio-True", 4)
    )
    got = read_confluent(bs, topic, PARTITIONS, "read_committed")
    assert {p: sorted(v) for p, v in got.items()} == {p: sorted(v) for p, v in expected.items()}
    everything = read_confluent(bs, topic, PARTITIONS, "read_uncommitted")
    assert sum(map(len, everything.values())) == 4 * 5


def test_broker_killed_mid_transaction(tmp_path: Path, topic: str) -> None:
    """kill -9 with one transaction committed and one open: after the restart the
    committed one is there, the open one is aborted by its timeout (nothing hangs:
    the LSO reaches the high watermark) and the producer's id carries on."""
    with BrokerProcess(
        tmp_path / "broker",
        {
            "num.partitions": str(PARTITIONS),
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
        },
    ) as broker:
        bs = broker.bootstrap
        create_topic(bs, topic, PARTITIONS)
        producer = txn_producer(bs, f"{topic}-id", **{"transaction.timeout.ms": 3000})
        send_txn(producer, topic, values(PARTITIONS, "kept", 6), commit=True)
        producer.begin_transaction()
        for p, v in values(PARTITIONS, "lost", 6):
            producer.produce(topic, value=v, partition=p)
        producer.flush(DEADLINE_S)
        broker.kill()
        broker.start()
        deadline = time.monotonic() + DEADLINE_S
        while end_offsets(bs, topic, PARTITIONS, "read_committed") != end_offsets(
            bs, topic, PARTITIONS, "read_uncommitted"
        ):
            assert time.monotonic() < deadline, "the open transaction hangs after the restart"
            time.sleep(0.3)
        assert read_confluent(bs, topic, PARTITIONS, "read_committed") == by_partition(
            PARTITIONS, values(PARTITIONS, "kept", 6)
        )
        successor = txn_producer(bs, f"{topic}-id")
        send_txn(successor, topic, [(0, b"next")], commit=True)
        assert read_confluent(bs, topic, PARTITIONS, "read_committed")[0][-1] == b"next"


def test_compaction_drops_aborted_transactions(tmp_path: Path, topic: str) -> None:
    """The cleaner removes aborted records (whatever their keys) and keeps each key's
    latest committed value; read_committed and read_uncommitted then agree."""
    with BrokerProcess(tmp_path / "broker", {"log.cleaner.backoff.ms": "200"}) as broker:
        bs = broker.bootstrap
        create_topic(
            bs, topic, 1,
            {"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01"},
        )  # fmt: skip
        producer = txn_producer(bs, f"{topic}-id")
        latest: dict[bytes, bytes] = {}
        for n in range(40):
            commit = n % 3 != 2
            key = f"k{n % 4}".encode()
            value = f"v{n}-{'committed' if commit else 'aborted'}".encode()
            producer.begin_transaction()
            producer.produce(topic, key=key, value=value, partition=0)
            producer.produce(topic, key=f"aborted-only-{n}".encode(), value=value, partition=0)
            producer.flush(DEADLINE_S)
            if commit:
                producer.commit_transaction(DEADLINE_S)
                latest[key] = value
                latest[f"aborted-only-{n}".encode()] = value
            else:
                producer.abort_transaction(DEADLINE_S)
        # A last committed transaction rolls the segment holding the rest.
        producer.begin_transaction()
        producer.produce(topic, key=b"last", value=b"x" * 3000, partition=0)
        producer.commit_transaction(DEADLINE_S)
        latest[b"last"] = b"x" * 3000
        deadline = time.monotonic() + DEADLINE_S
        while b"aborted" in b"".join(read_confluent(bs, topic, 1, "read_uncommitted")[0]):
            assert time.monotonic() < deadline, "the cleaner left aborted records"
            time.sleep(0.3)
        kept = read_confluent(bs, topic, 1, "read_committed")[0]
        assert kept == read_confluent(bs, topic, 1, "read_uncommitted")[0]
        assert sorted(kept) == sorted(latest.values())
