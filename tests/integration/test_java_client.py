"""The Apache Kafka Java client (kafka-clients 3.9.0) against a real Moldau broker.

Each test runs ``tests/java/MoldauClient.java`` in JVMs (see ``tests/java/client.py``) and
checks the data end to end: every acknowledged record comes back exactly once, in order per
partition, byte for byte with its headers and timestamp, at its acknowledged offset. The
broker must not log a warning or an error while a Java client talks to it.
"""

from __future__ import annotations

import base64
import socket
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from moldau.records.batch import BatchInfo, scan_log_prefix
from moldau.testing import BrokerProcess
from tests.integration.helpers import (
    CODECS,
    Acked,
    Consumed,
    FreshBroker,
    Got,
    Rec,
    assert_log_matches,
    consume_confluent,
    consume_kafka_python,
    create_topic,
    flatten,
    make_records,
    produce_confluent,
    produce_kafka_python,
    wait_until,
    watermarks,
)
from tests.java.client import (
    JavaClient,
    JavaProcess,
    consumed,
    decode_record,
    encode_record,
)

PARTITIONS = 6
N_RECORDS = 2000
CODEC_IDS = {name: i for i, name in enumerate(CODECS)}  # the batch attributes' codec bits
_BROKER_TROUBLE = (" WARNING ", " ERROR ", "Traceback")


@pytest.fixture(autouse=True)
def broker_stays_quiet(broker: BrokerProcess) -> Iterator[None]:
    """Whatever the Java client sends, the broker answers it without complaint: no
    unsupported version, malformed request or handler error in its log."""
    before = list(broker.output)
    yield
    after = list(broker.output)
    new = after[len(before) :] if after[: len(before)] == before else after
    trouble = [line for line in new if any(t in line for t in _BROKER_TROUBLE)]
    assert not trouble, "the broker complained:\n" + "\n".join(trouble[:20])


def now_ms() -> int:
    return int(time.time() * 1000)


def edge_records(seed: int) -> list[Rec]:
    """What random records rarely hit: null and empty keys, empty values and header
    values, many headers, a value bigger than a producer batch (16 KiB)."""
    return [
        Rec(key=None, value=b"edge-%d-null-key" % seed),
        Rec(key=b"", value=b"edge-%d-empty-key" % seed, headers=(("", b""),)),
        Rec(key=b"empty-value", value=b""),
        Rec(key=b"k", value=b"edge-%d-" % seed, headers=tuple((f"h{i}", b"") for i in range(20))),
        Rec(key=b"big", value=b"edge-%d-big-" % seed + bytes(range(256)) * 400),
    ]


def stored_batches(broker: BrokerProcess, topic: str, partition: int) -> list[BatchInfo]:
    """The batch headers in the partition's segment files, as the broker stored them."""
    batches: list[BatchInfo] = []
    for segment in sorted((broker.data_dir / f"{topic}-{partition}").glob("*.log")):
        infos, _ = scan_log_prefix(segment.read_bytes())
        batches += infos
    return batches


# --- produce / consume -------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(broker: BrokerProcess, java: JavaClient, topic: str, codec: str) -> None:
    """A Java consumer reads while a Java producer (idempotent, acks=all: 3.x defaults)
    writes; the stored batches carry the codec asked for."""
    create_topic(broker.bootstrap, topic, PARTITIONS)
    seed = CODEC_IDS[codec]
    records = make_records(N_RECORDS, seed=seed, timestamp=now_ms() - 60_000) + edge_records(seed)
    consumer = java.start(
        "consume", "--bootstrap", broker.bootstrap, "--topic", topic, "--from-earliest",
        "--max-records", str(len(records)), "--timeout-ms", "60000",
    )  # fmt: skip
    acked = java.produce(broker.bootstrap, topic, records, codec)
    result = consumer.result().check()
    assert result.one("done")["reason"] == "max-records", str(result)
    got = consumed(result.events)
    assert_log_matches(records, got, acked=acked, check_timestamps=True)
    assert sum(1 for gots in got.values() if gots) > 1, "keys all hashed to one partition"
    codecs = {b.compression for p in range(PARTITIONS) for b in stored_batches(broker, topic, p)}
    assert codecs == {CODEC_IDS[codec]}, f"stored batches use codecs {codecs}"


