"""confluent-kafka's SchemaRegistryClient and its Avro, JSON Schema and Protobuf serializers
against `moldau server` with its registry: records go through a topic framed with the
registered ids and come back; the REST API's errors; `moldau schemas`."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.registry.conftest import RegistryBroker, call, free_port, wait_ready

USER_V1 = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}
USER_V2 = {
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "email", "type": "string", "default": ""}],
}


def round_trip(
    broker: RegistryBroker, topic: str, serializer: Any, deserializer: Any, values: list[Any]
) -> set[int]:
    """Produce `values` serialized, consume them back deserialized (in order); the ids the
    records were framed with."""
    broker.broker.create_topic(topic, partitions=1)
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": broker.broker.bootstrap})
    for value in values:
        producer.produce(topic, serializer(value, context))
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.broker.bootstrap,
            "group.id": f"{topic}-reader",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    back, ids = [], set()
    try:
        while len(back) < len(values):
            message = consumer.poll(30)
            assert message is not None, f"only {len(back)} of {len(values)} records came back"
            assert message.error() is None, message.error()
            raw = message.value()
            assert raw[0] == 0  # Confluent's framing: magic byte 0, then the id
            ids.add(int.from_bytes(raw[1:5], "big"))
            back.append(deserializer(raw, context))
    finally:
        consumer.close()
    assert back == values
    return ids


def test_avro_records_round_trip(registry_broker: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry_broker.url})
    users = [{"name": f"user{i}", "age": i} for i in range(20)]
    # a fresh client deserializes: the ids must resolve through the registry, not a cache
    ids = round_trip(
        registry_broker,
        "users-avro",
        AvroSerializer(client, json.dumps(USER_V1)),
        AvroDeserializer(SchemaRegistryClient({"url": registry_broker.url})),
        users,
    )
    registered = client.get_latest_version("users-avro-value")
    assert ids == {registered.schema_id}
    assert json.loads(registered.schema.schema_str) == USER_V1


def test_json_schema_records_round_trip(registry_broker: RegistryBroker) -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Payment",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "amount": {"type": "number"}},
        "required": ["id", "amount"],
    }
    client = SchemaRegistryClient({"url": registry_broker.url})
    payments = [{"id": i, "amount": i * 1.5} for i in range(10)]
    ids = round_trip(
        registry_broker,
        "payments-json",
        JSONSerializer(json.dumps(schema), client),
        JSONDeserializer(
            None, schema_registry_client=SchemaRegistryClient({"url": registry_broker.url})
        ),
        payments,
    )
    registered = client.get_latest_version("payments-json-value")
    assert ids == {registered.schema_id}
    assert registered.schema.schema_type == "JSON"


def order_class() -> Any:
    """A Protobuf message class built at run time (no generated code needed)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3")
    message = file.message_type.add(name="Order")
    field = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    message.field.add(name="item", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_records_round_trip(registry_broker: RegistryBroker) -> None:
    order = order_class()
    client = SchemaRegistryClient({"url": registry_broker.url})
    orders = [order(id=i, item=f"item{i}") for i in range(10)]
    ids = round_trip(
        registry_broker,
        "orders-proto",
        ProtobufSerializer(order, client, {"use.deprecated.format": False}),
        # with a registry client it fetches the writer's schema (format=serialized)
        ProtobufDeserializer(
            order,
            {"use.deprecated.format": False},
            schema_registry_client=SchemaRegistryClient({"url": registry_broker.url}),
        ),
        orders,
    )
    registered = client.get_latest_version("orders-proto-value")
    assert ids == {registered.schema_id}
    assert registered.schema.schema_type == "PROTOBUF"
    assert "message Order" in registered.schema.schema_str  # stored as .proto text
    from google.protobuf import descriptor_pb2

    serialized = call(f"{registry_broker.url}/schemas/ids/{registered.schema_id}?format=serialized")
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized[1]["schema"]))
    assert [m.name for m in file.message_type] == ["Order"]


def test_client_operations(registry_broker: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry_broker.url})
    subject = "client-ops-value"
    first = client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    assert client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO")) == first
    assert client.test_compatibility(subject, Schema(json.dumps(USER_V2), "AVRO"))
    second = client.register_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))
    assert second > first
    assert client.get_versions(subject) == [1, 2]
    found = client.lookup_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    assert (found.schema_id, found.version) == (first, 1)
    assert subject in client.get_subjects()
    assert client.get_version(subject, 2).schema_id == second
    # adding a field without a default breaks BACKWARD
    broken = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "x", "type": "long"}]}
    assert not client.test_compatibility(subject, Schema(json.dumps(broken), "AVRO"))
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema(subject, Schema(json.dumps(broken), "AVRO"))
    assert e.value.error_code == 409
    client.set_compatibility(subject, "NONE")
    assert client.get_compatibility(subject) == "NONE"
    assert client.delete_version(subject, 1) == 1
    assert client.get_versions(subject) == [2]
    assert client.delete_subject(subject) == [2]
    assert client.delete_subject(subject, permanent=True) == [1, 2]
    assert subject not in client.get_subjects()


