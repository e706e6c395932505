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

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from moldau.config.topic import TOPIC_NAME_STRATEGY, LogConfig
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.records.batch import Buffer, scan_batches
from moldau.replication.replica_manager import AppendResult, TopicPartition

if TYPE_CHECKING:
    from moldau.records.frames import Ids

NO_REGISTRY = "schema validation needs schema.registry.listeners on this broker"
# Produce requests with more record bytes to check than this are checked on a worker
# thread, so that other connections' requests go on meanwhile.
OFF_LOOP_BYTES = 256 * 1024
# How long a record framed with an id this node has not read may wait for the registry to
# catch up with `_schemas` (the id may have been registered through another node).
CATCH_UP_S = 5.0


class SchemaIds(Protocol):
    def ids_for_subject(self, subject: str | None) -> frozenset[int]:
        """Ids of the live schema versions of `subject` (None: of any subject)."""
        ...

    def catch_up(self, timeout: float) -> None:
        """Return once the registry has read `_schemas` up to its end offset of now (or
        after `timeout`)."""
        ...


class _Check:
    """One side (key or value) of a topic to check: the schema ids that pass."""

    __slots__ = ("part", "subject", "ids")

    def __init__(self, part: str, subject: str | None, ids: frozenset[int]) -> None:
        import numpy as np  # the registry's extra; a broker without a registry never checks

        self.part = part
        self.subject = subject
        self.ids = np.fromiter(ids, dtype=np.int64, count=len(ids))

    def error(self, index: int) -> str:
        where = f"subject {self.subject}" if self.subject else "any subject"
        return f"record {index}: {self.part} is not framed by a schema id registered for {where}"


class _Refusal:
    """The first bad record of a partition's batches; `unknown` if it is framed with an id
    this node does not know (it may know it once its registry has caught up)."""

    __slots__ = ("index", "message", "unknown")

    def __init__(self, index: int, message: str, unknown: bool = False) -> None:
        self.index = index
        self.message = message
        self.unknown = unknown

    def result(self) -> AppendResult:
        return AppendResult(
            ErrorCode.INVALID_RECORD, self.message, record_errors=((self.index, self.message),)
        )


class SchemaValidation:
    """Refusals for the batches of a produce request; owned by the broker."""

    def __init__(self, topic_config: Callable[[str], LogConfig]) -> None:
        self._topic_config = topic_config
        self._ids: SchemaIds | None = None

    def attach(self, ids: SchemaIds) -> None:
        """The registry of this process serves: validate against its ids from now on."""
        self._ids = ids

    async def refusals(
        self, entries: Mapping[TopicPartition, Buffer]
    ) -> dict[TopicPartition, AppendResult]:
        """The partitions whose batches must not be appended, with why. A record framed
        with an id this node has not read yet waits (up to CATCH_UP_S) for the registry to
        catch up with `_schemas` before its batch is refused."""
        refused, found = await self._scan(entries)
        unknown = {tp for tp, refusal in found.items() if refusal.unknown}
        if unknown and self._ids is not None:
            await asyncio.to_thread(self._ids.catch_up, CATCH_UP_S)
            _, again = await self._scan({tp: entries[tp] for tp in unknown})
            for tp in unknown:
                if tp not in again:
                    del found[tp]
                else:
                    found[tp] = again[tp]
        refused.update((tp, refusal.result()) for tp, refusal in found.items())
        return refused

    async def _scan(
        self, entries: Mapping[TopicPartition, Buffer]
    ) -> tuple[dict[TopicPartition, AppendResult], dict[TopicPartition, _Refusal]]:
        """(refusals without a check: no registry here, the first bad record of each
        partition that has one)."""
        refused: dict[TopicPartition, AppendResult] = {}
        work: list[tuple[TopicPartition, list[_Check], Buffer]] = []
        checks: dict[str, list[_Check] | str] = {}
        for tp, records in entries.items():
            topic_checks = checks.get(tp[0])
            if topic_checks is None:
                topic_checks = checks[tp[0]] = self._checks(tp[0])
            if isinstance(topic_checks, str):
                refused[tp] = AppendResult(ErrorCode.INVALID_RECORD, topic_checks)
            elif topic_checks:
                work.append((tp, topic_checks, records))
        if sum(len(records) for _, _, records in work) > OFF_LOOP_BYTES:
            found = await asyncio.to_thread(_first_errors, work)
        else:
            found = _first_errors(work)
        return refused, found

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


def _first_errors(
    work: list[tuple[TopicPartition, list[_Check], Buffer]],
) -> dict[TopicPartition, _Refusal]:
    found = {}
    for tp, checks, records in work:
        refusal = _first_error(checks, records)
        if refusal is not None:
            found[tp] = refusal
    return found


def _first_error(checks: list[_Check], records: Buffer) -> _Refusal | None:
    """The first record whose key or value is not framed right: whole batches at a time."""
    import numpy as np

    from moldau.records.frames import NULL, framed_ids

    try:
        infos = scan_batches(records, verify_crc=False, strict=False)
    except KafkaError:
        return None  # not whole batches: the append refuses them with the reason
    view = memoryview(records)
    index = 0
    for info in infos:
        try:
            keys, values = framed_ids(view[info.position : info.end_position])
        except KafkaError as e:
            return _Refusal(index, f"record {index}: malformed ({e})")
        first: tuple[int, _Check, Ids] | None = None
        for check in checks:  # the key's check first: a record's key comes before its value
            ids = keys if check.part == "key" else values
            bad = np.flatnonzero((ids != NULL) & ~np.isin(ids, check.ids))
            if bad.size and (first is None or int(bad[0]) < first[0]):
                first = (int(bad[0]), check, ids)
        if first is not None:
            at, check, ids = first
            return _Refusal(index + at, check.error(index + at), unknown=bool(ids[at] >= 0))
        index += len(keys)
    return None