def test_log_append_time(broker: BrokerProcess, java: JavaClient, topic: str) -> None:
    """With message.timestamp.type=LogAppendTime the broker's clock wins: the producer's
    acks carry the append time (Produce's log_append_time_ms), the consumer gets the same."""
    create_topic(broker.bootstrap, topic, 2, {"message.timestamp.type": "LogAppendTime"})
    records = make_records(200, seed=5, timestamp=1_000_000_000_000)
    consumer = java.start(
        "consume", "--bootstrap", broker.bootstrap, "--topic", topic, "--from-earliest",
        "--max-records", str(len(records)),
    )  # fmt: skip
    before = now_ms()
    produced = java.run(
        "produce", "--bootstrap", broker.bootstrap, "--topic", topic, "--stdin",
        stdin=b"".join(map(encode_record, records)),
    ).check()  # fmt: skip
    result = consumer.result().check()
    acked = {records[a["index"]].value: a for a in produced.of("ack")}
    got = result.of("record")
    assert len(got) == len(records) and {e["timestamp_type"] for e in got} == {"LogAppendTime"}
    for e in got:
        ack = acked[decode_record(e).value or b""]
        assert (e["partition"], e["offset"]) == (ack["partition"], ack["offset"])
        assert e["timestamp"] == ack["timestamp"] and before <= e["timestamp"] <= now_ms()


@pytest.mark.parametrize("acks", ["0", "1"])
def test_weaker_acks(broker: BrokerProcess, java: JavaClient, topic: str, acks: str) -> None:
    """acks=0 and acks=1, idempotence off (Kafka requires acks=all for it): on one healthy
    broker every record still lands exactly once; acks=0 learns no offsets."""
    create_topic(broker.bootstrap, topic, PARTITIONS)
    records = make_records(500, seed=10 + int(acks))
    acked = java.produce(
        broker.bootstrap, topic, records, "none", "--acks", acks, "--idempotence", "false"
    )
    if acks == "0":
        assert {offset for _, offset in acked.values()} == {-1}
    got = consume_confluent(broker.bootstrap, topic)
    assert_log_matches(records, got, acked=acked if acks == "1" else None)
    stored = {b.producer_id for p in range(PARTITIONS) for b in stored_batches(broker, topic, p)}
    assert stored == {-1}, "batches of a producer without idempotence carry no producer id"


def test_idempotent_producer(broker: BrokerProcess, java: JavaClient, topic: str) -> None:
    """Many small batches in flight (5 per connection, the most idempotence allows): one
    producer id, epoch 0, and per partition sequence numbers without a gap or a repeat."""
    create_topic(broker.bootstrap, topic, PARTITIONS)
    records = make_records(3000, seed=20)
    acked = java.produce(
        broker.bootstrap, topic, records, "lz4", "--idempotence", "true",
        "--config", "batch.size=2048", "--config", "max.in.flight.requests.per.connection=5",
    )  # fmt: skip
    assert_log_matches(records, consume_confluent(broker.bootstrap, topic), acked=acked)
    producers = set()
    for p in range(PARTITIONS):
        batches = stored_batches(broker, topic, p)
        producers |= {(b.producer_id, b.producer_epoch) for b in batches}
        sequences = [(b.base_sequence, b.last_sequence) for b in batches]
        expected_next = 0
        for first, last in sequences:
            assert first == expected_next, f"partition {p}: sequences {sequences[:10]}..."
            expected_next = last + 1
    (producer_id, epoch), *others = producers
    assert not others and producer_id >= 0 and epoch == 0, f"producers {producers}"


# --- with the other clients --------------------------------------------------------------------


# Other clients: (writer, reader, codec); each codec once.
CROSS = [
    ("java", "confluent", "zstd"),
    ("java", "kafka-python", "lz4"),
    ("confluent", "java", "snappy"),
    ("kafka-python", "java", "gzip"),
]
OTHER_PRODUCERS: dict[str, Callable[..., Acked]] = {
    "confluent": produce_confluent,
    "kafka-python": produce_kafka_python,
}
OTHER_CONSUMERS: dict[str, Callable[..., Consumed]] = {
    "confluent": consume_confluent,
    "kafka-python": consume_kafka_python,
}


