"""KRaft's record batches: data batches, control batches and snapshot files, as Kafka writes them.

A control batch holds one control record whose key is Kafka's ControlRecordType key
(int16 version 0, int16 type) and whose value is the control message at version 0
(MessageUtil.toByteBuffer: the body only; these messages carry their own `version`
field). The `__cluster_metadata` log starts every leader epoch with a LeaderChange
batch; a snapshot (`<offset>-<epoch>.checkpoint`) is a SnapshotHeader batch, the state
machine's records, then a SnapshotFooter batch, numbered from offset 0 and stamped with
the snapshot's epoch (RecordsSnapshotWriter).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from moldau.protocol.messages.leader_change_message import LeaderChangeMessage, Voter
from moldau.protocol.messages.snapshot_footer_record import SnapshotFooterRecord
from moldau.protocol.messages.snapshot_header_record import SnapshotHeaderRecord
from moldau.raft.log import LeaderChange
from moldau.records.batch import BatchInfo, scan_batches
from moldau.records.record import Record, build_batch, decode_records

CONTROL_KEY = struct.Struct(">hh")
CONTROL_KEY_VERSION = 0
CONTROL_MESSAGE_VERSION = 0
SNAPSHOT_BATCH_BYTES = 1 << 20  # records per snapshot batch, by encoded size


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class SnapshotFormatError(ValueError):
    """Snapshot bytes that are not header, records, footer."""


@dataclass(frozen=True, slots=True)
class Batches:
    """Whole, validated record batches and their headers: what `FileRaftLog.read` returns
    and `append_as_follower` takes (the driver validates fetched bytes into one)."""

    data: bytearray
    infos: list[BatchInfo]

    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> Batches:
        """Raises CorruptRecordError/InvalidRecordError for anything but whole v2 batches."""
        buf = bytearray(data)
        return cls(buf, scan_batches(buf, verify_crc=verify_crc, strict=False))

    @property
    def size(self) -> int:
        return len(self.data)


def _body(message: Any) -> bytes:
    return b"".join(bytes(part) for part in message.encode(CONTROL_MESSAGE_VERSION))


def control_batch(kind: ControlRecordType, message: Any, epoch: int, base_offset: int = 0) -> bytes:
    key = CONTROL_KEY.pack(CONTROL_KEY_VERSION, kind)
    return build_batch(
        [(key, _body(message))],
        base_offset=base_offset,
        is_control=True,
        partition_leader_epoch=epoch,
    )


def leader_change_batch(change: LeaderChange, epoch: int) -> bytes:
    message = LeaderChangeMessage(
        version=CONTROL_MESSAGE_VERSION,
        leader_id=change.leader_id,
        voters=[Voter(voter_id=v) for v in change.voters],
        granting_voters=[Voter(voter_id=v) for v in change.granting_voters],
    )
    return control_batch(ControlRecordType.LEADER_CHANGE, message, epoch)


def control_type(record: Record) -> int:
    """The ControlRecordType of a control batch's record."""
    key = record.key
    if key is None or len(key) < CONTROL_KEY.size:
        raise SnapshotFormatError("a control record without a valid key")
    _, kind = CONTROL_KEY.unpack_from(key)
    return int(kind)


def decode_leader_change(record: Record) -> LeaderChange:
    message, _ = LeaderChangeMessage.decode(
        memoryview(record.value or b""), CONTROL_MESSAGE_VERSION
    )
    return LeaderChange(
        message.leader_id,
        tuple(v.voter_id for v in message.voters),
        tuple(v.voter_id for v in message.granting_voters),
    )


def data_batch(values: Sequence[bytes], epoch: int = 0, base_offset: int = 0) -> bytes:
    """One batch of records with null keys (metadata records keep their type in the value)."""
    return build_batch(
        [(None, v) for v in values], base_offset=base_offset, partition_leader_epoch=epoch
    )


def snapshot_bytes(values: Sequence[bytes], epoch: int, last_contained_timestamp: int) -> bytes:
    """A whole snapshot: header, `values` in batches of about SNAPSHOT_BATCH_BYTES, footer."""
    header = SnapshotHeaderRecord(
        version=CONTROL_MESSAGE_VERSION, last_contained_log_timestamp=last_contained_timestamp
    )
    parts = [control_batch(ControlRecordType.SNAPSHOT_HEADER, header, epoch)]
    offset, start, size = 1, 0, 0
    for i, value in enumerate(values):
        size += len(value)
        if size >= SNAPSHOT_BATCH_BYTES or i == len(values) - 1:
            parts.append(data_batch(values[start : i + 1], epoch, offset))
            offset += i + 1 - start
            start, size = i + 1, 0
    footer = SnapshotFooterRecord(version=CONTROL_MESSAGE_VERSION)
    parts.append(control_batch(ControlRecordType.SNAPSHOT_FOOTER, footer, epoch, offset))
    return b"".join(parts)


def iter_snapshot_batches(data: bytes | bytearray | memoryview) -> Iterator[list[Record]]:
    """The records of each data batch of a snapshot, checking its header and footer.

    Raises SnapshotFormatError (or the record layer's errors) for damaged snapshots.
    """
    view = memoryview(data)
    infos = scan_batches(view, strict=False)
    if len(infos) < 2:
        raise SnapshotFormatError("a snapshot needs a header and a footer batch")
    for position, expected in (
        (0, ControlRecordType.SNAPSHOT_HEADER),
        (-1, ControlRecordType.SNAPSHOT_FOOTER),
    ):
        info = infos[position]
        records = decode_records(view[info.position : info.end_position])
        if not info.is_control or len(records) != 1 or control_type(records[0]) != expected:
            raise SnapshotFormatError(
                f"the snapshot's {'first' if position == 0 else 'last'} batch is not a {expected.name}"
            )
    for info in infos[1:-1]:
        if info.is_control:
            continue
        yield decode_records(view[info.position : info.end_position])
