"""The broker's schema validation over real batches: which partitions it refuses, naming
the first record whose key or value is not framed by a registered schema id."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace

import pytest

from moldau.config.topic import LogConfig
from moldau.protocol.errors import ErrorCode, InvalidRecordError
from moldau.records.compression import Compression
from moldau.records.frames import NULL, UNFRAMED, framed_ids
from moldau.records.record import build_batch
from moldau.replication.replica_manager import AppendResult, TopicPartition
from moldau.server.schema_validation import NO_REGISTRY, SchemaValidation

RECORD_NAME = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
PLAIN = LogConfig()
VALUES = replace(PLAIN, value_schema_validation=True)
KEYS = replace(PLAIN, key_schema_validation=True)


class Ids:
    """The registry's lookup: subject -> registered ids."""

    def __init__(self, ids: dict[str, set[int]], later: dict[str, set[int]] | None = None) -> None:
        self.ids = ids
        self.later = later or {}  # what catching up brings
        self.asked: list[str | None] = []
        self.catch_ups = 0

    def catch_up(self, timeout: float) -> None:
        self.catch_ups += 1
        for subject, ids in self.later.items():
            self.ids.setdefault(subject, set()).update(ids)

    def ids_for_subject(self, subject: str | None) -> frozenset[int]:
        self.asked.append(subject)
        if subject is None:
            return frozenset(i for ids in self.ids.values() for i in ids)
        return frozenset(self.ids.get(subject, ()))


def framed(schema_id: int, body: bytes = b"payload") -> bytes:
    return b"\0" + schema_id.to_bytes(4, "big") + body


def refusals(
    checker: SchemaValidation, entries: Mapping[TopicPartition, bytes]
) -> dict[TopicPartition, AppendResult]:
    return asyncio.run(checker.refusals(entries))


def validation(configs: dict[str, LogConfig], ids: Ids | None) -> SchemaValidation:
    checker = SchemaValidation(lambda topic: configs.get(topic, PLAIN))
    if ids is not None:
        checker.attach(ids)
    return checker


def batch(*values: bytes | None, compression: int = Compression.NONE) -> bytes:
    return build_batch([(None, v) for v in values], compression=compression)


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_first_bad_value_is_named(compression: int) -> None:
    ids = Ids({"t-value": {7}, "other-value": {8}})
    checker = validation({"t": VALUES}, ids)
    good = batch(framed(7), None, framed(7, b""), compression=compression)
    assert refusals(checker, {("t", 0): good}) == {}
    bad = {
        "unframed": b"plain text",
        "unknown id": framed(9),
        "other subject's id": framed(8),
        "magic byte": b"\1" + framed(7)[1:],
        "short": b"\0\0\0",
    }
    for why, value in bad.items():
        refused = refusals(checker, {("t", 0): batch(framed(7), None, framed(7), value)})
        result = refused[("t", 0)]
        message = "record 3: value is not framed by a schema id registered for subject t-value"
        assert (result.error, result.message) == (ErrorCode.INVALID_RECORD, message), why
        assert result.record_errors == ((3, message),), why


def test_keys_and_record_name_strategy() -> None:
    ids = Ids({"t-key": {1}, "some.Record": {5}})
    configs = {
        "t": KEYS,
        "r": replace(VALUES, value_subject_name_strategy=RECORD_NAME),
    }
    checker = validation(configs, ids)
    ok = build_batch([(framed(1), b"unframed value"), (None, b"x")])
    assert refusals(checker, {("t", 0): ok}) == {}
    refused = refusals(checker, {("t", 0): build_batch([(framed(1), None), (framed(5), None)])})
    assert refused[("t", 0)].record_errors[0][0] == 1
    assert "key is not framed" in (refused[("t", 0)].message or "")
    # the record name strategies: an id registered under any subject passes
    assert refusals(checker, {("r", 0): batch(framed(1), framed(5))}) == {}
    refused = refusals(checker, {("r", 0): batch(framed(5), framed(6))})
    assert refused[("r", 0)].message == (
        "record 1: value is not framed by a schema id registered for any subject"
    )


def test_plain_topics_cost_nothing_and_no_registry_refuses() -> None:
    ids = Ids({"t-value": {7}})
    checker = validation({"t": VALUES}, ids)
    entries = {("plain", 0): batch(b"anything"), ("plain", 1): batch(b"x")}
    assert refusals(checker, entries) == {}
    assert ids.asked == []  # no lookup for a topic without validation
    alone = validation({"t": VALUES}, None)
    refused = refusals(alone, {("t", 0): batch(framed(7)), ("plain", 0): batch(b"x")})
    assert list(refused) == [("t", 0)]
    assert (refused[("t", 0)].error, refused[("t", 0)].message) == (
        ErrorCode.INVALID_RECORD,
        NO_REGISTRY,
    )


def test_an_unknown_id_waits_for_the_registry_to_catch_up() -> None:
    """Registered through another node: known here once the registry has read it."""
    ids = Ids({"t-value": {7}}, later={"t-value": {9}})
    checker = validation({"t": VALUES}, ids)
    assert refusals(checker, {("t", 0): batch(framed(7), framed(9))}) == {}
    assert ids.catch_ups == 1
    assert ("t", 0) in refusals(checker, {("t", 0): batch(framed(10))})
    assert refusals(checker, {("t", 0): batch(b"unframed")})  # no id: nothing to wait for
    assert ids.catch_ups == 2


def test_framed_ids_of_every_record() -> None:
    long_key = b"\0\0\0\0\2" + b"k" * 300  # multi-byte length varints
    records = [
        (long_key, framed(1)),
        (None, None),
        (b"", b"ab"),
        (b"\1\0\0\0\1", framed(2**32 - 1, b"v" * 5000)),
    ]
    for compression in (Compression.NONE, Compression.LZ4):
        keys, values = framed_ids(build_batch(records, compression=compression))
        assert keys.tolist() == [2, NULL, UNFRAMED, UNFRAMED]
        assert values.tolist() == [1, NULL, UNFRAMED, 2**32 - 1]
    whole = bytearray(build_batch(records))
    whole[62] = 0x7F  # the first record's length (two bytes): far past the batch
    with pytest.raises(InvalidRecordError):
        framed_ids(whole)