@pytest.mark.parametrize(("writer", "reader", "codec"), CROSS, ids=["-".join(c) for c in CROSS])
def test_cross_client(
    broker: BrokerProcess, java: JavaClient, topic: str, writer: str, reader: str, codec: str
) -> None:
    """What one client wrote, another reads back identically; the Java consumer reads
    read_committed (no transactions yet: the last stable offset is the high watermark)."""
    create_topic(broker.bootstrap, topic, PARTITIONS)
    seed = 30 + CROSS.index((writer, reader, codec))
    records = make_records(1000, seed=seed) + edge_records(seed)
    if writer == "java":
        acked = java.produce(broker.bootstrap, topic, records, codec)
    else:
        acked = OTHER_PRODUCERS[writer](broker.bootstrap, topic, records, codec)
    if reader == "java":
        got = java.consume(broker.bootstrap, topic, "--isolation", "read_committed")
    else:
        got = OTHER_CONSUMERS[reader](broker.bootstrap, topic)
    assert_log_matches(records, got, acked=acked)


# --- consumer groups ---------------------------------------------------------------------------


def owned(member: JavaProcess) -> set[int]:
    """What a member owns after its rebalance callbacks so far (eager or cooperative)."""
    partitions: set[int] = set()
    for e in member.events:
        parts = {int(tp.rsplit(":", 1)[1]) for tp in e.get("partitions", ())}
        if e["event"] == "assigned":
            partitions |= parts
        elif e["event"] in ("revoked", "lost"):
            partitions -= parts
    return partitions


def records_of(member: JavaProcess) -> list[Got]:
    return [decode_record(e) for e in member.of("record")]


# The classic protocol (the client's range assignor) and KIP-848's (the broker's uniform one).
GROUP_PROTOCOLS = {
    "classic": ("heartbeat.interval.ms=500", "range"),
    "consumer": ("group.protocol=consumer", "uniform"),
}


@pytest.mark.parametrize("protocol", GROUP_PROTOCOLS)
def test_consumer_group(broker: BrokerProcess, java: JavaClient, topic: str, protocol: str) -> None:
    """Two Java consumers share the partitions; when one leaves (committing, then
    LeaveGroup or a leaving heartbeat) the other takes them all over from the committed
    offsets: together they process every record exactly once. The admin client sees the
    group as it goes. With ``group.protocol=consumer`` the broker assigns (KIP-848)."""
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = f"{topic}-group"
    config, assignor = GROUP_PROTOCOLS[protocol]
    options = ["--from-earliest", "--commit", "sync", "--stdin-control", "--timeout-ms", "120000"]
    members = [
        java.start(
            *["consume", "--bootstrap", broker.bootstrap, "--topic", topic, "--group", group],
            *["--client-id", f"member-{i}", "--config", config, *options],
        )
        for i in range(2)
    ]
    everything = set(range(PARTITIONS))
    try:
        wait_until(
            lambda: (
                all(owned(m) for m in members)
                and not owned(members[0]) & owned(members[1])
                and owned(members[0]) | owned(members[1]) == everything
            ),
            "the two members to split the partitions",
        )
        first = make_records(600, seed=50)
        acked = produce_confluent(broker.bootstrap, topic, first)
        wait_until(lambda: sum(len(m.of("record")) for m in members) >= len(first), "phase 1")
        for m in members:
            assert {g.partition for g in records_of(m)} <= owned(m)
        seen = java.admin(
            broker.bootstrap, ["describe-groups", "--group", group], ["list-groups"]
        ).check()
        (described,) = seen.one("describe-groups")["groups"]
        assert described["state"] == "Stable" and described["assignor"] == assignor
        assignment = {m["client_id"]: m["assignment"] for m in described["members"]}
        assert assignment == {
            f"member-{i}": sorted(f"{topic}:{p}" for p in owned(m)) for i, m in enumerate(members)
        }
        listed = {g["group"]: g for g in seen.one("list-groups")["groups"]}
        assert listed[group]["state"] == "Stable" and not listed[group]["simple"]

        assert members[1].stop() == 0, str(members[1])
        wait_until(lambda: owned(members[0]) == everything, "the survivor to own everything")
        second = make_records(600, seed=51)
        acked |= produce_confluent(broker.bootstrap, topic, second)
        wait_until(
            lambda: sum(len(m.of("record")) for m in members) >= len(first) + len(second),
            "phase 2",
        )
        assert members[0].stop() == 0, str(members[0])
    finally:
        for m in members:
            m.kill()
    got: dict[int, list[Got]] = {p: [] for p in everything}
    for m in members:
        for g in records_of(m):
            got[g.partition].append(g)
    for gots in got.values():
        gots.sort(key=lambda g: g.offset)  # members each read in order; merged by offset
    assert_log_matches(first + second, got, acked=acked)

    after = java.admin(
        broker.bootstrap,
        ["list-group-offsets", "--group", group],
        ["describe-groups", "--group", group],
    ).check()
    ends = {f"{topic}:{p}": hi for p, (_, hi) in watermarks(broker.bootstrap, topic).items()}
    assert after.one("list-group-offsets")["offsets"] == ends
    (described,) = after.one("describe-groups")["groups"]
    assert described["state"] == "Empty" and described["members"] == []


