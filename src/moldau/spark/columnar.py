"""Record batches (v2) straight into Arrow columns, with numpy over the batch bytes.

A fetch answer is a run of record batches; their records are varint-framed, so in Python a
record-by-record walk costs microseconds a row. Here every field is decoded for all records
at once: the varints of one field of every record are one vectorised pass, and key and value
columns are gathered by Arrow's `take` from offsets into the fetched bytes (no per-row
objects). Only finding where each record starts is sequential by nature (a record's start
is the previous one's end); it is done by stride speculation: records of one producer
usually have equal framed sizes, so the starts `p, p+s, p+2s, ...` are guessed and checked
in bulk, and a record-by-record walk takes over only where sizes vary from row to row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from moldau.protocol.errors import CorruptRecordError
from moldau.records.batch import RECORDS_OFFSET, BatchInfo

PAD = 16  # zero bytes after the data: a varint read near the end never indexes past it
_MAX_VARINT = 10
_WINDOW = 64  # first guess of how many equal-sized records follow
_TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class Columns:
    """The decoded records of some batches, one numpy array (or Arrow array) per field."""

    offsets: np.ndarray
    timestamps_ms: np.ndarray
    timestamp_types: np.ndarray
    keys: pa.Array
    values: pa.Array

    def __len__(self) -> int:
        return len(self.offsets)


def padded(data: bytes | bytearray | memoryview) -> np.ndarray:
    """The bytes as uint8 with zero padding (one copy of the buffer)."""
    out = np.zeros(len(data) + PAD, np.uint8)
    out[: len(data)] = np.frombuffer(data, np.uint8)
    return out


def padded_view(padded: np.ndarray, part: memoryview) -> np.ndarray:
    """`part`, a slice of the bytes of `padded` (an array ending in PAD zero bytes), as a
    view of `padded` from where `part` starts: padded data without copying it."""
    if not len(part):
        return np.zeros(PAD, np.uint8)
    start = np.frombuffer(part, np.uint8).ctypes.data - padded.ctypes.data
    if not 0 <= start <= len(padded) - PAD - len(part):
        raise ValueError("the bytes are not a slice of the array")
    return padded[start:]


def _varint_scalar(buf: np.ndarray, pos: int) -> tuple[int, int]:
    """One zigzag varint at `pos`: (value, position after it)."""
    value = shift = 0
    for i in range(_MAX_VARINT):
        b = int(buf[pos + i])
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos + i + 1
        shift += 7
    raise CorruptRecordError(f"varint longer than {_MAX_VARINT} bytes at {pos}")


def _zigzag(raw: np.ndarray) -> np.ndarray:
    return (raw >> 1) ^ -(raw & 1)


# Every one-byte varint's value: one gather decodes a column of them.
_ONE_BYTE = _zigzag(np.arange(0x80, dtype=np.int64))


def varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints at every position of `pos`: (values, positions after them).

    A column of one-byte varints is one table lookup; one whose varints are at most three
    bytes long (offset deltas of big batches, lengths below 1 MiB) is a few whole-column
    passes; longer ones look at byte `i` only for the varints still going after byte
    `i - 1`. The padding after the data keeps `pos + 2` inside `buf`.
    """
    b0 = buf[pos]
    more0 = b0 >= 0x80
    if not more0.any():
        return _ONE_BYTE[b0], pos + 1
    b1 = buf[pos + 1]
    more1 = more0 & (b1 >= 0x80)
    b2 = buf[pos + 2]
    if (more1 & (b2 >= 0x80)).any():
        return _long_varints(buf, pos, b0)
    raw = (b0 & 0x7F).astype(np.int64)
    raw |= (b1 & 0x7F).astype(np.int64) * more0 << 7
    raw |= (b2 & 0x7F).astype(np.int64) * more1 << 14
    return _zigzag(raw), pos + 1 + more0 + more1


