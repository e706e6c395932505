"""Admin APIs end to end: configs, cluster, DeleteRecords and producer ids, driven by
confluent-kafka's AdminClient and kafka-python's KafkaAdminClient against a real broker."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    ResourceType,
)
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic

from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages import incremental_alter_configs_request as inc
from moldau.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from moldau.protocol.messages.describe_cluster_request import DescribeClusterRequest
from moldau.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from moldau.protocol.messages.init_producer_id_request import InitProducerIdRequest
from moldau.records.record import build_batch
from moldau.testing import BrokerProcess
from tests.integration.helpers import (
    DEADLINE_S,
    FreshBroker,
    RawClient,
    Rec,
    admin,
    assert_log_matches,
    confluent_consumer,
    consume_confluent,
    consume_kafka_python,
    create_topic,
    delete_topic,
    make_records,
    partition_results,
    produce_confluent,
    produce_kafka_python,
    produce_request,
    topic_partitions,
    wait_for_topic,
    watermarks,
)

WEEK_MS = "604800000"
TOPIC = ResourceType.TOPIC


@pytest.fixture(scope="module")
def client(broker: BrokerProcess) -> AdminClient:
    """One AdminClient per module; it must outlive the futures it hands out."""
    return admin(broker.bootstrap)


def describe(client: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(TOPIC, topic)
    return client.describe_configs([resource])[resource].result(timeout=DEADLINE_S)


def alter(client: AdminClient, topic: str, *ops: tuple[str, AlterConfigOpType, str | None]) -> None:
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, op, value in ops]
    resource = ConfigResource(TOPIC, topic, incremental_configs=entries)
    client.incremental_alter_configs([resource])[resource].result(timeout=DEADLINE_S)


def error_code(call: Callable[[], object]) -> int:
    """The KafkaException's code (not kept: its traceback would keep the caller's clients)."""
    try:
        call()
    except KafkaException as e:
        code: int = e.args[0].code()
        return code
    raise AssertionError("no KafkaException raised")


def kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)


# --- configs -----------------------------------------------------------------------


def test_incremental_config_round_trip(
    broker: BrokerProcess, client: AdminClient, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 1)
    before = describe(client, topic)["retention.ms"]
    assert (before.value, ConfigSource(before.source), before.is_default) == (
        WEEK_MS,
        ConfigSource.DEFAULT_CONFIG,
        True,
    )

    alter(client, topic, ("retention.ms", AlterConfigOpType.SET, "3600000"))
    entry = describe(client, topic)["retention.ms"]
    assert (entry.value, ConfigSource(entry.source), entry.is_default, entry.is_read_only) == (
        "3600000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        False,
        False,
    )

    alter(client, topic, ("retention.ms", AlterConfigOpType.DELETE, None))
    entry = describe(client, topic)["retention.ms"]
    assert (entry.value, ConfigSource(entry.source)) == (WEEK_MS, ConfigSource.DEFAULT_CONFIG)


def test_append_and_subtract_list_config(
    broker: BrokerProcess, client: AdminClient, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 1)
    alter(client, topic, ("cleanup.policy", AlterConfigOpType.APPEND, "compact"))
    assert describe(client, topic)["cleanup.policy"].value == "delete,compact"
    alter(client, topic, ("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete"))
    assert describe(client, topic)["cleanup.policy"].value == "compact"


@pytest.mark.parametrize(
    "op",
    [
        ("retention.ms", AlterConfigOpType.SET, "abc"),
        ("retention.ms", AlterConfigOpType.SET, "-5"),
        ("cleanup.policy", AlterConfigOpType.SET, "shred"),
        ("no.such.config", AlterConfigOpType.SET, "1"),
        ("retention.ms", AlterConfigOpType.APPEND, "5"),
    ],
)
def test_invalid_config_is_rejected_and_changes_nothing(
    broker: BrokerProcess, client: AdminClient, topic: str, op: tuple[str, AlterConfigOpType, str]
) -> None:
    create_topic(broker.bootstrap, topic, 1, {"retention.ms": "1000"})
    assert error_code(lambda: alter(client, topic, op)) == KafkaError.INVALID_CONFIG
    configs = describe(client, topic)
    assert configs["retention.ms"].value == "1000"
    assert configs["cleanup.policy"].value == "delete"


def test_legacy_alter_configs_replaces_every_override(
    broker: BrokerProcess, client: AdminClient, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 1, {"retention.ms": "1000", "segment.bytes": "100000"})

    def replace(validate_only: bool) -> None:
        resource = ConfigResource(TOPIC, topic, set_config={"max.message.bytes": "2000"})
        client.alter_configs([resource], validate_only=validate_only)[resource].result(
            timeout=DEADLINE_S
        )

    replace(validate_only=True)
    assert describe(client, topic)["retention.ms"].value == "1000"
    replace(validate_only=False)
    configs = describe(client, topic)
    assert configs["max.message.bytes"].value == "2000"
    assert configs["retention.ms"].value == WEEK_MS
    assert ConfigSource(configs["segment.bytes"].source) == ConfigSource.DEFAULT_CONFIG


def test_unknown_topic(client: AdminClient) -> None:
    code = error_code(lambda: describe(client, "no-such-topic"))
    assert code == KafkaError.UNKNOWN_TOPIC_OR_PART
    code = error_code(
        lambda: alter(client, "no-such-topic", ("retention.ms", AlterConfigOpType.SET, "1"))
    )
    assert code == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_static_broker_configs_are_read_only(client: AdminClient) -> None:
    resource = ConfigResource(ResourceType.BROKER, "1")
    configs = client.describe_configs([resource])[resource].result(DEADLINE_S)
    partitions = configs["num.partitions"]
    assert (partitions.value, ConfigSource(partitions.source), partitions.is_read_only) == (
        "3",
        ConfigSource.STATIC_BROKER_CONFIG,
        True,
    )
    assert ConfigSource(configs["delete.topic.enable"].source) == ConfigSource.DEFAULT_CONFIG
    # Kafka's update modes: log.dirs is read-only, listeners per-broker, the topic
    # defaults cluster-wide.
    assert not configs["log.retention.ms"].is_read_only
    assert configs["log.dirs"].is_read_only and not configs["listeners"].is_read_only

    change = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("num.partitions", "5", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    futures = client.incremental_alter_configs([change])
    assert error_code(lambda: futures[change].result(DEADLINE_S)) == KafkaError.INVALID_REQUEST


def test_dynamic_broker_configs_apply_without_restart(
    fresh_broker: FreshBroker, topic: str
) -> None:
    """Tried as a user would: librdkafka's admin API sets a cluster-wide default and a
    per-broker value; topics without overrides follow at once, and a restart keeps them."""
    b = fresh_broker()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    create_topic(b.bootstrap, topic, 1)

    def alter(name: str, key: str, value: str) -> None:
        if not name:  # confluent-kafka's Python wrapper refuses the "" (cluster) resource
            request = inc.IncrementalAlterConfigsRequest(
                resources=[inc.AlterConfigsResource(4, "", [inc.AlterableConfig(key, SET, value)])]
            )
            with RawClient(b.bootstrap) as raw:
                assert raw.request(request, 1).responses[0].error_code == ErrorCode.NONE
            return
        change = ConfigResource(
            ResourceType.BROKER,
            name,
            incremental_configs=[
                ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            ],
        )
        admin.incremental_alter_configs([change])[change].result(DEADLINE_S)

    def topic_config(key: str) -> tuple[str, ConfigSource]:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        entry = admin.describe_configs([resource])[resource].result(DEADLINE_S)[key]
        return entry.value, ConfigSource(entry.source)

    alter("", "log.retention.ms", "3600000")
    alter("1", "message.max.bytes", "2000")
    assert topic_config("retention.ms") == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    broker = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([broker])[broker].result(DEADLINE_S)
    assert (
        configs["message.max.bytes"].value,
        ConfigSource(configs["message.max.bytes"].source),
    ) == (
        "2000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    # The new limit applies to produce at once: a 3 KB record is refused.
    producer = Producer({"bootstrap.servers": b.bootstrap, "message.max.bytes": 100_000})
    errors: list[KafkaError] = []
    producer.produce(topic, b"x" * 3000, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(DEADLINE_S)
    assert errors and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    b.restart()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert topic_config("retention.ms") == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    # Read-only keys are refused with INVALID_REQUEST naming the config.
    change = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException, match="log.dirs"):
        admin.incremental_alter_configs([change])[change].result(DEADLINE_S)


def test_broker_defaults_show_as_static_with_synonyms(tmp_path: Path, topic: str) -> None:
    with BrokerProcess(tmp_path, {"log.retention.hours": "24"}) as b:
        create_topic(b.bootstrap, topic, 1)
        with kp_admin(b.bootstrap) as kp:
            configs = kp.describe_configs(
                [KpConfigResource("TOPIC", topic, ["retention.ms"])],
                include_synonyms=True,
                config_filter="all",
            )["topic"][topic]
    assert list(configs) == ["retention.ms"]
    entry = configs["retention.ms"]
    assert (entry["value"], entry["config_source"]) == ("86400000", "STATIC_BROKER_CONFIG")
    assert [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]] == [
        ("log.retention.hours", "24", "STATIC_BROKER_CONFIG"),
        ("log.retention.ms", WEEK_MS, "DEFAULT_CONFIG"),
    ]


def test_kafka_python_configs_round_trip(broker: BrokerProcess, topic: str) -> None:
    with kp_admin(broker.bootstrap) as kp:
        kp.create_topics([KpNewTopic(topic, 2, 1)])
        wait_for_topic(broker.bootstrap, topic, 2)
        result = kp.alter_configs([KpConfigResource("TOPIC", topic, {"retention.ms": "5000"})])
        assert result["topic"][topic] == "OK"
        modified = kp.describe_configs([KpConfigResource("TOPIC", topic)])["topic"][topic]
        assert {k: (v["value"], v["config_source"]) for k, v in modified.items()} == {
            "retention.ms": ("5000", "DYNAMIC_TOPIC_CONFIG")
        }
        bad = kp.alter_configs([KpConfigResource("TOPIC", topic, {"retention.ms": "x"})])
        assert "InvalidConfiguration" in str(bad["topic"][topic])


def test_documentation_and_types_from_v4(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 1)
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsResource(2, topic, ["retention.ms", "cleanup.policy"])],
        include_documentation=True,
    )
    with RawClient(broker.bootstrap) as raw:
        (result,) = raw.request(request, 4).results
    assert result.error_code == ErrorCode.NONE
    by_name = {c.name: c for c in result.configs}
    assert sorted(by_name) == ["cleanup.policy", "retention.ms"]
    assert (by_name["retention.ms"].config_type, by_name["cleanup.policy"].config_type) == (5, 7)
    assert all(c.documentation for c in result.configs)


# --- cluster and topics ------------------------------------------------------------


def test_describe_cluster(broker: BrokerProcess, client: AdminClient) -> None:
    cluster = client.describe_cluster().result(DEADLINE_S)
    assert cluster.cluster_id
    assert cluster.controller.id == 1
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, broker.host, broker.port)]
    with kp_admin(broker.bootstrap) as kp:
        described = kp.describe_cluster()
    assert described["cluster_id"] == cluster.cluster_id
    assert described["controller_id"] == 1
    assert [(b["broker_id"], b["port"]) for b in described["brokers"]] == [(1, broker.port)]


def test_create_grow_and_delete_topics(
    broker: BrokerProcess, client: AdminClient, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 2)
    client.create_partitions([NewPartitions(topic, 4)])[topic].result(DEADLINE_S)
    wait_for_topic(broker.bootstrap, topic, 4)
    with kp_admin(broker.bootstrap) as kp:
        kp.create_partitions({topic: KpNewPartitions(5)})
        wait_for_topic(broker.bootstrap, topic, 5)
        kp.delete_topics([topic])
    assert topic_partitions(broker.bootstrap, topic) is None


# --- DeleteRecords -----------------------------------------------------------------


def test_delete_records_moves_the_low_watermark(
    broker: BrokerProcess, client: AdminClient, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 2)
    records = [
        dataclasses.replace(r, partition=0 if i < 100 else 1)
        for i, r in enumerate(make_records(130, seed=21))
    ]
    acked = produce_confluent(broker.bootstrap, topic, records)
    assert watermarks(broker.bootstrap, topic) == {0: (0, 100), 1: (0, 30)}

    futures = client.delete_records([TopicPartition(topic, 0, 40)])
    (future,) = futures.values()
    assert future.result(DEADLINE_S).low_watermark == 40
    with kp_admin(broker.bootstrap) as kp:
        result = kp.delete_records({KpTopicPartition(topic, 1): -1})  # -1: the high watermark
    assert result[KpTopicPartition(topic, 1)]["low_watermark"] == 30
    assert watermarks(broker.bootstrap, topic) == {0: (40, 100), 1: (30, 30)}

    consumed = consume_confluent(broker.bootstrap, topic)
    assert_log_matches(records[40:100], consumed, acked=acked, start_offsets={0: 40, 1: 30})

    consumer = confluent_consumer(broker.bootstrap, **{"auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0)])  # no offset: start where the log starts
        msg = consumer.poll(DEADLINE_S)
        assert msg is not None and msg.error() is None
        assert (msg.offset(), msg.value()) == (40, records[40].value)
    finally:
        consumer.close()


def test_delete_records_errors(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 1)
    produce_confluent(broker.bootstrap, topic, make_records(10, seed=3))
    request = DeleteRecordsRequest(
        topics=[
            DeleteRecordsTopic(
                topic,
                [DeleteRecordsPartition(0, 11), DeleteRecordsPartition(7, 1)],
            ),
            DeleteRecordsTopic("no-such-topic", [DeleteRecordsPartition(0, 1)]),
        ],
        timeout_ms=30000,
    )
    with RawClient(broker.bootstrap) as raw:
        response = raw.request(request, 2)
    got = [
        (t.name, p.partition_index, p.error_code, p.low_watermark)
        for t in response.topics
        for p in t.partitions
    ]
    assert got == [
        (topic, 0, ErrorCode.OFFSET_OUT_OF_RANGE, -1),
        (topic, 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("no-such-topic", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
    ]
    assert watermarks(broker.bootstrap, topic) == {0: (0, 10)}


def test_delete_records_of_a_compacted_topic_is_a_policy_violation(
    broker: BrokerProcess, client: AdminClient, topic: str
) -> None:
    """As Kafka: only topics whose cleanup.policy includes delete lose their head."""
    create_topic(broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    produce_confluent(broker.bootstrap, topic, make_records(10, seed=4))
    (future,) = client.delete_records([TopicPartition(topic, 0, 5)]).values()
    assert error_code(lambda: future.result(DEADLINE_S)) == KafkaError.POLICY_VIOLATION
    assert watermarks(broker.bootstrap, topic) == {0: (0, 10)}


def test_a_topic_created_again_keeps_its_records_across_kill_9(
    fresh_broker: FreshBroker, topic: str
) -> None:
    """The deleted topic's checkpointed log start offset (moved by DeleteRecords) must not
    apply to a new topic of the same name when the broker restarts after a crash."""
    b = fresh_broker()
    admin_client = AdminClient({"bootstrap.servers": b.bootstrap})
    create_topic(b.bootstrap, topic, 1)
    produce_confluent(b.bootstrap, topic, make_records(10, seed=5))
    (future,) = admin_client.delete_records([TopicPartition(topic, 0, 5)]).values()
    assert future.result(DEADLINE_S).low_watermark == 5
    delete_topic(b.bootstrap, topic)
    create_topic(b.bootstrap, topic, 1)
    records = make_records(10, seed=6)
    acked = produce_confluent(b.bootstrap, topic, records)
    b.kill()
    b.start()
    assert watermarks(b.bootstrap, topic) == {0: (0, 10)}
    assert_log_matches(records, consume_confluent(b.bootstrap, topic), acked=acked)


# --- producer ids ------------------------------------------------------------------


def test_idempotent_producers_get_ids_and_their_records_come_back(
    broker: BrokerProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 3)
    first, second = make_records(300, seed=7), make_records(200, seed=8)
    second = [dataclasses.replace(r, value=b"kp-" + r.value) for r in second]
    acked = produce_confluent(broker.bootstrap, topic, first, **{"enable.idempotence": True})
    acked |= produce_kafka_python(broker.bootstrap, topic, second, enable_idempotence=True)
    assert_log_matches(first + second, consume_confluent(broker.bootstrap, topic), acked=acked)
    assert_log_matches(first + second, consume_kafka_python(broker.bootstrap, topic), acked=acked)


def test_init_producer_id_hands_out_fresh_ids_and_errors(broker: BrokerProcess) -> None:
    def init(version: int = 4, **fields: object) -> tuple[int, int, int]:
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
        for name, value in fields.items():
            setattr(request, name, value)
        r = raw.request(request, version)
        return r.error_code, r.producer_id, r.producer_epoch

    with RawClient(broker.bootstrap) as raw:
        code, pid, epoch = init(version=0)
        assert (code, epoch) == (ErrorCode.NONE, 0) and pid >= 0
        _, other, _ = init()
        assert other != pid
        # A recovering idempotent producer (KIP-360) gets a new id, as in Kafka.
        code, fresh, epoch = init(producer_id=pid, producer_epoch=0)
        assert (code, epoch) == (ErrorCode.NONE, 0) and fresh not in (pid, other)
        code, unissued, _ = init(producer_id=10**12, producer_epoch=3)
        assert code == ErrorCode.NONE and unissued != 10**12
        assert init(producer_id=pid, producer_epoch=-1)[0] == ErrorCode.INVALID_REQUEST
        assert init(transactional_id="")[0] == ErrorCode.INVALID_REQUEST


# --- edge cases on the wire --------------------------------------------------------

SET, DELETE = 0, 1


def test_incremental_alter_errors_are_per_resource(
    broker: BrokerProcess, client: AdminClient, topic: str
) -> None:
    a, b, c = (f"{topic}-{x}" for x in "abc")
    for name in (topic, a, b, c):
        create_topic(broker.bootstrap, name, 1)

    def resource(
        name: str, *ops: tuple[str, int, str | None], kind: int = 2
    ) -> inc.AlterConfigsResource:
        return inc.AlterConfigsResource(
            kind, name, [inc.AlterableConfig(n, op, v) for n, op, v in ops]
        )

    request = inc.IncrementalAlterConfigsRequest(
        resources=[
            resource(a, ("segment.ms", SET, "1"), ("segment.ms", DELETE, None)),
            resource(b, ("retention.ms", SET, None)),
            resource(c, ("retention.ms", 9, "1")),
            resource(topic, ("retention.ms", SET, "1")),
            resource(topic, ("retention.ms", SET, "2")),
            resource("1", ("num.partitions", SET, "2"), kind=4),
        ],
    )
    with RawClient(broker.bootstrap) as raw:
        responses = raw.request(request, 1).responses
        assert [r.error_code for r in responses] == [ErrorCode.INVALID_REQUEST] * 6
        reasons = ["duplicate config keys", "Null value", "Unknown config operation"]
        reasons += ["Duplicate resource"] * 2 + ["Cannot update these configs dynamically"]
        for r, reason in zip(responses, reasons, strict=True):
            assert reason in (r.error_message or ""), (r.resource_name, r.error_message)

        ok = resource(topic, ("retention.ms", SET, "1234"))
        check = inc.IncrementalAlterConfigsRequest(resources=[ok], validate_only=True)
        assert raw.request(check, 0).responses[0].error_code == ErrorCode.NONE
        assert describe(client, topic)["retention.ms"].value == WEEK_MS
        apply = inc.IncrementalAlterConfigsRequest(resources=[ok])
        assert raw.request(apply, 1).responses[0].error_code == ErrorCode.NONE
    assert describe(client, topic)["retention.ms"].value == "1234"


def test_describe_configs_resource_errors(broker: BrokerProcess) -> None:
    resources = [
        DescribeConfigsResource(4, "", None),
        DescribeConfigsResource(4, "7", None),
        DescribeConfigsResource(99, "x", None),
        DescribeConfigsResource(2, "bad name!", None),
        DescribeConfigsResource(4, "1", []),
    ]
    with RawClient(broker.bootstrap) as raw:
        results = raw.request(DescribeConfigsRequest(resources=resources), 1).results
    assert [(r.error_code, len(r.configs)) for r in results] == [
        (ErrorCode.NONE, 0),
        (ErrorCode.INVALID_REQUEST, 0),
        (ErrorCode.INVALID_REQUEST, 0),
        (ErrorCode.INVALID_TOPIC_EXCEPTION, 0),
        (ErrorCode.NONE, 0),
    ]


def test_describe_cluster_controllers_endpoint_is_unsupported(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as raw:
        response = raw.request(DescribeClusterRequest(endpoint_type=2), 1)
    assert (response.error_code, response.brokers) == (ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, [])


def test_deleted_records_stay_deleted_after_a_crash(tmp_path: Path, topic: str) -> None:
    with BrokerProcess(tmp_path) as b:
        client = admin(b.bootstrap)
        create_topic(b.bootstrap, topic, 1)
        records = make_records(50, seed=5)
        produce_confluent(b.bootstrap, topic, records)
        (future,) = client.delete_records([TopicPartition(topic, 0, 20)]).values()
        assert future.result(DEADLINE_S).low_watermark == 20
        b.kill()
        b.start()
        assert watermarks(b.bootstrap, topic) == {0: (20, 50)}
        assert_log_matches(
            records[20:], consume_confluent(b.bootstrap, topic), start_offsets={0: 20}
        )


def test_a_newer_epoch_fences_the_old_one_and_restarts_sequences(
    broker: BrokerProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 1)
    records = make_records(6, seed=9)
    with RawClient(broker.bootstrap) as raw:
        first = raw.request(InitProducerIdRequest(transactional_id=None), 4)
        pid = first.producer_id

        def send(recs: list[Rec], epoch: int, sequence: int) -> int:
            batch = build_batch(
                [(r.key, r.value) for r in recs],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=sequence,
            )
            response = raw.request(produce_request(topic, {0: batch}), 9)
            return partition_results(response)[0].error_code

        assert send(records[:3], 0, 0) == ErrorCode.NONE
        assert send(records[3:5], 1, 1) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send(records[3:5], 1, 0) == ErrorCode.NONE
        assert send(records[5:], 0, 3) == ErrorCode.INVALID_PRODUCER_EPOCH
    consumed = consume_confluent(broker.bootstrap, topic)
    assert_log_matches(records[:5], consumed, check_headers=False)


def test_describe_topic_partitions_pages_with_a_cursor(broker: BrokerProcess, topic: str) -> None:
    """KIP-966, as Kafka 3.7+ admin clients describe topics: pages of at most
    response_partition_limit partitions, the next cursor saying where to go on."""
    from moldau.protocol.messages.describe_topic_partitions_request import (
        Cursor,
        DescribeTopicPartitionsRequest,
        TopicRequest,
    )

    create_topic(broker.bootstrap, topic, 5)
    seen: list[int] = []
    cursor = None
    with RawClient(broker.bootstrap) as raw:
        for _ in range(5):
            request = DescribeTopicPartitionsRequest(
                topics=[TopicRequest(name=topic), TopicRequest(name=f"{topic}-missing")],
                response_partition_limit=2,
                cursor=cursor,
            )
            response = raw.request(request, 0)
            mine = [t for t in response.topics if t.name == topic]
            missing = [t for t in response.topics if t.name == f"{topic}-missing"]
            assert [t.error_code for t in missing] in ([], [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
            for t in mine:
                assert all(p.leader_id == 1 and p.isr_nodes == [1] for p in t.partitions)
                seen += [p.partition_index for p in t.partitions]
            cursor = response.next_cursor
            if cursor is None:
                break
            cursor = Cursor(topic_name=cursor.topic_name, partition_index=cursor.partition_index)
    assert seen == [0, 1, 2, 3, 4]
