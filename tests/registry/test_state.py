"""The registry's pure core: `_schemas` records -> state, and the operations over a log
kept in memory (the records each operation writes are applied back, as the store does)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

import pytest

from moldau.registry.compatibility import check
from moldau.registry.errors import RegistryError
from moldau.registry.formats.catalog import FORMATS
from moldau.registry.records import Key, decode_value, encode_value
from moldau.registry.service import Record, SchemaRegistry
from moldau.registry.state import RegistryState


class MemoryLog:
    """The store over a list of encoded records (what `_schemas` would hold)."""

    def __init__(self) -> None:
        self.state = RegistryState()
        self.lock = threading.RLock()
        self.records: list[tuple[bytes, bytes | None]] = []

    def catch_up(self) -> None:
        pass

    def write(self, records: Sequence[Record]) -> None:
        for key, value in records:
            self.records.append((key.encode(), encode_value(value)))
            self.state.apply(
                len(self.records) - 1,
                Key.decode(self.records[-1][0]),
                decode_value(self.records[-1][1]),
            )

    def replay(self) -> RegistryState:
        state = RegistryState()
        for offset, (key, value) in enumerate(self.records):
            state.apply(offset, Key.decode(key), decode_value(value))
        return state


def record(name: str, *fields: tuple[str, str]) -> str:
    return json.dumps(
        {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}
    )


@pytest.fixture
def log() -> MemoryLog:
    return MemoryLog()


@pytest.fixture
def registry(log: MemoryLog) -> SchemaRegistry:
    return SchemaRegistry(log, FORMATS, check)


def refused(code: int, fn, *args) -> RegistryError:  # type: ignore[no-untyped-def]
    with pytest.raises(RegistryError) as e:
        fn(*args)
    assert e.value.error_code == code, e.value.message
    return e.value


def test_keys_are_confluents_bytes() -> None:
    assert (
        Key("SCHEMA", "s", 1).encode()
        == b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    )
    assert Key("CONFIG", None).encode() == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert Key("NOOP").encode() == b'{"keytype":"NOOP","magic":0}'
    assert Key.decode(b"not json") is None
    assert Key.decode(b'{"keytype":"SCHEMA","subject":"s","version":3,"magic":1}') == Key(
        "SCHEMA", "s", 3
    )


def test_register_versions_and_ids(registry: SchemaRegistry, log: MemoryLog) -> None:
    a = {"schema": record("A", ("x", "int"))}
    first = registry.register("s-value", a, False)
    assert registry.register("s-value", a, False) == first  # the same schema: same id, no write
    assert len(log.records) == 1
    assert registry.register("other", a, False) == first  # same content, other subject: same id
    b = {"schema": record("A", ("x", "int"), ("y", "string"))}
    # BACKWARD (the default): a new field without a default cannot read old data
    refused(409, registry.register, "s-value", b, False)
    b = {
        "schema": json.dumps(
            {
                **json.loads(b["schema"]),
                "fields": [
                    {"name": "x", "type": "int"},
                    {"name": "y", "type": "string", "default": ""},
                ],
            }
        )
    }
    second = registry.register("s-value", b, False)
    assert second == first + 1
    assert registry.version_numbers("s-value", False) == [1, 2]
    assert registry.version("s-value", "latest").id == second
    assert registry.subjects(False) == ["other", "s-value"]
    assert registry.subjects_of_id(first, False) == [
        {"subject": "other", "version": 1},
        {"subject": "s-value", "version": 1},
    ]
    assert log.replay().subjects == log.state.subjects  # replaying the log gives the same state


def test_errors(registry: SchemaRegistry) -> None:
    refused(40401, registry.version_numbers, "nothing", False)
    refused(42201, registry.register, "s", {"schema": "{not avro"}, False)
    refused(42201, registry.register, "s", {"schema": '"int"', "schemaType": "XML"}, False)
    registry.register("s", {"schema": '"int"'}, False)
    refused(40402, registry.version, "s", "7")
    refused(42202, registry.version, "s", "zero")
    refused(40403, registry.schema_by_id, 99)
    refused(40403, registry.lookup, "s", {"schema": '"long"'}, False, False)
    refused(40408, registry.config, "s", False)
    refused(42203, registry.set_config, None, {"compatibility": "SIDEWAYS"})
    refused(42204, registry.set_mode, None, {"mode": "WRITEONLY"}, False)


def test_deletes_soft_then_hard(registry: SchemaRegistry, log: MemoryLog) -> None:
    sid = registry.register("s", {"schema": '"string"'}, False)
    refused(40405, registry.delete_subject, "s", True)  # hard delete needs a soft one first
    assert registry.delete_subject("s", False) == [1]
    assert registry.subjects(False) == []
    assert registry.subjects(True) == ["s"]
    assert registry.schema_by_id(sid) == {"schema": '"string"'}  # still readable by id
    refused(40404, registry.delete_subject, "s", False)
    assert registry.delete_subject("s", True) == [1]
    assert registry.subjects(True) == []
    refused(40403, registry.schema_by_id, sid)
    # the id is never handed out again, even after a hard delete
    assert registry.register("s", {"schema": '"bytes"'}, False) == sid + 1
    assert log.replay().max_id == sid + 1


def test_version_delete_and_import_mode(registry: SchemaRegistry) -> None:
    registry.set_config("s", {"compatibility": "NONE"})
    registry.register("s", {"schema": '"int"'}, False)
    registry.register("s", {"schema": '"string"'}, False)
    refused(40407, registry.delete_version, "s", "1", True)
    assert registry.delete_version("s", "1", False) == 1
    assert registry.version_numbers("s", False) == [2]
    assert registry.version_numbers("s", True) == [1, 2]
    assert registry.delete_version("s", "1", True) == 1
    assert registry.version_numbers("s", True) == [2]
    refused(42205, registry.register, "t", {"schema": '"int"', "id": 50}, False)
    refused(42205, registry.set_mode, None, {"mode": "IMPORT"}, False)  # subjects exist
    registry.set_mode(None, {"mode": "IMPORT"}, True)
    assert registry.register("t", {"schema": '"long"', "id": 50, "version": 3}, False) == 50
    assert registry.version("t", "3").id == 50
    refused(42205, registry.register, "u", {"schema": '"float"', "id": 50}, False)
    registry.set_mode(None, {"mode": "READWRITE"}, False)
    assert registry.register("u", {"schema": '"float"'}, False) == 51  # above imported ids
    registry.set_mode("u", {"mode": "READONLY"}, False)
    refused(42205, registry.register, "u", {"schema": '"double"'}, False)


def test_compatibility_check_and_config(registry: SchemaRegistry) -> None:
    registry.register("s", {"schema": record("R", ("a", "int"))}, False)
    new = {"schema": record("R", ("a", "int"), ("b", "int"))}
    assert registry.check("s", "latest", new, False)  # messages: not compatible
    assert registry.check("s", None, new, False)
    registry.set_config("s", {"compatibility": "FORWARD"})
    assert registry.config("s", False) == {"compatibilityLevel": "FORWARD"}
    assert registry.check("s", "1", new, False) == []  # old readers ignore the new field
    assert registry.delete_config("s") == {"compatibilityLevel": "FORWARD"}
    assert registry.config("s", True) == {"compatibilityLevel": "BACKWARD"}


def test_live_ids_for_validation(registry: SchemaRegistry, log: MemoryLog) -> None:
    a = registry.register("t-value", {"schema": '"string"'}, False)
    b = registry.register("t-value", {"schema": '"bytes"'}, False)
    c = registry.register("u-value", {"schema": '"long"'}, False)
    assert log.state.live_ids("t-value") == {a, b}
    assert log.state.live_ids(None) == {a, b, c}
    assert log.state.live_ids("nope") == frozenset()
    registry.delete_version("t-value", "1", False)  # soft-deleted: no longer passes
    assert log.state.live_ids("t-value") == {b}
    assert log.state.live_ids(None) == {b, c}
