"""The schema registry's framing of each record's key and value in a batch, for a whole-batch
check: magic byte 0 and a 4-byte big-endian schema id in a payload's first five bytes.

One short loop follows the records' length fields (each record's start depends on the one
before); numpy then finds every record's key and value and reads their first five bytes
for all records at once, instead of a Python loop per field. numpy comes with the
registry's extra: only a broker that hosts a registry validates.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from moldau.protocol.errors import CorruptRecordError, InvalidRecordError
from moldau.records.batch import BATCH_HEADER_SIZE, RECORDS_OFFSET, Buffer, read_batch_header
from moldau.records.compression import decompress

NULL = -1  # a null key or value (a tombstone): nothing to frame
UNFRAMED = -2  # shorter than five bytes, or a magic byte other than 0
_MAX_VARINT = 5  # an int32 length
_MAX_VARLONG = 10  # the timestamp delta
_SHIFTS = np.arange(_MAX_VARINT)
Ids = npt.NDArray[np.int64]


def framed_ids(batch: Buffer) -> tuple[Ids, Ids]:
    """Per record of one whole batch, the schema id its key and its value are framed with,
    or NULL or UNFRAMED; InvalidRecordError when the records do not parse."""
    info = read_batch_header(batch)
    if not BATCH_HEADER_SIZE <= info.size <= len(batch):
        raise CorruptRecordError("batch size does not match its buffer")
    buf = decompress(info.compression, memoryview(batch)[RECORDS_OFFSET : info.size])
    if info.record_count == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    data = np.frombuffer(buf, dtype=np.uint8)
    bounds = np.asarray(_record_bounds(buf, info.record_count), dtype=np.int64)
    if np.any(bounds[1:] <= bounds[:-1]) or bounds[-1] > len(data):
        raise InvalidRecordError("record runs past its batch")
    body = _skip(data, bounds[:-1])  # after the record's length
    # attributes (one byte), then the timestamp and offset deltas, skipped undecoded
    after_deltas = _skip(data, _skip(data, body + 1))
    key_length, key = _varints(data, after_deltas)
    value_length, value = _varints(data, key + np.maximum(key_length, 0))
    if np.any(value + np.maximum(value_length, 0) > bounds[1:]):
        raise InvalidRecordError("record runs past its batch")
    return _frames(data, key_length, key), _frames(data, value_length, value)


def _record_bounds(buf: Buffer, count: int) -> list[int]:
    """Where each record starts, and where the last one ends: its length field tells."""
    bounds = [0]
    pos = 0
    try:
        for _ in range(count):  # lengths of one and two bytes inline: records up to 8 KiB
            raw = buf[pos]
            if raw < 0x80:
                pos += 1
            else:
                byte = buf[pos + 1]
                raw = (raw & 0x7F) | (byte << 7)
                pos += 2
                shift = 7
                while byte >= 0x80:
                    raw &= ~(0x80 << shift)
                    shift += 7
                    byte = buf[pos]
                    raw |= byte << shift
                    pos += 1
            pos += (raw >> 1) ^ -(raw & 1)
            bounds.append(pos)
    except IndexError:
        raise InvalidRecordError("record runs past its batch") from None
    return bounds


def _window(data: npt.NDArray[np.uint8], at: Ids, size: int) -> npt.NDArray[np.uint8]:
    """The `size` bytes from each position of `at`, one row each (clipped at the end of the
    data: whatever is read there fails the records' bounds check)."""
    window: npt.NDArray[np.uint8] = data[np.minimum(at[:, None] + np.arange(size), len(data) - 1)]
    return window


def _widths(window: npt.NDArray[np.uint8]) -> Ids:
    """How many bytes the varint at the start of each row takes."""
    more = window >= 0x80
    if np.any(more.all(axis=1)):
        raise InvalidRecordError("malformed varint in record")
    widths: Ids = more.argmin(axis=1) + 1
    return widths


def _skip(data: npt.NDArray[np.uint8], at: Ids) -> Ids:
    """The positions after the varlongs starting at `at`."""
    return at + _widths(_window(data, at, _MAX_VARLONG))


def _varints(data: npt.NDArray[np.uint8], at: Ids) -> tuple[Ids, Ids]:
    """(the zigzag varints starting at `at`, the positions after them)."""
    window = _window(data, at, _MAX_VARINT)
    widths = _widths(window)
    used = widths[:, None] > _SHIFTS
    raw = (((window.astype(np.int64) & 0x7F) << (7 * _SHIFTS)) * used).sum(axis=1)
    return (raw >> 1) ^ -(raw & 1), at + widths


def _frames(data: npt.NDArray[np.uint8], length: Ids, at: Ids) -> Ids:
    """The ids of the payloads of `length` at `at`: their first five bytes, gathered at
    once (positions past the data are clipped: such payloads are null or short)."""
    head = _window(data, at, 5).astype(np.int64)
    schema_id = (head[:, 1] << 24) | (head[:, 2] << 16) | (head[:, 3] << 8) | head[:, 4]
    framed = (length >= 5) & (head[:, 0] == 0)
    ids: Ids = np.where(length < 0, NULL, np.where(framed, schema_id, UNFRAMED))
    return ids
