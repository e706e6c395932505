"""Broker-side schema validation (`confluent.value.schema.validation`) against `moldau
server` with its registry, through confluent-kafka: records framed with an id registered
for the topic's subject are stored and come back; a batch with an unframed record, an
unknown id or another subject's id is refused whole with INVALID_RECORD."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import ConfigResource
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from moldau.protocol.errors import ErrorCode
from moldau.records.compression import Compression
from moldau.records.record import build_batch
from tests.integration.helpers import (
    PRODUCE_VERSION,
    RawClient,
    admin,
    alter_topic_config,
    produce_request,
    wait_until,
)
from tests.registry.conftest import RegistryBroker

PING = {"type": "record", "name": "Ping", "fields": [{"name": "n", "type": "int"}]}
PONG = {"type": "record", "name": "Pong", "fields": [{"name": "s", "type": "string"}]}


def framed(schema_id: int, body: bytes = b"\x02") -> bytes:
    return b"\0" + schema_id.to_bytes(4, "big") + body


def produce_batch(broker: RegistryBroker, topic: str, records: list[tuple[Any, Any]]) -> list[Any]:
    """Produce `records` (key, value) as one batch (acks=all); each one's delivery error."""
    producer = Producer(
        {
            "bootstrap.servers": broker.broker.bootstrap,
            "linger.ms": 1000,
            "retries": 0,
            "enable.idempotence": False,
        }
    )
    errors: list[Any] = [None] * len(records)
    delivered = [False] * len(records)

    def report(index: int) -> Any:
        def on_delivery(err: Any, _msg: Any) -> None:
            errors[index], delivered[index] = err, True

        return on_delivery

    for i, (key, value) in enumerate(records):
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=report(i))
    assert producer.flush(60) == 0
    assert all(delivered)
    return errors


def stored(broker: RegistryBroker, topic: str) -> list[tuple[Any, Any]]:
    return [(r.key, r.value) for r in broker.broker.consume(topic, timeout=30)]


@pytest.fixture(scope="module")
def ids(registry_broker: RegistryBroker) -> dict[str, int]:
    """Ping registered for each `checked-*-value`, Pong for `other-value` (another id)."""
    client = SchemaRegistryClient({"url": registry_broker.url})
    ping = Schema(json.dumps(PING), "AVRO")
    found = {
        f"{bad}-value": client.register_schema(f"checked-{bad}-value", ping)
        for bad in ("unframed", "unknown", "other")
    }
    assert len(set(found.values())) == 1  # the same schema keeps its id
    return {
        "ping": found["unframed-value"],
        "pong": client.register_schema("other-value", Schema(json.dumps(PONG), "AVRO")),
    }


def test_framed_records_pass_and_come_back(
    registry_broker: RegistryBroker, ids: dict[str, int]
) -> None:
    topic = registry_broker.broker.create_topic(
        "framed", partitions=1, confluent_value_schema_validation=True
    )
    client = SchemaRegistryClient({"url": registry_broker.url})
    serialize = AvroSerializer(client, json.dumps(PING), conf={"auto.register.schemas": True})
    context = SerializationContext(topic, MessageField.VALUE)
    values = [serialize({"n": i}, context) for i in range(10)]
    records = [(None, v) for v in values] + [(b"gone", None)]  # a tombstone passes
    assert produce_batch(registry_broker, topic, records) == [None] * len(records)
    assert stored(registry_broker, topic) == records


@pytest.mark.parametrize("bad", ["unframed", "unknown id", "other subject's id"])
def test_a_bad_record_refuses_its_batch(
    registry_broker: RegistryBroker, ids: dict[str, int], bad: str
) -> None:
    topic = f"checked-{bad.split()[0]}"
    registry_broker.broker.create_topic(topic, partitions=1, confluent_value_schema_validation=True)
    value = {
        "unframed": b"plain text",
        "unknown id": framed(max(ids.values()) + 1000),
        "other subject's id": framed(ids["pong"]),
    }[bad]
    good = (None, framed(ids["ping"]))
    errors = produce_batch(registry_broker, topic, [good, good, (None, value), good])
    assert all(e is not None and e.code() == KafkaError.INVALID_RECORD for e in errors), errors
    # nothing of the refused batch was stored: the next good batch is all the log holds
    assert produce_batch(registry_broker, topic, [good]) == [None]
    assert stored(registry_broker, topic) == [good]


def test_the_refusal_names_the_record(registry_broker: RegistryBroker, ids: dict[str, int]) -> None:
    """What librdkafka does not show: the message and RecordErrors of the response."""
    topic = registry_broker.broker.create_topic(
        "checked-wire", partitions=1, confluent_value_schema_validation=True
    )
    client = SchemaRegistryClient({"url": registry_broker.url})
    ok = framed(client.register_schema(f"{topic}-value", Schema(json.dumps(PING), "AVRO")))
    records = [(None, ok), (None, None), (None, ok), (None, framed(ids["pong"])), (None, b"x")]
    with RawClient(registry_broker.broker.bootstrap) as raw:
        response = raw.request(
            produce_request(topic, {0: build_batch(records, compression=Compression.LZ4)}),
            PRODUCE_VERSION,
        )
    (result,) = response.responses[0].partition_responses
    message = f"record 3: value is not framed by a schema id registered for subject {topic}-value"
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_RECORD, message)
    assert [(e.batch_index, e.batch_index_error_message) for e in result.record_errors] == [
        (3, message)
    ]


def test_plain_topic_is_unaffected(registry_broker: RegistryBroker) -> None:
    topic = registry_broker.broker.create_topic("plain", partitions=1)
    records = [(b"k", b"plain text"), (None, framed(123456))]
    assert produce_batch(registry_broker, topic, records) == [None, None]
    assert stored(registry_broker, topic) == records


def described(bootstrap: str, topic: str) -> str:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = admin(bootstrap)  # must outlive its futures
    configs = client.describe_configs([resource])[resource].result(timeout=30)
    return str(configs["confluent.value.schema.validation"].value)


def test_validation_switched_on_later(registry_broker: RegistryBroker) -> None:
    """IncrementalAlterConfigs turns it on for an existing topic: the next batch is checked."""
    topic = registry_broker.broker.create_topic("switched", partitions=1)
    assert produce_batch(registry_broker, topic, [(None, b"before")]) == [None]
    bootstrap = registry_broker.broker.bootstrap
    alter_topic_config(bootstrap, topic, {"confluent.value.schema.validation": "true"})
    wait_until(lambda: described(bootstrap, topic) == "true", "the config in the metadata")
    errors = produce_batch(registry_broker, topic, [(None, b"after")])
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    assert stored(registry_broker, topic) == [(None, b"before")]