WEEK_MS = "604800000"


# --- admin -------------------------------------------------------------------------------------


def test_admin(broker: BrokerProcess, java: JavaClient, topic: str) -> None:
    """Topics, cluster, configs and offsets through Java's Admin; errors as Kafka's."""
    result = java.admin(
        broker.bootstrap,
        ["create-topic", "--topic", topic, "--partitions", "4", "--replication-factor", "1",
         "--topic-config", "cleanup.policy=compact", "--topic-config", "retention.ms=3600000"],
        ["create-topic", "--topic", topic, "--partitions", "4"],
        ["describe-topics", "--topic", topic],
        ["describe-cluster"],
        ["alter-configs", "--topic", topic, "--set", "retention.ms=7200000",
         "--set", "max.message.bytes=65536", "--delete", "cleanup.policy"],
        ["describe-configs", "--topic", topic],
    )  # fmt: skip
    assert result.returncode == 1, str(result)  # the second create-topic
    assert [e["event"] for e in result.events] == [
        "create-topic", "error", "describe-topics", "describe-cluster", "alter-configs",
        "describe-configs",
    ], str(result)  # fmt: skip
    created = result.one("create-topic")
    assert (created["partitions"], created["replication_factor"]) == (4, 1)
    (error,) = result.errors
    assert error["error"] == "org.apache.kafka.common.errors.TopicExistsException"

    cluster = result.one("describe-cluster")
    (node,) = cluster["nodes"]
    assert (node["host"], node["port"]) == (broker.host, broker.port)
    assert cluster["controller"] == node["id"] and cluster["cluster_id"]
    (described,) = result.one("describe-topics")["topics"]
    assert described["topic_id"] == created["topic_id"] and not described["internal"]
    assert described["partitions"] == [
        {"partition": p, "leader": node["id"], "replicas": [node["id"]], "isr": [node["id"]]}
        for p in range(4)
    ]
    configs = result.one("describe-configs")["configs"]
    assert configs["retention.ms"] == {
        "value": "7200000", "source": "DYNAMIC_TOPIC_CONFIG", "read_only": False,
        "sensitive": False, "synonyms": [
            {"name": "retention.ms", "value": "7200000", "source": "DYNAMIC_TOPIC_CONFIG"},
            {"name": "log.retention.ms", "value": WEEK_MS, "source": "DEFAULT_CONFIG"},
        ],
    }  # fmt: skip
    assert configs["max.message.bytes"]["value"] == "65536"
    assert (configs["cleanup.policy"]["value"], configs["cleanup.policy"]["source"]) == (
        "delete",
        "DEFAULT_CONFIG",
    )

    # Partition 0 gets timestamps out of order, partition 1 stays empty.
    base = now_ms() - 3_600_000
    stamps = [0, 50, 20, 90, 30, 10]
    records = [
        Rec(b"k", b"ts-%d" % i, timestamp=base + t, partition=0) for i, t in enumerate(stamps)
    ]
    produce_confluent(broker.bootstrap, topic, records)
    specs = ["earliest", "latest", "max-timestamp", str(base + 25), str(base + 1000)]
    unknown_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    result = java.admin(
        broker.bootstrap,
        *(["list-offsets", "--topic", topic, "--spec", spec] for spec in specs),
        ["describe-topics", "--id", created["topic_id"]],
        ["describe-topics", "--id", unknown_id],
        ["delete-topic", "--topic", topic],
        ["describe-topics", "--topic", topic],
    )
    assert result.returncode == 1, str(result)  # the unknown id, the deleted topic
    found = {e["spec"]: e["offsets"] for e in result.of("list-offsets")}
    p0 = {spec: (o["0"]["offset"], o["0"]["timestamp"]) for spec, o in found.items()}
    assert p0 == {
        "earliest": (0, -1),
        "latest": (6, -1),
        "max-timestamp": (3, base + 90),
        str(base + 25): (1, base + 50),
        str(base + 1000): (-1, -1),
    }
    p1 = {spec: (o["1"]["offset"], o["1"]["timestamp"]) for spec, o in found.items()}
    assert p1 == {
        "earliest": (0, -1),
        "latest": (0, -1),
        "max-timestamp": (-1, -1),
        str(base + 25): (-1, -1),
        str(base + 1000): (-1, -1),
    }
    # Kafka answers "not found" without a leader epoch (-1): Java reports none.
    assert found[str(base + 1000)]["0"]["leader_epoch"] is None
    assert found["max-timestamp"]["1"]["leader_epoch"] is None
    (by_id,) = result.one("describe-topics")["topics"]
    assert by_id == described
    assert result.one("delete-topic")["deleted"] == [topic]
    assert [(e["stage"], e["error"].rsplit(".", 1)[1]) for e in result.errors] == [
        ("describe-topics", "UnknownTopicIdException"),
        ("describe-topics", "UnknownTopicOrPartitionException"),
    ], str(result)


