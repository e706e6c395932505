"""The console's schema pages and its decoding of registry-framed records, in Chromium,
against a broker with its in-server registry (found by the console through the broker's
configs) and records produced with confluent-kafka's serializers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from playwright.sync_api import Page, expect

from moldau.console.registry import Registry
from tests.console.conftest import Console, start_console, stop_console
from tests.registry.conftest import RegistryBroker
from tests.registry.test_clients import USER_V1, USER_V2, order_class

TOPIC = "users"
SUBJECT = f"{TOPIC}-value"
# (schema, value) in produce order: two versions of one subject, then an unframed value.
USERS = [
    (USER_V1, {"name": "ada", "age": 36}),
    (USER_V2, {"name": "grace", "age": 45, "email": "grace@example.com"}),
]
PLAIN = b"plain text, no schema"


@pytest.fixture(scope="module")
def client(registry_broker: RegistryBroker) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry_broker.url})


@pytest.fixture(scope="module")
def produced(registry_broker: RegistryBroker, client: SchemaRegistryClient) -> list[int]:
    """The users, Avro keys and values (one partition, in order), then a plain record; the
    values' schema ids."""
    bootstrap = registry_broker.broker.bootstrap
    registry_broker.broker.create_topic(TOPIC, partitions=1)
    key_serializer = AvroSerializer(client, '"string"')
    keys = SerializationContext(TOPIC, MessageField.KEY)
    values = SerializationContext(TOPIC, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    ids = []
    for schema, user in USERS:
        value = AvroSerializer(client, json.dumps(schema))(user, values)
        ids.append(int.from_bytes(value[1:5], "big"))
        producer.produce(TOPIC, value, key_serializer(user["name"], keys))
    producer.produce(TOPIC, PLAIN)
    assert producer.flush(30) == 0
    client.set_compatibility(SUBJECT, "FULL")
    return ids


@pytest.fixture(scope="module")
def console(registry_broker: RegistryBroker) -> Iterator[Console]:
    running = start_console(registry_broker.broker.bootstrap)  # no --schema-registry
    yield running
    stop_console(running)


def test_subjects_versions_schema_and_diff(
    page: Page, console: Console, produced: list[int]
) -> None:
    page.goto(console.page_url("/schemas"))
    row = page.locator(f"#subjects tr[data-subject='{SUBJECT}']")
    expect(row.locator(".version")).to_have_text("2")
    expect(row.locator(".type")).to_have_text("AVRO")
    expect(row.locator(".compatibility")).to_have_text("FULL")
    key_row = page.locator(f"#subjects tr[data-subject='{TOPIC}-key']")
    expect(key_row.locator(".compatibility")).to_have_text("BACKWARD")  # the global level

    row.get_by_role("link", name=SUBJECT).click()
    expect(page.locator("#versions tbody tr")).to_have_count(2)
    expect(page.locator("#versions tr[data-version='1'] td").nth(1)).to_have_text(str(produced[0]))
    page.locator("#versions tr[data-version='1']").get_by_role("link", name="1").click()
    schema = json.loads(page.locator("#schema").inner_text())
    assert [f["name"] for f in schema["fields"]] == ["name", "age"]

    page.goto(console.page_url(f"/schemas/{SUBJECT}"))
    page.locator("#diff-form button").click()
    added = page.locator("#diff .add").all_inner_texts()
    assert any('"name": "email"' in line for line in added), added
    assert page.locator("#diff .del").count() <= 1  # at most the closing brace before it
    expect(page.locator("h1")).to_contain_text("version 1 → 2")


def test_message_browser_decodes_framed_records(
    page: Page, console: Console, produced: list[int]
) -> None:
    page.goto(console.page_url(f"/topics/{TOPIC}/messages?start=oldest"))
    rows = page.locator("#record-rows tr.record")
    expect(rows).to_have_count(3)
    for offset, ((_, user), schema_id) in enumerate(zip(USERS, produced, strict=True)):
        row = page.locator(f"#record-rows tr[data-offset='{offset}']")
        value = row.locator("td.value")
        expect(value.locator(".schema-ref")).to_have_text(
            f"avro · id {schema_id} · {SUBJECT} v{offset + 1}"
        )
        assert json.loads(value.locator("code.preview").inner_text()) == user
        key = row.locator("td.key")
        expect(key.locator(".schema-ref")).to_contain_text(f"{TOPIC}-key v1")
        assert json.loads(key.locator("code.preview").inner_text()) == user["name"]
    plain = page.locator("#record-rows tr[data-offset='2'] td.value")
    expect(plain.locator(".schema-ref")).to_have_count(0)
    expect(plain.locator("code.preview")).to_have_text(PLAIN.decode())
    # Another format shows the bytes as they are.
    page.goto(console.page_url(f"/topics/{TOPIC}/messages?start=oldest&format=hex"))
    expect(page.locator("#record-rows .schema-ref")).to_have_count(0)


def test_json_schema_and_protobuf_values_decode(
    registry_broker: RegistryBroker, client: SchemaRegistryClient
) -> None:
    """The decoder the browser uses, on values framed by the other two serializers."""
    schema = {"type": "object", "properties": {"amount": {"type": "number"}}}
    payment = {"amount": 12.5}
    context = SerializationContext("payments", MessageField.VALUE)
    json_value = JSONSerializer(json.dumps(schema), client)(payment, context)
    order = order_class()
    proto_context = SerializationContext("orders", MessageField.VALUE)
    serializer = ProtobufSerializer(order, client, {"use.deprecated.format": False})
    proto_value = serializer(order(id=7, item="book"), proto_context)
    registry = Registry(registry_broker.url)
    decoded: dict[str, Any] = {}
    for subject, value in (("payments-value", json_value), ("orders-value", proto_value)):
        got = registry.decode(value, subject)
        assert got is not None and not got.error, got
        assert got.subject == (subject, 1)
        decoded[subject] = json.loads(got.text)
    assert decoded == {"payments-value": payment, "orders-value": {"id": "7", "item": "book"}}
    assert registry.decode(b"\0\0\0\x7f\xffxyz", "x-value").error  # an id nobody registered
