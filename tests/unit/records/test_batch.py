import mmap
import struct

import pytest
from crc32c import crc32c

from moldau.protocol.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from moldau.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    BATCH_LENGTH_OFFSET,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_COUNT_OFFSET,
    increment_sequence,
    read_batch_header,
    recompress_batches,
    scan_batches,
    scan_log_prefix,
    set_log_append_time,
    stamp_base_offset,
)
from moldau.records.compression import Compression
from moldau.records.control import build_marker_batch
from moldau.records.record import build_batch, decode_records


def make(n=3, **kw):
    kw.setdefault("base_timestamp", 1_000)
    return build_batch([(b"k%d" % i, b"v%d" % i) for i in range(n)], **kw)


def rewrite(batch: bytes, offset: int, fmt: str, value, fix_crc=True) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        struct.pack_into(">I", buf, CRC_OFFSET, crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))
    return bytes(buf)


def test_header_constants_match_kafka_layout():
    assert BATCH_HEADER_SIZE == 61
    assert LOG_OVERHEAD == 12
    assert RECORD_COUNT_OFFSET + 4 == BATCH_HEADER_SIZE


def test_scan_reads_every_header_field():
    batch = make(
        3,
        base_offset=10,
        compression=Compression.GZIP,
        producer_id=42,
        producer_epoch=3,
        base_sequence=7,
        is_transactional=True,
        partition_leader_epoch=5,
    )
    (info,) = scan_batches(batch)
    assert info.position == 0
    assert info.size == len(batch)
    assert info.base_offset == 10
    assert info.partition_leader_epoch == 5
    assert info.magic == 2
    assert info.compression == Compression.GZIP
    assert info.timestamp_type == 0
    assert info.is_transactional and not info.is_control
    assert info.last_offset_delta == 2 and info.record_count == 3
    assert (info.last_offset, info.next_offset) == (12, 13)
    assert info.base_timestamp == info.max_timestamp == 1_000
    assert (info.producer_id, info.producer_epoch) == (42, 3)
    assert (info.base_sequence, info.last_sequence) == (7, 9)
    assert read_batch_header(batch) == info


def test_scan_splits_concatenated_batches():
    batches = [make(i + 1, base_offset=100 * i) for i in range(4)]
    buf = b"".join(batches)
    infos = scan_batches(memoryview(buf), strict=False)
    assert [i.base_offset for i in infos] == [0, 100, 200, 300]
    assert [i.position for i in infos] == [0, *[sum(map(len, batches[:k])) for k in range(1, 4)]]
    assert read_batch_header(buf, infos[2].position) == infos[2]


def test_client_produce_needs_exactly_one_batch():
    assert scan_batches(b"", strict=False) == []
    for buf in (b"", make() + make()):
        with pytest.raises(InvalidRecordError, match="exactly one batch"):
            scan_batches(buf)


