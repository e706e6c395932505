import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from moldau.protocol.errors import CorruptRecordError, InvalidRecordError
from moldau.records.batch import RECORD_COUNT_OFFSET, RECORDS_OFFSET, scan_batches
from moldau.records.compression import Compression
from moldau.records.record import Record, build_batch, decode_all, decode_records, iter_batches

ROWS = [
    (b"key", b"value", [("h1", b"x"), ("h2", None)]),
    (None, b"no key", []),
    (b"no value", None, []),
    (b"", b"", [("", b"")]),
    (b"big", b"v" * 70_000, [("\u00fc", b"\xff" * 200)]),
]
# Codecs kafka-python can handle without optional packages.
ORACLE_CODECS = [Compression.NONE, Compression.GZIP]


@pytest.mark.parametrize("codec", list(Compression))
def test_build_then_decode(codec):
    batch = build_batch(ROWS, base_offset=40, base_timestamp=7_000, compression=codec)
    (info,) = scan_batches(batch)
    assert info.compression == codec and info.record_count == len(ROWS)
    records = decode_records(batch)
    assert records == [Record(40 + i, 7_000, k, v, list(h)) for i, (k, v, h) in enumerate(ROWS)]


def test_two_tuples_and_default_timestamp():
    (record,) = decode_records(build_batch([(b"k", b"v")]))
    assert record.headers == [] and record.timestamp > 1_600_000_000_000


def test_record_likes_keep_offsets_and_timestamps():
    kept = [Record(103, 5_000, b"a", b"1", []), Record(107, 4_000, b"b", None, [("h", b"")])]
    batch = build_batch(kept, base_offset=100, last_offset_delta=9)
    (info,) = scan_batches(batch, strict=False)
    assert (info.base_offset, info.last_offset, info.record_count) == (100, 109, 2)
    assert (info.base_timestamp, info.max_timestamp) == (5_000, 5_000)
    assert decode_records(batch) == kept
    with pytest.raises(ValueError):
        build_batch(kept, base_offset=104)


def test_empty_batch_for_compaction():
    batch = build_batch([], base_offset=10, last_offset_delta=4, base_timestamp=1)
    assert decode_records(batch) == []
    (info,) = scan_batches(batch, strict=False)
    assert info.next_offset == 15


def test_decode_all_and_iter_batches():
    buf = b"".join(
        build_batch([(b"k", b"%d" % i)], base_offset=i, compression=Compression(i % 5))
        for i in range(6)
    )
    decoded = decode_all(buf)
    assert [info.base_offset for info, _ in decoded] == list(range(6))
    assert [records[0].value for _, records in decoded] == [b"%d" % i for i in range(6)]
    assert list(iter_batches(memoryview(buf))) == decoded


def test_malformed_records_are_invalid():
    batch = bytearray(build_batch([(b"k", b"v")], base_timestamp=0))
    batch[RECORDS_OFFSET] = 0x7E  # record length no longer matches
    with pytest.raises(InvalidRecordError):
        decode_records(bytes(batch))
    with pytest.raises(CorruptRecordError):
        decode_records(build_batch([(b"k", b"v")])[:40])


def test_truncated_buffer_is_corrupt():
    batch = build_batch([(b"k", b"v")])
    with pytest.raises(CorruptRecordError):
        decode_records(batch[:-1])


def test_trailing_bytes_are_invalid():
    batch = build_batch([(b"k", b"v"), (b"k2", b"v2")])
    # Claim one record fewer than encoded: the second one is left over.
    shorter = bytearray(batch)
    shorter[RECORD_COUNT_OFFSET:RECORDS_OFFSET] = (1).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError):
        decode_records(bytes(shorter))


@pytest.mark.parametrize("codec", ORACLE_CODECS)
def test_kafka_python_reads_our_batches(codec):
    batch = build_batch(
        ROWS,
        base_offset=5,
        base_timestamp=123,
        compression=codec,
        producer_id=9,
        producer_epoch=2,
        base_sequence=11,
        is_transactional=True,
    )
    theirs = DefaultRecordBatch(bytearray(batch))
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.producer_id, theirs.producer_epoch) == (5, 9, 2)
    assert (theirs.base_sequence, theirs.is_transactional) == (11, True)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs] == [
        (5 + i, 123, k, v, h) for i, (k, v, h) in enumerate(ROWS)
    ]


@pytest.mark.parametrize("codec", ORACLE_CODECS)
def test_we_read_kafka_python_batches(codec):
    builder = DefaultRecordBatchBuilder(2, codec, False, 3, 1, 0, 1 << 24)
    for i, (key, value, headers) in enumerate(ROWS):
        builder.append(i, 1_000 + i, key, value, headers)
    batch = bytes(builder.build())
    (info,) = scan_batches(batch)
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (3, 1, 0)
    assert info.max_timestamp == 1_000 + len(ROWS) - 1
    assert decode_records(batch) == [
        Record(i, 1_000 + i, k, v, list(h)) for i, (k, v, h) in enumerate(ROWS)
    ]
