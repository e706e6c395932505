"""The history checker of the fault tests, in the spirit of Jepsen's Kafka queue checker.

Independent of the harness and of Moldau: it reads a :class:`History` (what producers were
told, what consumers saw, the final content of every partition and the batch headers of
every replica's log files) and reports every anomaly it finds:

- ``lost``: an acknowledged record missing from the final log;
- ``moved``: an acknowledged record found, but not at the offset its ack named (an
  idempotent producer may be told of a record's success without its offset, when a later
  batch of the same producer succeeded first: then only its presence is checked);
- ``duplicated``: a value written more than once (idempotence must prevent even retried
  unacknowledged sends from landing twice);
- ``unexpected``: a value in the log that no producer sent;
- ``reordered``: one producer's records to one partition out of send order;
- ``bad_offsets``: a partition whose offsets do not strictly increase;
- ``phantom``: a consumer saw a record (offset, value) that the final log does not hold
  there: it read data that was later lost (above the HW, or a divergent tail);
- ``poll_nonmonotonic`` / ``poll_skip``: within one assignment a consumer went back, or
  jumped over records of the final log;
- ``unconsumed``: acknowledged records that no consumer ever saw (a stuck consumer);
- ``diverged``: two replicas of a partition whose logs are not one a prefix of the other
  (compared batch by batch: offsets, leader epoch, CRC), or a replica that ends below the
  final high watermark.
"""

from __future__ import annotations

import struct
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BATCH_HEADER = struct.Struct(">qiibI2xi")  # base offset, length, epoch, magic, crc, attrs, delta
LOG_OVERHEAD = 12  # base offset + length: the part of the header the length excludes


def value_of(producer: str, partition: int, seq: int) -> str:
    """How a producer's ``seq``-th record to a partition is written (unique values)."""
    return f"{producer}/{partition}:{seq}"


def parse_value(value: str) -> tuple[str, int] | None:
    """(stream, seq): one producer's records to one partition form a stream."""
    stream, sep, seq = value.rpartition(":")
    if not sep or not seq.isdigit():
        return None
    return stream, int(seq)


@dataclass(frozen=True, slots=True)
class Ack:
    partition: int
    offset: int | None  # None: acknowledged without an offset (librdkafka's implicit ack)
    value: str
    time: float


@dataclass(frozen=True, slots=True)
class Failure:
    partition: int
    value: str
    error: str
    time: float


@dataclass(frozen=True, slots=True)
class Poll:
    consumer: str
    session: int  # a new one on every assignment: offsets may restart from the commit
    partition: int
    offset: int
    value: str
    time: float


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int


@dataclass
class History:
    sent: list[tuple[int, str]] = field(default_factory=list)  # (partition, value)
    acks: list[Ack] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    final: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    final_high_watermarks: dict[int, int] = field(default_factory=dict)
    # partition -> node -> batch headers of that replica's log files
    replica_logs: dict[int, dict[int, list[BatchHeader]]] = field(default_factory=dict)


@dataclass
class Report:
    acked: int = 0
    failed: int = 0
    final_records: int = 0
    polled: int = 0
    lost: list[Any] = field(default_factory=list)
    moved: list[Any] = field(default_factory=list)
    duplicated: list[Any] = field(default_factory=list)
    unexpected: list[Any] = field(default_factory=list)
    reordered: list[Any] = field(default_factory=list)
    bad_offsets: list[Any] = field(default_factory=list)
    phantom: list[Any] = field(default_factory=list)
    poll_nonmonotonic: list[Any] = field(default_factory=list)
    poll_skip: list[Any] = field(default_factory=list)
    unconsumed: list[Any] = field(default_factory=list)
    diverged: list[Any] = field(default_factory=list)

    ANOMALIES = (
        "lost",
        "moved",
        "duplicated",
        "unexpected",
        "reordered",
        "bad_offsets",
        "phantom",
        "poll_nonmonotonic",
        "poll_skip",
        "unconsumed",
        "diverged",
    )

    @property
    def valid(self) -> bool:
        return not any(getattr(self, name) for name in self.ANOMALIES)

    def summary(self, examples: int = 5) -> str:
        lines = [
            f"acked {self.acked}, failed {self.failed}, in the final log {self.final_records}, "
            f"polled {self.polled}"
        ]
        for name in self.ANOMALIES:
            found = getattr(self, name)
            if found:
                lines.append(f"{name}: {len(found)}, e.g. {found[:examples]}")
        return "\n".join(lines)