def test_last_sequence_wraps_and_no_sequence():
    assert increment_sequence(2**31 - 2, 3) == 1
    (info,) = scan_batches(make(3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert info.last_sequence == 0  # 2**31-2, 2**31-1, 0
    (info,) = scan_batches(make(3))
    assert info.last_sequence == -1


@pytest.mark.parametrize("cut", [1, 11, 12, 60, 61, -1])
def test_truncated_batch_is_corrupt(cut):
    batch = make()
    with pytest.raises(CorruptRecordError):
        scan_batches(batch[:cut] if cut > 0 else batch[:cut])


def test_trailing_garbage_is_corrupt():
    with pytest.raises(CorruptRecordError):
        scan_batches(make() + b"\x00" * 5)


def test_batch_length_too_small_is_corrupt():
    with pytest.raises(CorruptRecordError, match="invalid length"):
        scan_batches(rewrite(make(), BATCH_LENGTH_OFFSET, ">i", 48, fix_crc=False) + b"\0" * 100)


def test_bad_magic_is_corrupt():
    with pytest.raises(CorruptRecordError, match="magic"):
        scan_batches(rewrite(make(), MAGIC_OFFSET, ">b", 1, fix_crc=False))


def test_crc_mismatch_is_corrupt_unless_not_verified():
    batch = bytearray(make())
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        scan_batches(batch)
    assert len(scan_batches(batch, verify_crc=False)) == 1


def test_unknown_compression_is_corrupt():
    with pytest.raises(CorruptRecordError, match="compression"):
        scan_batches(rewrite(make(), ATTRIBUTES_OFFSET, ">h", 5))


def test_too_large():
    batch = make()
    scan_batches(batch, max_batch_size=len(batch))
    with pytest.raises(RecordTooLargeError):
        scan_batches(batch, max_batch_size=len(batch) - 1)


def test_negative_record_count_is_invalid():
    with pytest.raises(InvalidRecordError):
        scan_batches(rewrite(make(), RECORD_COUNT_OFFSET, ">i", -1), strict=False)


def test_strict_rules_for_client_batches():
    inconsistent = rewrite(make(3), LAST_OFFSET_DELTA_OFFSET, ">i", 5)
    empty = build_batch([], last_offset_delta=4)
    control = build_batch([(b"\0\0\0\0", b"")], is_control=True)
    for batch in (inconsistent, empty, control):
        with pytest.raises(InvalidRecordError):
            scan_batches(batch)
        # Compacted batches and transaction markers arrive by replication.
        assert len(scan_batches(batch, strict=False)) == 1
    with pytest.raises(InvalidRecordError):
        scan_batches(rewrite(make(3), LAST_OFFSET_DELTA_OFFSET, ">i", 1), strict=False)


def test_scan_log_prefix_stops_at_first_bad_batch():
    good = [make(2, base_offset=2 * i) for i in range(3)]
    corrupt = bytearray(make(2, base_offset=6))
    corrupt[-1] ^= 1
    buf = b"".join(good) + bytes(corrupt) + make(1, base_offset=8)
    infos, valid = scan_log_prefix(buf)
    assert [i.base_offset for i in infos] == [0, 2, 4]
    assert valid == sum(map(len, good))
    assert scan_log_prefix(b"") == ([], 0)
    assert scan_log_prefix(b"\0" * 30) == ([], 0)


def test_stamp_base_offset_in_place_keeps_crc():
    batch = bytearray(make(3, partition_leader_epoch=-1))
    buf = bytearray(b"x" * 7) + batch
    info = read_batch_header(buf, 7)
    assert info.size == len(batch)
    stamp_base_offset(memoryview(buf), info, 1_000, 9)
    assert (info.base_offset, info.partition_leader_epoch, info.last_offset) == (1_000, 9, 1_002)
    (again,) = scan_batches(buf[7:])
    assert (again.base_offset, again.partition_leader_epoch) == (1_000, 9)
    assert again.crc == info.crc
    assert buf[:7] == b"x" * 7
    assert [r.offset for r in decode_records(bytes(buf[7:]))] == [1_000, 1_001, 1_002]


@pytest.mark.parametrize("codec", list(Compression))
def test_set_log_append_time(codec):
    buf = bytearray(make(3, compression=codec))
    (info,) = scan_batches(buf)
    set_log_append_time(buf, info, 55_555)
    (again,) = scan_batches(buf)  # CRC was recomputed
    assert again == info
    assert again.timestamp_type == 1 and again.compression == codec
    assert again.max_timestamp == 55_555 and again.base_timestamp == 1_000
    assert [r.timestamp for r in decode_records(bytes(buf))] == [55_555] * 3


def test_scanning_an_mmap_lets_it_close(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(make(2) + make(3, base_offset=2) + b"\0\0torn")
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        infos, valid = scan_log_prefix(mm)
        assert [i.record_count for i in infos] == [2, 3]
        assert read_batch_header(mm, infos[1].position) == infos[1]
    assert valid == path.stat().st_size - 6


@pytest.mark.parametrize("source", list(Compression))
@pytest.mark.parametrize("target", list(Compression))
def test_recompress_rewrites_codec_length_and_crc_keeping_producer_fields(source, target):
    txn = make(
        5, compression=source, producer_id=7, producer_epoch=2, base_sequence=40,
        is_transactional=True,
    )  # fmt: skip
    marker = bytes(build_marker_batch(7, 2, committed=True, coordinator_epoch=1, timestamp=1))
    buf = bytearray(txn + marker)
    out, infos = recompress_batches(buf, scan_batches(buf, strict=False), target, None)
    assert [i.compression for i in infos] == [target, Compression.NONE]
    assert out[infos[1].position :] == marker, "control batches stay as written"
    first = scan_batches(out[: infos[0].size])[0]  # CRC verified
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 2, 40)
    assert first.is_transactional and first.record_count == 5
    assert decode_records(out[: infos[0].size]) == decode_records(txn)
    if source == target:
        assert out is buf, "nothing to do costs nothing"


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_one_produced_batch_scans_as_the_general_loop_does(kind):
    """A client's single batch takes a shorter path (once per partition of a produce):
    the same header, and the same refusals, as the loop over several batches."""
    batch = make(3, producer_id=7, producer_epoch=1, base_sequence=4, is_transactional=True)
    buf = kind(batch)
    assert scan_batches(buf) == scan_batches(buf, strict=False) == [read_batch_header(batch)]
    with pytest.raises(RecordTooLargeError):
        scan_batches(buf, max_batch_size=len(batch) - 1)
    corrupt = bytearray(batch)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        scan_batches(kind(corrupt))
