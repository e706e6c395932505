"""Broker-side schema validation, Confluent Server's `confluent.{key,value}.schema.validation`.

A produce batch into a topic with validation on is refused (INVALID_RECORD, the first bad
record named in RecordErrors) unless every non-null key (value) starts with magic byte 0
and a 4-byte big-endian schema id the schema registry holds for the topic's subject: the
framing confluent-kafka's and Java's serializers write. Only those five bytes of each
record are read; a topic without validation costs one config lookup. The ids come from the
schema registry running in this process (`schema.registry.listeners`), attached once it
serves: moldau.server never imports the registry, the registry offers a lookup.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Protocol

from moldau.config.topic import TOPIC_NAME_STRATEGY, LogConfig
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.records.batch import Buffer, scan_batches
from moldau.records.record import key_value_heads
from moldau.replication.replica_manager import AppendResult, TopicPartition

FRAME = struct.Struct(">bI")  # magic byte 0, schema id
NO_REGISTRY = "schema validation needs schema.registry.listeners on this broker"


class SchemaIds(Protocol):
    def ids_for_subject(self, subject: str | None) -> frozenset[int]:
        """Ids of the live schema versions of `subject` (None: of any subject)."""
        ...


class _Check:
    """One side (key or value) of a topic to check: the five-byte frames that pass."""

    __slots__ = ("part", "subject", "frames")

    def __init__(self, part: str, subject: str | None, ids: frozenset[int]) -> None:
        self.part = part
        self.subject = subject
        self.frames = frozenset(FRAME.pack(0, i) for i in ids)

    def error(self, index: int) -> str:
        where = f"subject {self.subject}" if self.subject else "any subject"
        return f"record {index}: {self.part} is not framed by a schema id registered for {where}"


class SchemaValidation:
    """Refusals for the batches of a produce request; owned by the broker."""

    def __init__(self, topic_config: Callable[[str], LogConfig]) -> None:
        self._topic_config = topic_config
        self._ids: SchemaIds | None = None

    def attach(self, ids: SchemaIds) -> None:
        """The registry of this process serves: validate against its ids from now on."""
        self._ids = ids

    def refusals(
        self, entries: Mapping[TopicPartition, Buffer]
    ) -> dict[TopicPartition, AppendResult]:
        """The partitions whose batches must not be appended, with why."""
        refused: dict[TopicPartition, AppendResult] = {}
        checks: dict[str, list[_Check] | str] = {}
        for tp, records in entries.items():
            topic_checks = checks.get(tp[0])
            if topic_checks is None:
                topic_checks = checks[tp[0]] = self._checks(tp[0])
            if isinstance(topic_checks, str):
                refused[tp] = AppendResult(ErrorCode.INVALID_RECORD, topic_checks)
            elif topic_checks:
                found = _first_error(topic_checks, records)
                if found is not None:
                    refused[tp] = AppendResult(
                        ErrorCode.INVALID_RECORD, found[1], record_errors=(found,)
                    )
        return refused

    def _checks(self, topic: str) -> list[_Check] | str:
        """What to check on the topic's records, or why none can be (no registry here)."""
        config = self._topic_config(topic)
        sides = [
            (part, strategy)
            for part, on, strategy in (
                ("key", config.key_schema_validation, config.key_subject_name_strategy),
                ("value", config.value_schema_validation, config.value_subject_name_strategy),
            )
            if on
        ]
        if not sides:
            return []
        ids = self._ids
        if ids is None:
            return NO_REGISTRY
        checks = []
        for part, strategy in sides:
            # the record name strategies name the subject after the record's schema, which
            # five bytes do not tell: any registered id passes
            subject = f"{topic}-{part}" if strategy == TOPIC_NAME_STRATEGY else None
            checks.append(_Check(part, subject, ids.ids_for_subject(subject)))
        return checks


def _first_error(checks: list[_Check], records: Buffer) -> tuple[int, str] | None:
    """(batch-relative index, message) of the first record that is not framed right."""
    try:
        infos = scan_batches(records, verify_crc=False, strict=False)
    except KafkaError:
        return None  # not whole batches: the append refuses them with the reason
    by_part = {c.part: c for c in checks}
    keys = by_part["key"].frames if "key" in by_part else None
    values = by_part["value"].frames if "value" in by_part else None
    view = memoryview(records)
    index = 0
    try:
        for info in infos:
            heads = key_value_heads(view[info.position : info.end_position], FRAME.size)
            for key, value in heads:  # None: a null key or a tombstone, nothing to frame
                if keys is not None and key is not None and key not in keys:
                    return index, by_part["key"].error(index)
                if values is not None and value is not None and value not in values:
                    return index, by_part["value"].error(index)
                index += 1
    except KafkaError as e:
        return index, f"record {index}: malformed ({e})"
    return None
