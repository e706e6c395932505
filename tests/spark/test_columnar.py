"""Record batches decoded into Arrow columns by numpy, checked against the record decoder."""

from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest

from moldau.protocol.errors import CorruptRecordError
from moldau.protocol.messages.fetch_response import AbortedTransaction, PartitionData
from moldau.records.batch import scan_log_prefix
from moldau.records.compression import Compression
from moldau.records.control import build_marker_batch
from moldau.records.record import build_batch, decode_all
from moldau.spark import columnar
from moldau.spark.arrow import arrow_schema
from moldau.spark.fetcher import _Answer, _decode
from moldau.spark.offsets import OffsetRange


def _records(n: int, seed: int) -> list[tuple[bytes | None, bytes | None]]:
    """Keys and values of every kind: null, empty, short, long (multi-byte varints)."""
    rng = random.Random(seed)
    sizes = [0, 1, 5, 100, 100, 100, 300, 20_000]
    out = []
    for i in range(n):
        key = None if i % 11 == 3 else b"%d" % i
        value = None if i % 17 == 5 else rng.randbytes(rng.choice(sizes))
        out.append((key, value))
    return out


def _expected(buf: bytes, low: int, high: int) -> list[tuple[int, bytes | None, bytes | None]]:
    return [
        (r.offset, r.key, r.value)
        for _, records in decode_all(buf)
        for r in records
        if low <= r.offset < high
    ]


def _got(c: columnar.Columns) -> list[tuple[int, bytes | None, bytes | None]]:
    return list(zip(c.offsets.tolist(), c.keys.to_pylist(), c.values.to_pylist(), strict=True))


@pytest.mark.parametrize("uniform", [True, False])
def test_columns_equal_the_record_decoder(uniform):
    if uniform:  # equal framed sizes in runs: the stride guesses hold
        recs = [(b"k%06d" % i, bytes([i % 256]) * 100) for i in range(3000)]
    else:
        recs = _records(3000, seed=7)
    buf = build_batch(recs[:1000], base_offset=5, base_timestamp=1_000) + build_batch(
        recs[1000:], base_offset=1005, base_timestamp=2_000
    )
    batches, _ = scan_log_prefix(buf, verify_crc=False)
    c = columnar.decode(columnar.padded(buf), batches, 17, 2900)
    assert _got(c) == _expected(buf, 17, 2900)
    assert c.timestamps_ms[0] == 1_000 and c.timestamps_ms[-1] == 2_000
    assert set(c.timestamp_types.tolist()) == {0}


def zigzag_varints(values: list[int]) -> tuple[bytes, list[int]]:
    """Kafka's zigzag varints of ``values`` back to back, and where each starts."""
    out, starts = bytearray(), []
    for v in values:
        starts.append(len(out))
        zigzag = (v << 1) ^ (v >> 63)
        while zigzag >= 0x80:
            out.append(zigzag & 0x7F | 0x80)
            zigzag >>= 7
        out.append(zigzag)
    return bytes(out), starts


def test_varints_of_every_width():
    values = [0, 1, -1, 63, -64, 64, 300, -300, 2**31 - 1, -(2**31), 2**62, -(2**63)]
    out, starts = zigzag_varints(values)
    import numpy as np

    got, ends = columnar.varints(columnar.padded(out), np.array(starts))
    assert got.tolist() == values
    assert ends.tolist() == [*starts[1:], len(out)]


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_varint_columns_of_one_width_take_their_fast_path(width):
    """A column whose varints are all at most `width` bytes long, shuffled widths below it."""
    import numpy as np

    rng = random.Random(width)
    top = 1 << (7 * width - 1)  # zigzag values of `width` bytes at most
    values = [rng.randrange(-top, top) for _ in range(500)] + [-top, top - 1, 0]
    out, starts = zigzag_varints(values)
    got, ends = columnar.varints(columnar.padded(out), np.array(starts))
    assert got.tolist() == values
    assert ends.tolist() == [*starts[1:], len(out)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_record_starts_follow_runs_of_every_length(seed):
    """Equal-sized records in runs of 1 to 300 rows: each run ends where a guess fails."""
    rng = random.Random(seed)
    recs: list[tuple[bytes | None, bytes | None]] = []
    while len(recs) < 4000:
        size = rng.choice([0, 1, 3, 60, 61, 200])
        recs += [(b"k", bytes(size))] * rng.choice([1, 2, 3, 5, 64, 65, 300])
    buf = build_batch(recs, base_offset=0)
    batches, _ = scan_log_prefix(buf, verify_crc=False)
    c = columnar.decode(columnar.padded(buf), batches, 0, len(recs))
    assert _got(c) == _expected(buf, 0, len(recs))


def test_a_key_overrunning_its_record_is_corrupt():
    buf = bytearray(build_batch([(b"k", b"v" * 50)] * 3))
    buf[65] = 0x7E  # the first record's key length now says 63 bytes: past its record
    batches, _ = scan_log_prefix(bytes(buf), verify_crc=False)
    with pytest.raises(CorruptRecordError, match="key"):
        columnar.decode(columnar.padded(bytes(buf)), batches, 0, 10)


def test_a_record_overrunning_its_batch_is_corrupt():
    buf = bytearray(build_batch([(b"k", b"v" * 50)] * 3))
    buf[61] = 0x7E  # the first record's length now says 63 bytes: past the batch's end
    batches, _ = scan_log_prefix(bytes(buf), verify_crc=False)
    with pytest.raises(CorruptRecordError):
        columnar.decode(columnar.padded(bytes(buf)), batches, 0, 10)


def _at(offset: int, batch: bytes | bytearray) -> bytes:
    return struct.pack(">q", offset) + bytes(batch[8:])


def test_fetched_batches_skip_aborted_transactions_and_markers_and_decompress():
    """An answer as a read_committed Fetch gets it: an aborted transaction of producer 7
    between committed data, a marker for each, compressed batches; rows in offset order."""
    txn = dict(producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    log = b"".join(
        [
            build_batch([(b"a", b"0"), (b"a", b"1")], base_offset=0, compression=Compression.LZ4),
            build_batch([(b"t", b"aborted")] * 2, base_offset=2, **txn),
            _at(4, build_marker_batch(7, 0, committed=False, coordinator_epoch=0)),
            build_batch([(b"t", b"committed")], base_offset=5, **txn),
            _at(6, build_marker_batch(7, 0, committed=True, coordinator_epoch=0)),
            build_batch(
                [(b"z", b"%d" % i) for i in range(7, 12)],
                base_offset=7,
                compression=Compression.ZSTD,
            ),
        ]
    )
    data = PartitionData(records=memoryview(log), aborted_transactions=[AbortedTransaction(7, 2)])
    answer = _Answer(
        data, memoryview(log), columnar.padded(log), scan_log_prefix(log, verify_crc=False)[0]
    )
    r = OffsetRange("t", 0, 1, 10)
    table = pa.Table.from_batches(list(_decode(answer, r, True, arrow_schema(False))))
    rows = list(zip(table["offset"].to_pylist(), table["value"].to_pylist(), strict=True))
    assert rows == [(1, b"1"), (5, b"committed"), (7, b"7"), (8, b"8"), (9, b"9")]
    assert set(table["topic"].to_pylist()) == {"t"} and set(table["partition"].to_pylist()) == {0}
    uncommitted = pa.Table.from_batches(list(_decode(answer, r, False, arrow_schema(False))))
    assert uncommitted["offset"].to_pylist() == [1, 2, 3, 5, 7, 8, 9]
