"""Property tests: encode/scan/decode agree, and hostile bytes only raise Kafka errors."""

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from moldau.protocol.errors import KafkaError
from moldau.records.batch import scan_batches, scan_log_prefix
from moldau.records.compression import Compression
from moldau.records.record import Record, build_batch, decode_records

nullable_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), nullable_bytes), max_size=4)
rows = st.lists(st.tuples(nullable_bytes, nullable_bytes, headers), min_size=1, max_size=30)
codecs = st.sampled_from(list(Compression))
timestamps = st.integers(min_value=0, max_value=2**50)
offsets = st.integers(min_value=0, max_value=2**62)


@st.composite
def batches(draw, base_offset=offsets):
    return build_batch(
        draw(rows),
        base_offset=draw(base_offset),
        base_timestamp=draw(timestamps),
        compression=draw(codecs),
        producer_id=draw(st.integers(-1, 2**63 - 1)),
        producer_epoch=draw(st.integers(-1, 2**15 - 1)),
        base_sequence=draw(st.integers(-1, 2**31 - 1)),
        is_transactional=draw(st.booleans()),
        partition_leader_epoch=draw(st.integers(-1, 2**31 - 1)),
    )


@given(rows, offsets, timestamps, codecs)
def test_round_trip(rows, base_offset, base_timestamp, codec):
    batch = build_batch(
        rows, base_offset=base_offset, base_timestamp=base_timestamp, compression=codec
    )
    (info,) = scan_batches(batch)
    assert (info.size, info.compression, info.record_count) == (len(batch), codec, len(rows))
    assert info.last_offset == base_offset + len(rows) - 1
    expected = [
        Record(base_offset + i, base_timestamp, k, v, list(h)) for i, (k, v, h) in enumerate(rows)
    ]
    assert decode_records(batch) == expected
    if codec in (Compression.NONE, Compression.GZIP):  # kafka-python needs no extra package
        theirs = DefaultRecordBatch(bytearray(batch))
        assert theirs.validate_crc()
        assert [
            Record(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs
        ] == expected


@given(
    st.lists(
        st.tuples(st.integers(0, 1_000), timestamps, nullable_bytes, nullable_bytes, headers),
        max_size=20,
        unique_by=lambda t: t[0],
    ),
    offsets,
    codecs,
)
def test_record_likes_round_trip(items, base_offset, codec):
    records = [Record(base_offset + d, ts, k, v, h) for d, ts, k, v, h in sorted(items)]
    batch = build_batch(
        records, base_offset=base_offset, compression=codec, last_offset_delta=1_000
    )
    (info,) = scan_batches(batch, strict=False)
    assert info.last_offset == base_offset + 1_000
    assert decode_records(batch) == records


@st.composite
def mutated(draw):
    batch = bytearray(draw(batches()))
    for _ in range(draw(st.integers(1, 6))):
        batch[draw(st.integers(0, len(batch) - 1))] = draw(st.integers(0, 255))
    cut = draw(st.integers(0, len(batch)))
    return bytes(batch[:cut] + draw(st.binary(max_size=80)))


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), st.booleans())
def test_mutations_raise_only_kafka_errors(buf, verify_crc):
    try:
        infos = scan_batches(buf, verify_crc=verify_crc, max_batch_size=1 << 20)
    except KafkaError:
        return
    for info in infos:
        with contextlib.suppress(KafkaError):
            decode_records(buf[info.position : info.end_position])


@given(st.lists(batches(), max_size=5), batches(), st.data())
def test_log_prefix_is_the_whole_valid_batches(good, extra, data):
    prefix = b"".join(good)
    tail = data.draw(
        st.one_of(
            st.integers(1, len(extra) - 1).map(lambda n: extra[:n]),  # torn write
            st.binary(min_size=1, max_size=200),  # garbage
        )
    )
    infos, valid = scan_log_prefix(prefix + tail)
    assert valid == len(prefix)
    assert infos == scan_batches(prefix, strict=False)
