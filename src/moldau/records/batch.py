"""RecordBatch v2 headers: scan, validate and stamp whole batches without touching records.

The wire format is the storage format, so a produce request's ``records`` bytes are checked
here once (sizes, magic, CRC-32C, counts), stamped with their offsets and leader epoch (both
outside the CRC) and appended byte for byte. Everything is one header unpack per batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

from moldau.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaError,
    RecordTooLargeError,
)
from moldau.records.compression import compress, decompress

Buffer = bytes | bytearray | memoryview

# Field offsets inside a batch (Kafka's DefaultRecordBatch layout).
BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORD_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted by batchLength
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
# KIP-534: set by the log cleaner; the base timestamp then holds the delete horizon
DELETE_HORIZON_FLAG = 0x40
MAX_COMPRESSION_CODEC = 4  # zstd

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_STAMP = struct.Struct(">qii")  # baseOffset, batchLength (rewritten unchanged), leaderEpoch
_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
assert _HEADER.size == BATCH_HEADER_SIZE


@dataclass(slots=True)
class BatchInfo:
    """One batch's header plus where it sits in the scanned buffer."""

    position: int
    size: int
    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_FLAG) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the cleaner may drop this batch's tombstones or marker (KIP-534); None
        until a cleaning pass stamped it."""
        if self.attributes & DELETE_HORIZON_FLAG:
            return self.base_timestamp
        return None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from INT32_MAX to 0 like Kafka's."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def end_position(self) -> int:
        return self.position + self.size


def increment_sequence(sequence: int, increment: int) -> int:
    """Add to a producer sequence number, wrapping past INT32_MAX to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def read_batch_header(buf: Buffer, pos: int = 0) -> BatchInfo:
    """Parse the header at ``pos`` without validating it (index rebuilding, decoding)."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"truncated batch header at position {pos}")
    (offset, length, epoch, magic, crc, attributes, delta, base_ts, max_ts, pid, producer_epoch,
     sequence, count) = _HEADER.unpack_from(buf, pos)  # fmt: skip
    return BatchInfo(
        pos, LOG_OVERHEAD + length, offset, epoch, magic, crc, attributes, delta, base_ts,
        max_ts, pid, producer_epoch, sequence, count,
    )  # fmt: skip


def _validate(
    mv: memoryview,
    info: BatchInfo,
    end: int,
    verify_crc: bool,
    max_batch_size: int | None,
    strict: bool,
) -> None:
    pos = info.position
    if info.size < BATCH_HEADER_SIZE:
        raise CorruptRecordError(
            f"batch at position {pos} has invalid length {info.size - LOG_OVERHEAD}"
        )
    if max_batch_size is not None and info.size > max_batch_size:
        raise RecordTooLargeError(f"batch of {info.size} bytes exceeds max size {max_batch_size}")
    if pos + info.size > end:
        raise CorruptRecordError(f"truncated batch at position {pos}")
    if info.magic != MAGIC:
        raise CorruptRecordError(f"unsupported magic {info.magic} at position {pos}")
    if verify_crc and crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + info.size]) != info.crc:
        raise CorruptRecordError(f"CRC mismatch in batch at position {pos}")
    if info.compression > MAX_COMPRESSION_CODEC:
        raise CorruptRecordError(f"unknown compression codec {info.compression}")
    if info.record_count < 0 or info.last_offset_delta < 0:
        raise InvalidRecordError(f"negative record count or offset delta at position {pos}")
    if strict:
        if info.record_count == 0 or info.last_offset_delta != info.record_count - 1:
            raise InvalidRecordError("record count and last offset delta do not match")
        if info.is_control:
            raise InvalidRecordError("clients may not write control batches")
    elif info.last_offset_delta < info.record_count - 1:
        raise InvalidRecordError("last offset delta smaller than record count")


def _iter_valid(
    buf: Buffer, verify_crc: bool, max_batch_size: int | None, strict: bool
) -> Iterator[BatchInfo]:
    with memoryview(buf) as mv:  # released promptly so an mmap'd segment can be closed
        pos, end = 0, len(mv)
        while pos < end:
            info = read_batch_header(mv, pos)
            _validate(mv, info, end, verify_crc, max_batch_size, strict)
            yield info
            pos += info.size


def scan_batches(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    max_batch_size: int | None = None,
    strict: bool = True,
) -> list[BatchInfo]:
    """Split and validate a buffer that must hold only whole v2 batches.

    ``strict`` applies Kafka's rules for client produce requests (v3+): exactly one batch,
    with records, ``lastOffsetDelta == recordCount - 1`` and not a control batch.
    Replication and coordinator writes (several batches, compacted batches, transaction
    markers) pass ``strict=False``.
    Raises CorruptRecordError, InvalidRecordError or RecordTooLargeError.
    """
    if strict and len(buf) >= BATCH_HEADER_SIZE:
        # A produced partition: one batch, checked without the general loop's generator
        # (this runs once per partition of every produce request).
        info = read_batch_header(buf)
        if info.size == len(buf):
            with memoryview(buf) as mv:
                _validate(mv, info, info.size, verify_crc, max_batch_size, strict)
            return [info]
    infos = list(_iter_valid(buf, verify_crc, max_batch_size, strict))
    if strict and len(infos) != 1:
        raise InvalidRecordError(f"produce requests must hold exactly one batch, not {len(infos)}")
    return infos


def scan_log_prefix(buf: Buffer, *, verify_crc: bool = True) -> tuple[list[BatchInfo], int]:
    """Recovery: the whole valid batches at the start of ``buf`` and their byte length.

    Stops at the first truncated or corrupt batch instead of raising, so the caller can
    truncate the segment to the returned number of bytes.
    """
    infos: list[BatchInfo] = []
    try:
        for info in _iter_valid(buf, verify_crc, None, False):
            infos.append(info)
    except KafkaError:
        pass
    return infos, infos[-1].end_position if infos else 0


def stamp_base_offset(
    buf: bytearray | memoryview, info: BatchInfo, base_offset: int, leader_epoch: int
) -> None:
    """Assign the batch's offsets and leader epoch in place; the CRC does not cover them.

    Also updates ``info`` so its ``last_offset``/``next_offset`` reflect the new offsets.
    """
    _STAMP.pack_into(buf, info.position, base_offset, info.size - LOG_OVERHEAD, leader_epoch)
    info.base_offset = base_offset
    info.partition_leader_epoch = leader_epoch


def set_log_append_time(buf: bytearray | memoryview, info: BatchInfo, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp_ms`` as maxTimestamp, like Kafka.

    Records keep their deltas: consumers use maxTimestamp for every record of a
    LogAppendTime batch. Rewrites the CRC in place and updates ``info``.
    """
    pos = info.position
    attributes = info.attributes | TIMESTAMP_TYPE_FLAG
    _ATTRIBUTES.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _MAX_TIMESTAMP.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + info.size])
    _CRC.pack_into(buf, pos + CRC_OFFSET, crc)
    info.attributes = attributes
    info.max_timestamp = timestamp_ms
    info.crc = crc