def _long_varints(buf: np.ndarray, pos: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    raw = (b & 0x7F).astype(np.uint64)
    end = pos + 1
    going = np.flatnonzero(b >= 0x80)
    for i in range(1, _MAX_VARINT):
        if not going.size:
            break
        b = buf[np.minimum(pos[going] + i, len(buf) - 1)]
        raw[going] |= (b & 0x7F).astype(np.uint64) << np.uint64(7 * i)
        end[going] += 1
        going = going[b >= 0x80]
    else:
        if going.size:
            raise CorruptRecordError(f"varint longer than {_MAX_VARINT} bytes")
    return _zigzag(raw).view(np.int64), end


def record_starts(buf: np.ndarray, first: int, count: int, limit: int) -> np.ndarray:
    """Start positions of the `count` records framed from `first` up to `limit`.

    A guessed start `p + k*s` is taken when the records before it, at the guesses before
    it, all begin with the same length varint as the first one: by induction every guess
    up to the first mismatch is a true start.
    """
    starts = np.empty(count, np.int64)
    done, pos, window = 0, first, _WINDOW
    while done < count:
        length, body = _varint_scalar(buf, pos)
        stride = body - pos + length
        if length < 0 or pos + stride > limit:
            raise CorruptRecordError(f"record at {pos} overruns its batch")
        # Only records that end by `limit`: every guess lies inside the batch.
        n = min(count - done, window, (limit - pos) // stride)
        guess = np.arange(pos, pos + n * stride, stride, dtype=np.int64)
        same = buf[guess] == buf[pos]
        for j in range(1, body - pos):  # the length varint's other bytes
            same &= buf[guess + j] == buf[pos + j]
        good = n if same.all() else int(np.argmin(same))
        starts[done : done + good] = guess[:good]
        done += good
        pos += stride * good
        window = window * 2 if good == n else _WINDOW
        if good < 4:  # sizes vary from row to row here: walk a stretch of records
            done, pos = _walk(buf, starts, done, pos, min(count, done + _WINDOW), limit)
    return starts


def _walk(
    buf: np.ndarray, starts: np.ndarray, done: int, pos: int, until: int, limit: int
) -> tuple[int, int]:
    """Records `done` to `until`, one at a time (irregular sizes)."""
    while done < until:
        starts[done] = pos
        length, body = _varint_scalar(buf, pos)
        pos = body + length
        if length < 0 or pos > limit:
            raise CorruptRecordError(f"record at {starts[done]} overruns its batch")
        done += 1
    return done, pos


def _slices(data: np.ndarray, begin: np.ndarray, end: np.ndarray, valid: np.ndarray) -> pa.Array:
    """binary column of `data[begin[i]:end[i]]` (null where not `valid`), copied by Arrow.

    The interleaved bounds `b0 e0 b1 e1 ...` rise monotonically (records follow one
    another), so they are the offsets of a binary array over `data` whose even elements
    are the wanted slices; `take` gathers those into a compact array.
    """
    n = len(begin)
    bounds = np.empty(2 * n, np.int32)
    bounds[0::2] = begin
    bounds[1::2] = end
    spread = pa.Array.from_buffers(
        pa.binary(), max(2 * n - 1, 0), [None, pa.py_buffer(bounds), pa.py_buffer(data)]
    )
    picked = spread.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    if valid.all():
        return picked
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    _, offsets, content = picked.buffers()
    return pa.Array.from_buffers(
        pa.binary(), n, [bitmap, offsets, content], null_count=int(n - valid.sum())
    )


def decode(data: np.ndarray, batches: Sequence[BatchInfo], low: int, high: int) -> Columns:
    """The records with offsets in `[low, high)` of uncompressed `batches` laid in `data`.

    `data` comes from `padded()`; each batch's `position` is relative to it.
    """
    counts = np.array([b.record_count for b in batches], np.int64)
    parts = [
        record_starts(data, b.position + RECORDS_OFFSET, b.record_count, b.end_position)
        for b in batches
    ]
    starts = np.concatenate(parts) if parts else np.empty(0, np.int64)

    def per_record(values: list[int]) -> np.ndarray:
        return np.repeat(np.array(values, np.int64), counts)

    length, pos = varints(data, starts)
    record_end = pos + length
    pos = pos + 1  # attributes: unused in v2
    timestamp_delta, pos = varints(data, pos)
    offset_delta, pos = varints(data, pos)
    key_length, pos = varints(data, pos)
    key_end = pos + np.maximum(key_length, 0)
    if (key_end > record_end).any():
        raise CorruptRecordError("a record's key overruns its length")
    value_length, value_begin = varints(data, key_end)
    value_end = value_begin + np.maximum(value_length, 0)
    if (value_end > record_end).any():
        raise CorruptRecordError("a record's key and value overrun its length")

    offsets = per_record([b.base_offset for b in batches]) + offset_delta
    log_append = per_record([b.timestamp_type for b in batches]).astype(bool)
    stamps = np.where(
        log_append,
        per_record([b.max_timestamp for b in batches]),
        per_record([b.base_timestamp for b in batches]) + timestamp_delta,
    )
    keep = (offsets >= low) & (offsets < high)
    if not keep.all():
        pos, key_end, key_length = pos[keep], key_end[keep], key_length[keep]
        value_begin, value_end, value_length = (
            value_begin[keep],
            value_end[keep],
            value_length[keep],
        )
        offsets, stamps, log_append = offsets[keep], stamps[keep], log_append[keep]
    return Columns(
        offsets=offsets,
        timestamps_ms=stamps,
        timestamp_types=log_append.astype(np.int32),
        keys=_slices(data, pos, key_end, key_length >= 0),
        values=_slices(data, value_begin, value_end, value_length >= 0),
    )


def to_record_batch(
    columns: Columns, topic: str, partition: int, schema: pa.Schema
) -> pa.RecordBatch:
    """Spark's Kafka columns (no headers) for one topic-partition."""
    n = len(columns)
    arrays = [
        columns.keys,
        columns.values,
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(columns.offsets, pa.int64()),
        pa.array(columns.timestamps_ms * 1000, _TIMESTAMP),
        pa.array(columns.timestamp_types, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