def test_rest_error_codes(registry_broker: RegistryBroker) -> None:
    url = registry_broker.url
    assert call(url + "/subjects/none-such/versions") == (
        404,
        {"error_code": 40401, "message": "Subject 'none-such' not found."},
    )
    errs = {**USER_V1, "name": "Errs"}
    status, body = call(url + "/subjects/errs/versions", "POST", {"schema": json.dumps(errs)})
    assert status == 200 and set(body) == {"id"}
    assert call(url + "/subjects/errs/versions/9")[1]["error_code"] == 40402
    assert call(url + "/subjects/errs/versions/x")[1]["error_code"] == 42202
    assert call(url + "/schemas/ids/987654")[1]["error_code"] == 40403
    bad = call(url + "/subjects/errs/versions", "POST", {"schema": "{nope"})
    assert bad[0] == 422 and bad[1]["error_code"] == 42201
    assert call(url + "/config/errs")[1]["error_code"] == 40408
    assert call(url + "/config", "PUT", {"compatibility": "nope"})[1]["error_code"] == 42203
    assert call(url + "/mode", "PUT", {"mode": "nope"})[1]["error_code"] == 42204
    assert call(url + "/mode/errs")[1]["error_code"] == 40409
    assert call(url + "/mode") == (200, {"mode": "READWRITE"})
    assert "AVRO" in call(url + "/schemas/types")[1]
    status, versions = call(url + f"/schemas/ids/{body['id']}/versions")
    assert versions == [{"subject": "errs", "version": 1}]
    assert call(url + "/subjects/errs/versions/1/referencedby") == (200, [])
    verbose = call(
        url + "/compatibility/subjects/errs/versions/latest?verbose=true",
        "POST",
        {"schema": json.dumps({**errs, "fields": [{"name": "z", "type": "int"}]})},
    )[1]
    assert verbose["is_compatible"] is False and verbose["messages"]
    assert call(url + "/nowhere")[0] == 404


def test_schemas_cli(registry_broker: RegistryBroker, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from moldau.cli.main import app

    def run(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, ["schemas", *args, "--url", registry_broker.url])
        return result.exit_code, result.output

    v1, v2 = tmp_path / "v1.avsc", tmp_path / "v2.avsc"
    v1.write_text(json.dumps({**USER_V1, "name": "CliUser"}))
    v2.write_text(
        json.dumps({**USER_V1, "name": "CliUser", "fields": [{"name": "other", "type": "int"}]})
    )
    code, printed = run("register", "cli-value", "--file", str(v1))
    assert code == 0, printed
    schema_id = int(printed)
    assert json.loads(run("get", "cli-value")[1])["id"] == schema_id
    code, printed = run("list", "--json")
    assert {"subject": "cli-value", "versions": [1]} in json.loads(printed)
    code, printed = run("check", "cli-value", "--file", str(v2))
    assert code == 1 and "incompatible" in printed
    assert run("config", "cli-value", "--level", "none") == (0, "NONE\n")
    assert run("check", "cli-value", "--file", str(v2)) == (0, "compatible\n")
    assert run("delete", "cli-value")[0] == 0
    code, printed = run("get", "cli-value")
    assert code == 1 and "40401" in printed


def test_standalone_registry_joins_the_in_server_one(registry_broker: RegistryBroker) -> None:
    """`moldau registry` against the same cluster: one registry with two nodes (one
    `_schemas`, one primary), whichever node a client asks."""
    url = f"http://127.0.0.1:{free_port()}"
    process = subprocess.Popen(
        [sys.executable, "-m", "moldau", "registry", "-b", registry_broker.broker.bootstrap]
        + ["--listener", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_ready(url)
        through_standalone = {"schema": json.dumps({**USER_V1, "name": "Standalone"})}
        status, answer = call(
            url + "/subjects/standalone-value/versions", "POST", through_standalone
        )
        assert status == 200, answer
        found = call(registry_broker.url + "/subjects/standalone-value/versions/latest")[1]
        assert found["id"] == answer["id"]
        through_broker = {"schema": json.dumps({**USER_V1, "name": "InServer"})}
        status, second = call(
            registry_broker.url + "/subjects/in-server-value/versions", "POST", through_broker
        )
        assert status == 200 and second["id"] > answer["id"]
        assert call(url + f"/schemas/ids/{second['id']}")[0] == 200
    finally:
        process.terminate()
        output = process.communicate(timeout=60)[0].decode(errors="replace")
    assert process.returncode in (0, -15), output