def recompress_batches(
    buf: bytearray | memoryview, infos: list[BatchInfo], codec: int, level: int | None
) -> tuple[bytearray | memoryview, list[BatchInfo]]:
    """Kafka's LogValidator recompression to a topic's ``compression.type``.

    Each data batch whose codec is not ``codec`` gets its records section decompressed
    and recompressed as one buffer; the records themselves (deltas relative to the
    unchanged header) stay bytes. The header keeps producer id, epoch, sequence and
    flags; codec bits, length and CRC are rewritten. Returns ``buf`` and ``infos``
    themselves when no batch needs it; control batches are left as written.
    """
    if all(i.compression == codec or i.is_control for i in infos):
        return buf, infos
    out = bytearray()
    with memoryview(buf) as mv:
        for info in infos:
            start, end = info.position, info.end_position
            if info.compression == codec or info.is_control:
                out += mv[start:end]
                continue
            body = compress(
                codec, decompress(info.compression, mv[start + RECORDS_OFFSET : end]), level
            )
            pos = len(out)
            out += mv[start : start + RECORDS_OFFSET]
            out += body
            attributes = (info.attributes & ~COMPRESSION_MASK) | codec
            _LENGTH.pack_into(out, pos + BATCH_LENGTH_OFFSET, len(out) - pos - LOG_OVERHEAD)
            _ATTRIBUTES.pack_into(out, pos + ATTRIBUTES_OFFSET, attributes)
            with memoryview(out) as written:  # released before ``out`` grows again
                crc = crc32c(written[pos + ATTRIBUTES_OFFSET :])
            _CRC.pack_into(out, pos + CRC_OFFSET, crc)
    return out, scan_batches(out, verify_crc=False, strict=False)
