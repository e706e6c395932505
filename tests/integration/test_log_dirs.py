"""JBOD against real clients: one broker with two log dirs. DescribeLogDirs through
kafka-python and the Java Admin (sizes checked against the files on disk), replicas moved
between dirs with AlterReplicaLogDirs while confluent-kafka produces (nothing acknowledged
lost, the move survives a restart), and the errors Kafka gives."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka import TopicPartitionReplica
from kafka.admin import KafkaAdminClient
from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError

from moldau.testing import BrokerProcess
from tests.integration.helpers import (
    DEADLINE_S,
    Acked,
    Rec,
    assert_log_matches,
    confluent_producer,
    consume_confluent,
    make_records,
    produce_confluent,
)
from tests.integration.helpers import admin as confluent_admin
from tests.java.client import JavaClient

NODE = 1
MOVE_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("jbod")
    return [root / "d1", root / "d2"]


@pytest.fixture(scope="module")
def jbod(dirs: list[Path]) -> Iterator[BrokerProcess]:
    with BrokerProcess(
        dirs[0].parent / "node", {"log.dirs": ",".join(map(str, dirs)), "num.partitions": "1"}
    ) as running:
        yield running


@pytest.fixture
def admin(jbod: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=jbod.bootstrap)
    yield client
    client.close()


def replicas(admin: KafkaAdminClient, topic: str) -> dict[tuple[int, bool], tuple[str, Any]]:
    """(partition, is future) -> (log dir, what DescribeLogDirs said) for ``topic``."""
    (described,) = admin.describe_log_dirs()
    out = {}
    for d in described["log_dirs"]:
        assert d["error_code"] == 0, d
        for t in d["topics"]:
            if t["name"] == topic:
                for p in t["partitions"]:
                    out[(p["partition_index"], p["is_future_key"])] = (d["log_dir"], p)
    return out


def current_dirs(admin: KafkaAdminClient, topic: str) -> dict[int, str]:
    return {p: where for (p, future), (where, _) in replicas(admin, topic).items() if not future}


def wait_until(condition: Any, what: str, timeout: float = DEADLINE_S) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return result


def test_describe_log_dirs_places_and_sizes_partitions(
    jbod: BrokerProcess, admin: KafkaAdminClient, dirs: list[Path], topic: str
) -> None:
    jbod.create_topic(topic, 4)
    records = make_records(400, seed=1)
    produce_confluent(jbod.bootstrap, topic, records)
    (described,) = admin.describe_log_dirs()
    assert sorted(d["log_dir"] for d in described["log_dirs"]) == sorted(map(str, dirs))
    hosted = {
        d["log_dir"]: sum(len(t["partitions"]) for t in d["topics"]) for d in described["log_dirs"]
    }
    assert abs(hosted[str(dirs[0])] - hosted[str(dirs[1])]) <= 1, hosted  # fewest first
    for d in described["log_dirs"]:
        assert d["total_bytes"] >= d["usable_bytes"] > 0
    found = replicas(admin, topic)
    assert sorted(found) == [(p, False) for p in range(4)]
    for (p, _), (where, info) in found.items():
        on_disk = sum(f.stat().st_size for f in Path(where, f"{topic}-{p}").glob("*.log"))
        assert info["offset_lag"] == 0
        assert info["partition_size"] == on_disk > 0
    assert sum(info["partition_size"] for _, info in found.values()) > sum(
        len(r.value) for r in records
    )


def test_move_replicas_while_producing(
    jbod: BrokerProcess, admin: KafkaAdminClient, dirs: list[Path], topic: str
) -> None:
    jbod.create_topic(topic, 2)
    records = make_records(6000, seed=2)
    acked: Acked = {}
    errors: list[str] = []
    stop = threading.Event()
    sent: list[Rec] = []

    def produce() -> None:
        producer = confluent_producer(jbod.bootstrap, acks="all")

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked[msg.value()] = (msg.partition(), msg.offset())

        for r in records:
            if stop.is_set():
                break
            producer.produce(
                topic, key=r.key, value=r.value, headers=list(r.headers), on_delivery=on_delivery
            )
            sent.append(r)
            producer.poll(0)
            time.sleep(0.0005)
        producer.flush(DEADLINE_S)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        wait_until(lambda: len(acked) > 500, "records acknowledged before the move")
        before = current_dirs(admin, topic)
        targets = {
            p: str(dirs[1] if where == str(dirs[0]) else dirs[0]) for p, where in before.items()
        }
        result = admin.alter_replica_log_dirs(
            {TopicPartitionReplica(topic, p, NODE): target for p, target in targets.items()}
        )
        assert all(e is NoError for e in result.values()), result
        acked_at_move = len(acked)
        wait_until(lambda: current_dirs(admin, topic) == targets, "the replicas in their new dirs")
        wait_until(lambda: len(acked) > acked_at_move + 200, "records acknowledged after the move")
    finally:
        stop.set()
        producer.join(DEADLINE_S)
    assert not errors, errors[:5]
    assert all(not future for _, future in replicas(admin, topic))
    for p, target in targets.items():
        assert Path(target, f"{topic}-{p}").is_dir()
        assert not Path(before[p], f"{topic}-{p}").exists()
    produced = [r for r in sent if r.value in acked]
    assert len(produced) == len(acked)
    assert_log_matches(produced, consume_confluent(jbod.bootstrap, topic), acked=acked)
    jbod.restart()  # the new placement is what the dirs hold: it survives
    after_restart = KafkaAdminClient(bootstrap_servers=jbod.bootstrap)
    try:
        assert current_dirs(after_restart, topic) == targets
    finally:
        after_restart.close()
    assert_log_matches(produced, consume_confluent(jbod.bootstrap, topic), acked=acked)


def test_alter_replica_log_dirs_errors(
    jbod: BrokerProcess, admin: KafkaAdminClient, dirs: list[Path], topic: str
) -> None:
    jbod.create_topic(topic, 1)
    result = admin.alter_replica_log_dirs(
        {
            TopicPartitionReplica(topic, 0, NODE): str(dirs[0].parent / "not-a-log-dir"),
            TopicPartitionReplica(f"{topic}-missing", 0, NODE): str(dirs[0]),
        }
    )
    assert result[TopicPartitionReplica(topic, 0, NODE)] is LogDirNotFoundError
    assert result[TopicPartitionReplica(f"{topic}-missing", 0, NODE)] is ReplicaNotAvailableError


def test_java_admin_describes_and_moves(
    jbod: BrokerProcess, java: JavaClient, admin: KafkaAdminClient, topic: str
) -> None:
    jbod.create_topic(topic, 1)
    produce_confluent(jbod.bootstrap, topic, make_records(50, seed=3))
    described = java.admin(jbod.bootstrap, ["describe-log-dirs", "--broker", str(NODE)]).check()
    dirs = described.one("describe-log-dirs")["dirs"]
    (source,) = [d for d, v in dirs.items() if any(r["topic"] == topic for r in v["replicas"])]
    (target,) = [d for d in dirs if d != source]
    (replica,) = [r for r in dirs[source]["replicas"] if r["topic"] == topic]
    assert replica["size"] > 0 and replica["offset_lag"] == 0 and not replica["future"]
    assert all(
        v["error"] is None and v["total_bytes"] >= v["usable_bytes"] > 0 for v in dirs.values()
    )
    moved = java.admin(
        jbod.bootstrap,
        [
            "alter-replica-log-dir",
            "--topic",
            topic,
            "--partition",
            "0",
            "--broker",
            str(NODE),
            "--dir",
            target,
        ],
    ).check()
    assert moved.one("alter-replica-log-dir")["current_dir"] in (source, target)
    wait_until(lambda: current_dirs(admin, topic) == {0: target}, "the replica in its new dir")


def test_log_dir_moves_are_throttled(
    jbod: BrokerProcess, admin: KafkaAdminClient, dirs: list[Path], topic: str
) -> None:
    """``replica.alter.log.dirs.io.max.bytes.per.second`` bounds the copy into a future
    replica: at 5 kB/s (a sampled rate over 11 s: a first burst of about 50 kB passes) a
    300 kB log of small batches has not moved after 3 s; without the bound it moves at
    once, whole."""
    jbod.create_topic(topic, 1)
    records = make_records(1500, seed=4)
    acked = produce_confluent(jbod.bootstrap, topic, records, **{"batch.num.messages": 10})
    rate = ConfigResource(
        ResourceType.BROKER,
        str(NODE),
        incremental_configs=[
            ConfigEntry(MOVE_RATE, "5000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    configs = confluent_admin(jbod.bootstrap)
    configs.incremental_alter_configs([rate])[rate].result(DEADLINE_S)
    (source,) = current_dirs(admin, topic).values()
    target = str(dirs[1] if source == str(dirs[0]) else dirs[0])
    result = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, NODE): target})
    assert all(e is NoError for e in result.values()), result
    time.sleep(3)
    assert current_dirs(admin, topic) == {0: source}
    (where, future) = replicas(admin, topic)[(0, True)]
    assert where == target and 0 < future["offset_lag"] < len(records)
    unbound = ConfigResource(
        ResourceType.BROKER,
        str(NODE),
        incremental_configs=[
            ConfigEntry(MOVE_RATE, None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    configs.incremental_alter_configs([unbound])[unbound].result(DEADLINE_S)
    wait_until(lambda: current_dirs(admin, topic) == {0: target}, "the replica in its new dir")
    assert_log_matches(records, consume_confluent(jbod.bootstrap, topic), acked=acked)
