"""The broker's schema validation over real batches: which partitions it refuses, naming
the first record whose key or value is not framed by a registered schema id."""

from __future__ import annotations

from dataclasses import replace

import pytest

from moldau.config.topic import LogConfig
from moldau.protocol.errors import ErrorCode
from moldau.records.compression import Compression
from moldau.records.record import build_batch, key_value_heads
from moldau.server.schema_validation import NO_REGISTRY, SchemaValidation

RECORD_NAME = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
PLAIN = LogConfig()
VALUES = replace(PLAIN, value_schema_validation=True)
KEYS = replace(PLAIN, key_schema_validation=True)


class Ids:
    """The registry's lookup: subject -> registered ids."""

    def __init__(self, ids: dict[str, set[int]]) -> None:
        self.ids = ids
        self.asked: list[str | None] = []

    def ids_for_subject(self, subject: str | None) -> frozenset[int]:
        self.asked.append(subject)
        if subject is None:
            return frozenset(i for ids in self.ids.values() for i in ids)
        return frozenset(self.ids.get(subject, ()))


def framed(schema_id: int, body: bytes = b"payload") -> bytes:
    return b"\0" + schema_id.to_bytes(4, "big") + body


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
    assert checker.refusals({("t", 0): good}) == {}
    bad = {
        "unframed": b"plain text",
        "unknown id": framed(9),
        "other subject's id": framed(8),
        "magic byte": b"\1" + framed(7)[1:],
        "short": b"\0\0\0",
    }
    for why, value in bad.items():
        refused = checker.refusals({("t", 0): batch(framed(7), None, framed(7), value)})
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
    assert checker.refusals({("t", 0): ok}) == {}
    refused = checker.refusals({("t", 0): build_batch([(framed(1), None), (framed(5), None)])})
    assert refused[("t", 0)].record_errors[0][0] == 1
    assert "key is not framed" in (refused[("t", 0)].message or "")
    # the record name strategies: an id registered under any subject passes
    assert checker.refusals({("r", 0): batch(framed(1), framed(5))}) == {}
    refused = checker.refusals({("r", 0): batch(framed(5), framed(6))})
    assert refused[("r", 0)].message == (
        "record 1: value is not framed by a schema id registered for any subject"
    )


def test_plain_topics_cost_nothing_and_no_registry_refuses() -> None:
    ids = Ids({"t-value": {7}})
    checker = validation({"t": VALUES}, ids)
    entries = {("plain", 0): batch(b"anything"), ("plain", 1): batch(b"x")}
    assert checker.refusals(entries) == {}
    assert ids.asked == []  # no lookup for a topic without validation
    alone = validation({"t": VALUES}, None)
    refused = alone.refusals({("t", 0): batch(framed(7)), ("plain", 0): batch(b"x")})
    assert list(refused) == [("t", 0)]
    assert (refused[("t", 0)].error, refused[("t", 0)].message) == (
        ErrorCode.INVALID_RECORD,
        NO_REGISTRY,
    )


def test_key_value_heads_reads_prefixes() -> None:
    records = [(b"k" * 100, b"v" * 1000), (None, None), (b"", b"ab")]
    for compression in (Compression.NONE, Compression.LZ4):
        heads = list(key_value_heads(build_batch(records, compression=compression), 5))
        assert heads == [(b"kkkkk", b"vvvvv"), (None, None), (b"", b"ab")]
