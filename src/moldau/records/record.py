"""Record-level encode/decode of v2 batches (varint/zigzag records).

Not for the produce/fetch hot path, which only handles whole batches: this serves tests,
the CLI, compaction, coordinators and anything that must look inside a batch.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from crc32c import crc32c

from moldau.protocol.errors import CorruptRecordError, InvalidRecordError
from moldau.records.batch import (
    BATCH_HEADER_SIZE,
    CONTROL_FLAG,
    DELETE_HORIZON_FLAG,
    LOG_OVERHEAD,
    MAGIC,
    RECORDS_OFFSET,
    TRANSACTIONAL_FLAG,
    BatchInfo,
    Buffer,
    read_batch_header,
    scan_batches,
)
from moldau.records.compression import Compression, compress, decompress

Header = tuple[str, bytes | None]

_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordCount
_HEADER_BEFORE_CRC = struct.Struct(">qiib")  # baseOffset, batchLength, leaderEpoch, magic
_CRC = struct.Struct(">I")


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


class _Reader:
    """Cursor over a records section; every malformed read raises InvalidRecordError."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def varint(self) -> int:
        buf, pos, shift, raw = self.buf, self.pos, 0, 0
        while True:
            if pos >= len(buf) or shift > 63:
                raise InvalidRecordError("malformed varint in record")
            byte = buf[pos]
            pos += 1
            raw |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        self.pos = pos
        return (raw >> 1) ^ -(raw & 1)

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise InvalidRecordError("record field runs past its batch")
        data = self.buf[self.pos : end]
        self.pos = end
        return data

    def nullable(self) -> bytes | None:
        n = self.varint()
        return None if n == -1 else self.take(n)


def _read_record(reader: _Reader, info: BatchInfo) -> Record:
    length = reader.varint()
    start = reader.pos
    reader.take(1)  # record attributes: unused in v2
    timestamp_delta = reader.varint()
    offset_delta = reader.varint()
    key = reader.nullable()
    value = reader.nullable()
    headers: list[Header] = []
    for _ in range(reader.varint()):
        raw_key = reader.nullable()
        if raw_key is None:
            raise InvalidRecordError("null header key")
        try:
            header_key = raw_key.decode()
        except UnicodeDecodeError:
            raise InvalidRecordError("header key is not UTF-8") from None
        headers.append((header_key, reader.nullable()))
    if reader.pos - start != length:
        raise InvalidRecordError(f"record length {length} does not match its content")
    timestamp = info.max_timestamp if info.timestamp_type else info.base_timestamp + timestamp_delta
    return Record(info.base_offset + offset_delta, timestamp, key, value, headers)


def decode_records(batch: Buffer) -> list[Record]:
    """Decode the records of one whole batch (decompressing it first if needed)."""
    info = read_batch_header(batch)
    if not BATCH_HEADER_SIZE <= info.size <= len(batch):
        raise CorruptRecordError("batch size does not match its buffer")
    body = memoryview(batch)[RECORDS_OFFSET : info.size]
    reader = _Reader(decompress(info.compression, body))
    records = [_read_record(reader, info) for _ in range(info.record_count)]
    if reader.pos != len(reader.buf):
        raise InvalidRecordError("trailing bytes after the last record")
    return records


def _varint_at(buf: bytes, pos: int) -> tuple[int, int]:
    """(zigzag varint at ``pos``, the position after it); IndexError past the end."""
    raw = shift = 0
    while shift < 64:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise InvalidRecordError("malformed varint in record")


def iter_batches(
    buf: Buffer, *, verify_crc: bool = True
) -> Iterator[tuple[BatchInfo, list[Record]]]:
    """Validate and decode a buffer of whole batches (a segment slice, a fetch result)."""
    mv = memoryview(buf)
    for info in scan_batches(mv, verify_crc=verify_crc, strict=False):
        yield info, decode_records(mv[info.position : info.end_position])


def decode_all(buf: Buffer, *, verify_crc: bool = True) -> list[tuple[BatchInfo, list[Record]]]:
    return list(iter_batches(buf, verify_crc=verify_crc))


def _zigzag(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _write_nullable(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _zigzag(out, -1)
    else:
        _zigzag(out, len(data))
        out += data


def _encode_record(
    timestamp_delta: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header],
) -> bytes:
    body = bytearray(b"\x00")  # attributes
    _zigzag(body, timestamp_delta)
    _zigzag(body, offset_delta)
    _write_nullable(body, key)
    _write_nullable(body, value)
    _zigzag(body, len(headers))
    for header_key, header_value in headers:
        _write_nullable(body, header_key.encode())
        _write_nullable(body, header_value)
    out = bytearray()
    _zigzag(out, len(body))
    return bytes(out + body)


def _normalise(item: Any, index: int, base_offset: int) -> tuple[int, int | None, Any, Any, Any]:
    """(offset delta, timestamp or None, key, value, headers) from a tuple or Record-like."""
    if isinstance(item, tuple):
        key, value, *rest = item
        return index, None, key, value, rest[0] if rest else ()
    return item.offset - base_offset, item.timestamp, item.key, item.value, item.headers


def build_batch(
    records: Sequence[tuple[Any, ...]] | Sequence[Record],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    compression: int = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode a v2 batch with a valid CRC.

    ``records`` are ``(key, value[, headers])`` tuples, numbered from ``base_offset`` and
    stamped with ``base_timestamp`` (default: now), or Record-likes that keep their own
    offset and timestamp (compaction rewrites). ``last_offset_delta`` lets a rewritten
    batch keep its original offset range after records were removed. A
    ``delete_horizon_ms`` (the cleaner's, KIP-534) becomes the base timestamp, under the
    delete horizon flag; records keep their timestamps through their deltas.
    """
    items = [_normalise(item, i, base_offset) for i, item in enumerate(records)]
    default_ts = int(time.time() * 1000) if base_timestamp is None else base_timestamp
    timestamps = [default_ts if ts is None else ts for _, ts, *_ in items]
    base_ts = timestamps[0] if base_timestamp is None and timestamps else default_ts
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    max_ts = max(timestamps, default=base_ts)
    deltas = [delta for delta, *_ in items]
    if any(d < 0 for d in deltas):
        raise ValueError("record offsets must not be below base_offset")
    if last_offset_delta is None:
        last_offset_delta = max(deltas, default=0)
    body = b"".join(
        _encode_record(ts - base_ts, delta, key, value, headers)
        for ts, (delta, _, key, value, headers) in zip(timestamps, items, strict=True)
    )
    body = compress(compression, body)
    attributes = (
        int(compression)
        | (TRANSACTIONAL_FLAG if is_transactional else 0)
        | (CONTROL_FLAG if is_control else 0)
        | (DELETE_HORIZON_FLAG if delete_horizon_ms is not None else 0)
    )
    tail = (
        _HEADER_AFTER_CRC.pack(
            attributes,
            last_offset_delta,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(items),
        )
        + body
    )
    batch_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body)
    head = _HEADER_BEFORE_CRC.pack(base_offset, batch_length, partition_leader_epoch, MAGIC)
    return head + _CRC.pack(crc32c(tail)) + tail