# --- transactions ------------------------------------------------------------------------------


def test_transactions(broker: BrokerProcess, java: JavaClient, topic: str) -> None:
    """The Java producer commits one transaction and aborts another; a Java
    consume-transform-produce loop (sendOffsetsToTransaction, every 3rd transaction
    aborted and re-read) copies exactly the committed input once, and the Java
    read_committed consumer sees exactly the committed records."""
    create_topic(broker.bootstrap, topic, 3)
    output = f"{topic}-out"
    create_topic(broker.bootstrap, output, 3)
    committed = java.produce(broker.bootstrap, topic, make_records(60, seed=21), "none",
                             "--transactional-id", f"{topic}-committer")  # fmt: skip
    java.run("produce", "--bootstrap", broker.bootstrap, "--topic", topic, "--count", "40",
             "--transactional-id", f"{topic}-aborter", "--transaction", "abort").check()  # fmt: skip
    copy = java.run("txn-copy", "--bootstrap", broker.bootstrap, "--input", topic,
                    "--output", output, "--group", f"{topic}-copy", "--transactional-id",
                    f"{topic}-copier", "--abort-every", "3", "--max-records", "60",
                    "--config", "max.poll.records=7").check()  # fmt: skip
    assert copy.one("done")["copied"] == 60 and copy.of("aborted"), str(copy)
    source = {
        g.value
        for g in flatten(java.consume(broker.bootstrap, topic, "--isolation", "read_committed"))
    }
    assert source == set(committed)
    copied = flatten(java.consume(broker.bootstrap, output, "--isolation", "read_committed"))
    assert sorted(g.value for g in copied) == sorted(committed)
    everything = flatten(java.consume(broker.bootstrap, topic))
    assert len(everything) == 100


# --- idempotence across a broker crash ---------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_idempotent_producer_across_broker_kill(
    fresh_broker: FreshBroker, java: JavaClient, topic: str
) -> None:
    """The broker is killed (-9) and restarted under an idempotent producer: the producer
    reconnects and retries what was in flight (the broker may have written it before it
    died); the broker, its producer state recovered from the log, appends each batch
    once. Every record is acknowledged, at the one offset where it is."""
    port = free_port()
    b = fresh_broker({"listeners": f"PLAINTEXT://127.0.0.1:{port}"})
    create_topic(b.bootstrap, topic, 3)
    records = make_records(3000, seed=60)
    producer = java.start(
        "produce", "--bootstrap", b.bootstrap, "--topic", topic, "--stdin", "--throughput", "1000",
        "--idempotence", "true", "--delivery-timeout-ms", "120000",
        stdin=b"".join(map(encode_record, records)),
    )  # fmt: skip
    try:
        producer.wait_for(lambda e: e["event"] == "ack" and e["index"] >= 1000, "1000 acks")
        b.kill()
        b.start()
        result = producer.result(timeout=120).check()
    finally:
        producer.kill()
    acked = {records[a["index"]].value: (a["partition"], a["offset"]) for a in result.of("ack")}
    assert len(acked) == len(records)
    assert_log_matches(records, consume_confluent(b.bootstrap, topic), acked=acked)
