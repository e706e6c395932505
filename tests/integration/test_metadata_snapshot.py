"""A broker whose metadata comes back from a KRaft snapshot: a clean stop snapshots the
metadata log, and a start loads the latest snapshot then replays only the records after
it. Topics (with their configs and ids), broker configs, ACLs and SCRAM users must all
survive, as must every acknowledged record."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from moldau.raft.driver import METADATA_DIR
from moldau.raft.file_log import SNAPSHOT_SUFFIX
from moldau.testing import BrokerProcess
from moldau.testing.process import TEST_DEFAULTS

TIMEOUT_S = 60
DYNAMIC = {ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.DYNAMIC_BROKER_CONFIG.value}


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("metadata-snapshot")
    # A low threshold: the log is snapshotted while it runs too, so a start after kill -9
    # also loads a snapshot and replays a tail.
    configs = {
        **TEST_DEFAULTS,
        "metadata.log.max.record.bytes.between.snapshots": "4096",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    with BrokerProcess(data, configs, startup_timeout=TIMEOUT_S) as broker:
        yield broker


def snapshot_offsets(broker: BrokerProcess) -> list[int]:
    directory = Path(broker.data_dir) / METADATA_DIR
    return sorted(int(p.name.split("-")[0]) for p in directory.glob("*" + SNAPSHOT_SUFFIX))


def loaded_snapshots(broker: BrokerProcess, since: int) -> list[str]:
    lines = list(broker.output)[-(broker.lines_seen - since) :]
    return [line for line in lines if "loaded snapshot" in line]


def restart(broker: BrokerProcess, *, kill: bool) -> list[str]:
    """Restart (SIGTERM or kill -9); returns the broker's "loaded snapshot" log lines."""
    if kill:
        broker.kill()
    else:
        broker.stop(timeout=TIMEOUT_S)
    seen = broker.lines_seen
    broker.start()
    wait_until(lambda: any("is serving" in line for line in list(broker.output)[-50:]))
    return loaded_snapshots(broker, seen)


def wait_until(check: object, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def state(broker: BrokerProcess, topics: list[str]) -> dict[str, object]:
    """What the metadata holds, as the admin API shows it."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_topics(timeout=TIMEOUT_S).topics
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics if t in listed]
    resources.append(ConfigResource(ResourceType.BROKER, "1"))
    configs = {}
    for resource, future in admin.describe_configs(resources).items():
        entries = future.result(timeout=TIMEOUT_S)
        configs[resource.name] = {k: e.value for k, e in entries.items() if e.source in DYNAMIC}
    acls = admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(timeout=TIMEOUT_S)
    scram = admin.describe_user_scram_credentials().result(timeout=TIMEOUT_S)
    return {
        "topics": {t: len(listed[t].partitions) for t in topics if t in listed},
        "configs": configs,
        "acls": sorted(str(a) for a in acls),
        "scram": {
            u: sorted(c.mechanism.name for c in d.scram_credential_infos) for u, d in scram.items()
        },
    }


def test_metadata_survives_restarts_from_snapshots(restarted: BrokerProcess, topic: str) -> None:
    broker = restarted
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [broker.create_topic(f"{topic}-{i}", 3, retention_ms=86_400_000 + i) for i in range(5)]
    change = ConfigEntry("log.cleaner.threads", "2", incremental_operation=AlterConfigOpType.SET)
    node = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[change])
    admin.incremental_alter_configs([node])[node].result(timeout=TIMEOUT_S)
    acl = AclBinding(
        ResourceType.TOPIC,
        topics[0],
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([acl]).values():
        future.result(timeout=TIMEOUT_S)
    upsert = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret"
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=TIMEOUT_S)
    acked = {t: broker.produce(t, *(f"{t}:{n}" for n in range(30))) for t in topics}
    before = state(broker, topics)
    assert before["topics"] == dict.fromkeys(topics, 3)
    assert before["configs"][topics[4]] == {"retention.ms": str(86_400_004)}
    assert before["configs"]["1"] == {"log.cleaner.threads": "2"}
    assert len(before["acls"]) == 1 and before["scram"] == {"alice": ["SCRAM_SHA_256"]}

    snapshotted = snapshot_offsets(broker)
    loaded = restart(broker, kill=False)
    assert snapshot_offsets(broker)[-1:] != snapshotted[-1:], "the clean stop wrote one"
    assert len(loaded) == 1, "the start loaded the snapshot"
    assert state(broker, topics) == before

    # Changes after that snapshot are the tail a start after kill -9 replays.
    later = broker.create_topic(f"{topic}-later", 2)
    admin.delete_topics([topics[1]])[topics[1]].result(timeout=TIMEOUT_S)
    wait_until(lambda: topics[1] not in admin.list_topics(timeout=TIMEOUT_S).topics)
    acked[later] = broker.produce(later, *(f"{later}:{n}" for n in range(10)))
    del acked[topics[1]]
    expected = state(broker, [*topics, later])
    assert topics[1] not in expected["topics"]  # type: ignore[operator]
    loaded = restart(broker, kill=True)
    assert len(loaded) == 1, "after kill -9 too: the latest snapshot, then the tail"
    assert state(broker, [*topics, later]) == expected

    for name, records in acked.items():
        got = broker.consume(name, len(records))
        assert sorted((r.partition, r.offset, r.value) for r in got) == sorted(
            (r.partition, r.offset, r.value) for r in records
        ), name


def test_a_snapshot_is_taken_once_the_interval_passed(tmp_path: Path) -> None:
    """metadata.log.max.snapshot.interval.ms (KIP-876), the bytes threshold out of reach:
    a topic created, then nothing; a snapshot is written while the broker runs, and a
    start after kill -9 (no stop snapshot) loads it and has the topic."""
    configs = {
        **TEST_DEFAULTS,
        "metadata.log.max.record.bytes.between.snapshots": str(1 << 30),
        "metadata.log.max.snapshot.interval.ms": "1000",
    }
    with BrokerProcess(tmp_path, configs, startup_timeout=TIMEOUT_S) as broker:
        first = snapshot_offsets(broker)
        topic = broker.create_topic("snapshot-interval", 2)
        acked = broker.produce(topic, *(f"r{n}" for n in range(10)))
        wait_until(lambda: snapshot_offsets(broker)[-1:] != first[-1:])
        assert any("time trigger" in line for line in broker.output)
        written = snapshot_offsets(broker)[-1]
        loaded = restart(broker, kill=True)
        assert len(loaded) == 1 and str(written) in loaded[0], loaded
        got = broker.consume(topic, len(acked))
        assert [(r.partition, r.offset, r.value) for r in got] == sorted(
            (r.partition, r.offset, r.value) for r in acked
        )
