"""`valueFormat`: values framed by confluent-kafka's serializers become typed columns, and back."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.spark.clients import consume_all, create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.slow]

V1 = {
    "type": "record",
    "name": "User",
    "namespace": "moldau.test",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "scores", "type": {"type": "map", "values": "long"}},
        {
            "name": "address",
            "type": {
                "type": "record",
                "name": "Address",
                "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "int"}],
            },
        },
        {"name": "born", "type": {"type": "int", "logicalType": "date"}},
        {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "balance",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
    ],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "country", "type": "string", "default": "CZ"}]}


def _user(i: int, country: str | None) -> dict[str, Any]:
    user = {
        "name": f"user-{i}",
        "age": 20 + i,
        "email": None if i % 2 else f"u{i}@example.com",
        "tags": [f"t{j}" for j in range(i % 3)],
        "scores": {f"s{j}": i * 10 + j for j in range(i % 2 + 1)},
        "address": {"city": f"city-{i}", "zip": 10000 + i},
        "born": dt.date(1990, 1, 1) + dt.timedelta(days=i),
        "seen": dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=1001 * i),
        "balance": Decimal(f"{i}.{i % 100:02d}"),
    }
    if country is not None:
        user["country"] = country
    return user


def _as_spark_row(user: dict[str, Any]) -> dict[str, Any]:
    """How Spark hands a timestamp to Python: naive, in the Python process's time zone."""
    return {**user, "seen": dt.datetime.fromtimestamp(user["seen"].timestamp())}


def _serialize(url: str, topic: str, schema: dict, users: list[dict]) -> list[bytes]:
    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(schema))
    context = SerializationContext(topic, MessageField.VALUE)
    return [serializer(u, context) for u in users]


def _read(spark, bootstrap: str, url: str, topic: str):
    return (
        spark.read.format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "avro")
        .option("schemaRegistryUrl", url)
        .load()
    )


@pytest.fixture(scope="module")
def users(registry_broker) -> str:
    """Topic `users`: 6 records of schema v1, then 6 of v2 (which adds `country`)."""
    bootstrap, url, topic = registry_broker.broker.bootstrap, registry_broker.url, "users"
    create_topic(bootstrap, topic, 2)
    old = [_user(i, None) for i in range(6)]
    new = [_user(i, f"C{i}") for i in range(6, 12)]
    values = _serialize(url, topic, V1, old) + _serialize(url, topic, V2, new)
    produce(bootstrap, topic, [(i % 2, b"k%d" % i, v) for i, v in enumerate(values)])
    return topic


def test_avro_values_of_two_versions_read_as_the_latest(spark, registry_broker, users):
    bootstrap, url, topic = registry_broker.broker.bootstrap, registry_broker.url, users
    df = _read(spark, bootstrap, url, topic)
    assert [f.name for f in df.schema["value"].dataType.fields] == [f["name"] for f in V2["fields"]]
    rows = df.select("key", "value.*").collect()
    got = {r["key"]: r.asDict(recursive=True) for r in rows}
    want = [_user(i, "CZ") for i in range(6)] + [_user(i, f"C{i}") for i in range(6, 12)]
    assert len(rows) == len(want) == 12  # old records got the default country
    for i, user in enumerate(want):  # the second half: new records keep their country
        assert got[b"k%d" % i] == {"key": b"k%d" % i, **_as_spark_row(user)}


def test_avro_sink_frames_values_for_avro_deserializer(spark, registry_broker, users):
    bootstrap, url, topic = registry_broker.broker.bootstrap, registry_broker.url, "users-copy"
    create_topic(bootstrap, topic, 1)
    SchemaRegistryClient({"url": url}).register_schema(
        f"{topic}-value", Schema(json.dumps(V2), "AVRO")
    )  # the sink writes with the subject's latest schema
    source = _read(spark, bootstrap, url, users).where("value.age >= 26")
    source.select("key", "value").coalesce(1).write.format("moldau").mode("append").option(
        "kafka.bootstrap.servers", bootstrap
    ).option("topic", topic).option("valueFormat", "avro").option("schemaRegistryUrl", url).save()
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": url}))
    context = SerializationContext(topic, MessageField.VALUE)
    got = sorted(
        (deserializer(r.value, context) for r in consume_all(bootstrap, topic)),
        key=lambda u: u["age"],
    )
    assert got == [_user(i, f"C{i}") for i in range(6, 12)]


def test_json_schema_values_read_as_typed_columns(spark, registry_broker):
    bootstrap, url, topic = registry_broker.broker.bootstrap, registry_broker.url, "json-users"
    create_topic(bootstrap, topic, 1)
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "score": {"type": ["number", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "address": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    serializer = JSONSerializer(json.dumps(schema), SchemaRegistryClient({"url": url}))
    context = SerializationContext(topic, MessageField.VALUE)
    users = [
        {
            "name": f"j{i}",
            "age": i,
            "score": i / 2 if i else None,
            "tags": ["a"] * i,
            "address": {"city": f"c{i}"},
        }
        for i in range(4)
    ]
    produce(bootstrap, topic, [(0, None, serializer(u, context)) for u in users])
    df = (
        spark.read.format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "json")
        .option("schemaRegistryUrl", url)
        .load()
    )
    # Fields in the order of the registry's canonical text (Moldau's sorts the keys).
    assert df.schema["value"].dataType.simpleString() == (
        "struct<address:struct<city:string>,age:bigint,name:string,score:double,tags:array<string>>"
    )
    got = [r.asDict(recursive=True) for r in df.orderBy("offset").select("value.*").collect()]
    assert got == users