def check(history: History) -> Report:
    report = Report(
        acked=len(history.acks),
        failed=len(history.failures),
        final_records=sum(len(v) for v in history.final.values()),
        polled=len(history.polls),
    )
    sent = {value for _, value in history.sent}
    at: dict[tuple[int, int], str] = {}  # (partition, offset) -> value in the final log
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in sorted(history.final.items()):
        previous_offset = -1
        last_seq: dict[str, int] = {}
        for offset, value in records:
            if offset <= previous_offset:
                report.bad_offsets.append((partition, previous_offset, offset))
            previous_offset = offset
            at[(partition, offset)] = value
            where[value].append((partition, offset))
            if value not in sent:
                report.unexpected.append((partition, offset, value))
            parsed = parse_value(value)
            if parsed is None:
                continue
            stream, seq = parsed
            if stream in last_seq and seq <= last_seq[stream]:
                report.reordered.append((partition, offset, stream, last_seq[stream], seq))
            last_seq[stream] = seq
    report.duplicated = sorted(
        (value, where[value])
        for value, n in Counter(
            value for records in history.final.values() for _, value in records
        ).items()
        if n > 1
    )
    for ack in history.acks:
        found = where.get(ack.value)
        if not found:
            report.lost.append((ack.partition, ack.offset, ack.value))
        elif ack.offset is not None and (ack.partition, ack.offset) not in found:
            report.moved.append((ack.partition, ack.offset, ack.value, found))
    _check_polls(history, at, report)
    _check_replicas(history, report)
    return report


def _check_polls(history: History, at: dict[tuple[int, int], str], report: Report) -> None:
    offsets = {p: [o for o, _ in records] for p, records in history.final.items()}
    index = {p: {o: i for i, o in enumerate(os)} for p, os in offsets.items()}
    last: dict[tuple[str, int, int], int] = {}  # (consumer, session, partition) -> offset
    seen: set[str] = set()
    for poll in history.polls:
        seen.add(poll.value)
        if at.get((poll.partition, poll.offset)) != poll.value:
            report.phantom.append((poll.consumer, poll.partition, poll.offset, poll.value))
            continue
        key = (poll.consumer, poll.session, poll.partition)
        previous = last.get(key)
        last[key] = poll.offset
        if previous is None:
            continue
        if poll.offset <= previous:
            report.poll_nonmonotonic.append((*key, previous, poll.offset))
        elif previous in index[poll.partition]:
            expected = index[poll.partition][previous] + 1
            if index[poll.partition][poll.offset] != expected:
                skipped = offsets[poll.partition][expected]
                report.poll_skip.append((*key, previous, poll.offset, skipped))
    report.unconsumed = [
        (a.partition, a.offset, a.value) for a in history.acks if a.value not in seen
    ]


def _check_replicas(history: History, report: Report) -> None:
    for partition, replicas in sorted(history.replica_logs.items()):
        hw = history.final_high_watermarks.get(partition, 0)
        for node, batches in sorted(replicas.items()):
            end = batches[-1].last_offset + 1 if batches else 0
            if end < hw:
                report.diverged.append((partition, node, f"ends at {end} below the HW {hw}"))
        ordered = sorted(replicas.items(), key=lambda kv: len(kv[1]))
        for (node_a, a), (node_b, b) in zip(ordered, ordered[1:], strict=False):
            if b[: len(a)] != a:
                first = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
                report.diverged.append((partition, node_a, node_b, a[first], b[first]))


def read_batch_headers(partition_dir: Path) -> list[BatchHeader]:
    """Every batch header of a replica's segment files, in order (a torn tail ends it)."""
    headers: list[BatchHeader] = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + BATCH_HEADER.size <= len(data):
            base, length, epoch, _magic, crc, delta = BATCH_HEADER.unpack_from(data, position)
            if length <= 0 or position + LOG_OVERHEAD + length > len(data):
                break
            headers.append(BatchHeader(base, base + delta, epoch, crc))
            position += LOG_OVERHEAD + length
    return headers
