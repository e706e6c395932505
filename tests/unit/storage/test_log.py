"""Log append/read/lookup/retention behaviour against real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from storage_helpers import FakeClock, append, batch

from moldau.config.topic import LogConfig
from moldau.protocol.errors import (
    InvalidProducerEpochError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
)
from moldau.records.batch import scan_batches
from moldau.records.compression import Compression
from moldau.records.record import build_batch, decode_all, decode_records
from moldau.storage.unified_log import UnifiedLog

SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256, file_delete_delay_ms=0)


def fill(log: UnifiedLog, count: int, records_per_batch: int = 3, **kwargs) -> list[bytes]:
    """Append ``count`` distinct batches; return their stored (stamped) bytes in order."""
    out = []
    for i in range(count):
        data = batch(records_per_batch, value_size=20 + i % 50, tag=i, timestamp=10_000 + 10 * i)
        result = append(log, data, **kwargs)
        assert result.base_offset == i * records_per_batch
        assert result.last_offset == result.base_offset + records_per_batch - 1
        out.append(bytes(data))
    return out


@pytest.fixture
def log(tmp_path: Path) -> UnifiedLog:
    log = UnifiedLog.open(tmp_path / "topic-0", SMALL)
    yield log
    log.close()


def test_round_trip_across_many_segments_is_byte_identical(log: UnifiedLog) -> None:
    stored = fill(log, 300)
    assert len(log.segments) > 10
    assert log.log_end_offset == 900
    assert log.read_bytes(0, 1 << 30) == b"".join(stored)
    # Every batch decodes with the offsets it was assigned.
    data = log.read_bytes(0, 1 << 30)
    offsets = [r.offset for _, records in decode_all(data) for r in records]
    assert offsets == list(range(900))


def test_every_offset_is_found_through_the_index(log: UnifiedLog) -> None:
    stored = fill(log, 300)
    assert all(s.offset_index.entries > 0 for s in log.segments[:-1])
    for offset in range(900):
        result = log.read(offset, 1)
        assert result.to_bytes() == stored[offset // 3], offset
        assert result.first_offset == offset - offset % 3
        assert result.next_offset == result.first_offset + 3


def test_segment_files_use_kafka_names(log: UnifiedLog) -> None:
    fill(log, 100)
    active = f"{log.active.base_offset:020d}"
    names = {p.name for p in log.dir.iterdir()}
    assert f"{active}.log" in names
    # the active segment's indexes are made at their first write (flush, seal or close)
    assert not {f"{active}.index", f"{active}.timeindex"} & names
    log.flush()
    names = {p.name for p in log.dir.iterdir()}
    for segment in log.segments:
        stem = f"{segment.base_offset:020d}"
        assert {f"{stem}.log", f"{stem}.index", f"{stem}.timeindex"} <= names


def test_reads_honour_max_bytes_with_whole_batches(log: UnifiedLog) -> None:
    stored = fill(log, 60)
    sizes = [len(b) for b in stored]
    for start in (0, 7, 30):
        exact = [sum(sizes[start // 3 : start // 3 + k]) for k in (1, 2, 5, 17)]
        for max_bytes in (1, sizes[start // 3] + 1, 500, 1000, 5000, 20_000, *exact):
            result = log.read(start, max_bytes)
            first = start // 3
            # The largest whole-batch prefix that fits, but at least one batch.
            n, total = 0, 0
            while first + n < len(stored) and total + sizes[first + n] <= max_bytes:
                total += sizes[first + n]
                n += 1
            n = max(n, 1)
            assert result.to_bytes() == b"".join(stored[first : first + n]), (start, max_bytes)
            assert result.size == sum(sizes[first : first + n])
            assert result.next_offset == (first + n) * 3


def test_min_one_batch_false_returns_nothing_when_first_batch_too_big(log: UnifiedLog) -> None:
    stored = fill(log, 5)
    result = log.read(0, len(stored[0]) - 1, min_one_batch=False)
    assert result.ranges == [] and result.size == 0
    assert log.read(0, len(stored[0]) - 1).to_bytes() == stored[0]


def test_max_offset_bounds_the_read(log: UnifiedLog) -> None:
    stored = fill(log, 100)
    assert log.read_bytes(0, 1 << 30, max_offset=30) == b"".join(stored[:10])
    # A bound inside a batch excludes that batch.
    assert log.read_bytes(0, 1 << 30, max_offset=31) == b"".join(stored[:10])
    assert log.read_bytes(30, 1 << 30, max_offset=30) == b""


def test_offset_out_of_range(log: UnifiedLog) -> None:
    fill(log, 10)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(31, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    empty = log.read(30, 100)
    assert empty.ranges == [] and empty.next_offset == 30
    log.delete_records_before(6, high_watermark=30)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 100)
    assert log.read(6, 1).first_offset == 6


def test_file_ranges_are_sendfile_ready(log: UnifiedLog, tmp_path: Path) -> None:
    import os

    stored = fill(log, 50)
    result = log.read(0, 1 << 30)
    assert len(result.ranges) > 1  # spans segments
    out = tmp_path / "out"
    with open(out, "wb") as sink:
        for r in result.ranges:
            sent = 0
            while sent < r.size:
                sent += os.sendfile(
                    sink.fileno(), r.file.fileno(), r.position + sent, r.size - sent
                )
    assert out.read_bytes() == b"".join(stored)


def test_timestamp_lookup_finds_first_record_at_or_after(log: UnifiedLog) -> None:
    fill(log, 200)  # batch i holds timestamps 10_000 + 10 i + (0, 1, 2) at offsets 3i..3i+2
    for i in range(0, 200, 7):
        ts = 10_000 + 10 * i
        assert log.offset_for_timestamp(ts) == (3 * i, ts)
        assert log.offset_for_timestamp(ts + 2) == (3 * i + 2, ts + 2)
        assert log.offset_for_timestamp(ts + 3) == (3 * (i + 1), ts + 10) if i < 199 else True
    assert log.offset_for_timestamp(0) == (0, 10_000)
    assert log.offset_for_timestamp(10_000 + 10 * 199 + 3) is None
    assert log.offset_for_timestamp(10_000, max_offset=0) is None
    assert log.max_timestamp_offset() == (599, 10_000 + 10 * 199 + 2)


def test_max_timestamp_offset_of_empty_log(log: UnifiedLog) -> None:
    assert log.max_timestamp_offset() == (-1, -1)
    assert log.offset_for_timestamp(0) is None


def test_batch_larger_than_segment_goes_into_a_fresh_segment(log: UnifiedLog) -> None:
    fill(log, 3)
    big = batch(2, value_size=10_000, tag=9)
    result = append(log, big)
    assert result.base_offset == 9
    big_segment = log.segments[-1]
    assert big_segment.base_offset == 9 and big_segment.size == len(big)
    fill_more = batch(1, tag=10)
    assert append(log, fill_more).base_offset == 11
    assert log.segments[-1].base_offset == 11
    assert log.read_bytes(9, 1) == bytes(big)


def test_segment_ms_rolls_by_batch_timestamps(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", LogConfig(segment_ms=1000))
    append(log, batch(1, timestamp=5_000))
    append(log, batch(1, timestamp=6_000))
    assert len(log.segments) == 1
    append(log, batch(1, timestamp=6_001))
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_log_append_time_stamps_the_broker_clock(tmp_path: Path) -> None:
    clock = FakeClock(123_456)
    log = UnifiedLog.open(
        tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), clock=clock
    )
    data = batch(3, timestamp=1)
    result = append(log, data)
    assert result.log_append_time == 123_456
    records = decode_records(log.read_bytes(0, 1 << 20))
    assert [r.timestamp for r in records] == [123_456] * 3
    scan_batches(log.read_bytes(0, 1 << 20))  # CRC still valid
    assert log.offset_for_timestamp(123_456) == (0, 123_456)
    log.close()


def test_leader_epoch_is_stamped(log: UnifiedLog) -> None:
    append(log, batch(1), leader_epoch=7)
    (info,) = scan_batches(log.read_bytes(0, 1 << 20))
    assert info.partition_leader_epoch == 7


def test_retention_by_time_deletes_old_segments_not_the_active_one(tmp_path: Path) -> None:
    clock = FakeClock(100_000)
    config = LogConfig(segment_bytes=2048, retention_ms=50_000, file_delete_delay_ms=0)
    log = UnifiedLog.open(tmp_path / "t-0", config, clock=clock)
    stored = fill(log, 100)  # timestamps 10_000 .. 11_992
    hw = log.log_end_offset
    segments = log.segments
    assert len(segments) > 3
    cutoff = segments[3].base_offset
    # "now" such that exactly segments 0..2 are older than retention.ms.
    deadline_ts = segments[2].max_timestamp + 1
    assert log.enforce_retention(hw, deadline_ts + 50_000) == 3
    assert log.log_start_offset == cutoff == log.segments[0].base_offset
    assert log.read_bytes(cutoff, 1 << 30) == b"".join(stored[cutoff // 3 :])
    assert not any(p.name.startswith(f"{0:020d}") for p in log.dir.iterdir())
    # Everything expired: all but the active segment go.
    active = log.segments[-1]
    log.enforce_retention(hw, 10**12)
    assert log.segments == (active,)
    assert log.log_start_offset == active.base_offset
    log.close()
    reopened = UnifiedLog.open(tmp_path / "t-0", config, clock=clock)
    assert reopened.log_start_offset == active.base_offset
    assert reopened.read_bytes(active.base_offset, 1 << 30) == b"".join(
        stored[active.base_offset // 3 :]
    )
    reopened.close()


def test_retention_by_bytes_keeps_at_most_the_limit_in_whole_segments(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2048, retention_bytes=5000, file_delete_delay_ms=0)
    log = UnifiedLog.open(tmp_path / "t-0", config)
    stored = fill(log, 100)
    hw = log.log_end_offset
    before = log.size_bytes
    deleted = log.enforce_retention(hw)
    assert deleted > 0
    assert log.size_bytes <= 5000 + log.segments[0].size  # whole segments only
    assert log.size_bytes - log.segments[0].size < 5000 or len(log.segments) == 1
    assert before - log.size_bytes > 0
    start = log.log_start_offset
    assert start == log.segments[0].base_offset
    assert log.read_bytes(start, 1 << 30) == b"".join(stored[start // 3 :])
    assert log.enforce_retention(hw) == 0
    log.close()


def test_retention_never_deletes_above_high_watermark(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2048, retention_ms=0, file_delete_delay_ms=0)
    log = UnifiedLog.open(tmp_path / "t-0", config)
    fill(log, 100)
    assert log.enforce_retention(0, 10**12) == 0
    count = len(log.segments)
    assert log.enforce_retention(log.log_end_offset, 10**12) == count - 1
    log.close()


def test_compact_only_topics_are_not_deleted_by_retention(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2048, retention_ms=0, cleanup_policy=("compact",))
    log = UnifiedLog.open(tmp_path / "t-0", config)
    fill(log, 100)
    assert log.enforce_retention(log.log_end_offset, 10**12) == 0
    log.close()


def test_deleted_segments_wait_for_file_delete_delay(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2048, retention_ms=0, file_delete_delay_ms=60_000)
    log = UnifiedLog.open(tmp_path / "t-0", config)
    fill(log, 50)
    reader = log.read(0, 1 << 30)  # an in-flight fetch holds the old segment's file
    assert log.enforce_retention(log.log_end_offset, 1_000_000) > 0
    deleted = sorted(p.name for p in log.dir.iterdir() if p.name.endswith(".deleted"))
    assert deleted and all(n.endswith(".log.deleted") for n in deleted)
    assert reader.to_bytes()  # still readable via the open file
    log.purge_deleted(1_000_000 + 60_000)
    assert not any(p.name.endswith(".deleted") for p in log.dir.iterdir())
    log.close()


def test_delete_records_moves_log_start_and_deletes_whole_segments(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", SMALL)
    stored = fill(log, 100)
    hw = log.log_end_offset
    target = log.segments[2].base_offset + 4
    assert log.delete_records_before(target, hw) == target
    assert log.log_start_offset == target
    assert log.segments[0].base_offset == target - 4  # the segment holding it stays
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, 100)
    assert log.read(target, 1).first_offset <= target
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(log.log_end_offset + 1, hw)
    assert log.delete_records_before(0, hw) == target  # never moves backwards
    log.close()
    reopened = UnifiedLog.open(tmp_path / "t-0", SMALL, log_start_offset=target)
    assert reopened.log_start_offset == target
    assert reopened.read_bytes(target, 1 << 30).endswith(b"".join(stored[-5:]))
    reopened.close()


def test_delete_records_minus_one_means_high_watermark(log: UnifiedLog) -> None:
    fill(log, 10)
    assert log.delete_records_before(-1, 12) == 12


def test_idempotent_duplicates_return_original_offsets_and_survive_reopen(
    tmp_path: Path,
) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", SMALL)
    fill(log, 3)
    first = append(log, batch(2, producer_id=42, producer_epoch=0, base_sequence=0, tag=1))
    fill_size = log.size_bytes
    retry = append(log, batch(2, producer_id=42, producer_epoch=0, base_sequence=0, tag=1))
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (9, 10)
    assert first.base_offset == 9 and log.size_bytes == fill_size
    with pytest.raises(OutOfOrderSequenceError):
        append(log, batch(1, producer_id=42, producer_epoch=0, base_sequence=5))
    log.close()
    reopened = UnifiedLog.open(tmp_path / "t-0", SMALL)
    retry = append(reopened, batch(2, producer_id=42, producer_epoch=0, base_sequence=0, tag=1))
    assert retry.duplicate and retry.base_offset == 9
    assert reopened.log_end_offset == 11
    nxt = append(reopened, batch(1, producer_id=42, producer_epoch=0, base_sequence=2))
    assert not nxt.duplicate and nxt.base_offset == 11
    with pytest.raises(InvalidProducerEpochError):
        append(reopened, batch(1, producer_id=42, producer_epoch=-1, base_sequence=3))
    reopened.close()


def test_flush_messages_advances_recovery_point(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", LogConfig(flush_messages=5))
    append(log, batch(3))
    assert log.recovery_point == 0
    append(log, batch(3))
    assert log.recovery_point == 6
    log.close()


def test_flush_ms_and_post_roll_flush(tmp_path: Path) -> None:
    clock = FakeClock(0)
    log = UnifiedLog.open(
        tmp_path / "t-0", LogConfig(segment_bytes=2048, flush_ms=1000), clock=clock
    )
    fill(log, 30)
    rolled_to = log.segments[-1].base_offset
    log.maybe_flush(0)
    assert log.recovery_point == rolled_to  # rolled segments are flushed in the background
    log.maybe_flush(1000)
    assert log.recovery_point == log.log_end_offset
    log.close()


def test_truncate_to(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", SMALL)
    stored = fill(log, 100)
    log.truncate_to(151)  # inside batch 50: the whole batch goes
    assert log.log_end_offset == 150
    assert log.read_bytes(0, 1 << 30) == b"".join(stored[:50])
    assert append(log, batch(1, tag=200)).base_offset == 150
    for offset in range(0, 150, 5):
        assert log.read_bytes(offset, 1) == stored[offset // 3]
    log.truncate_to(1000)  # past the end: nothing happens
    assert log.log_end_offset == 151
    log.close()


def test_roll_and_empty_roll(log: UnifiedLog) -> None:
    assert log.roll() is log.segments[0]  # empty active segment: no new segment
    fill(log, 2)
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 6]
    assert append(log, batch(1)).base_offset == 6


def test_delete_removes_directory(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", SMALL)
    fill(log, 30)
    log.delete()
    assert not (tmp_path / "t-0").exists()


def test_failed_write_leaves_the_log_as_it_was(tmp_path, monkeypatch):
    """A full disk mid-append: nothing half-written stays, later appends line up."""
    import errno

    from moldau.storage import segment as segment_module

    log = UnifiedLog.open(tmp_path / "t-0", LogConfig())
    first = bytearray(build_batch([(b"k", b"v1")]))
    log.append_as_leader(first, scan_batches(first), leader_epoch=0)
    real_write = os.write

    def short_then_fail(fd, data):
        real_write(fd, bytes(data)[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment_module.os, "write", short_then_fail)
    second = bytearray(build_batch([(b"k", b"v2")]))
    with pytest.raises(OSError):
        log.append_as_leader(second, scan_batches(second), leader_epoch=0)
    monkeypatch.setattr(segment_module.os, "write", real_write)
    assert log.log_end_offset == 1
    third = bytearray(build_batch([(b"k", b"v3")]))
    assert log.append_as_leader(third, scan_batches(third), leader_epoch=0).base_offset == 1
    values = [r.value for _, recs in decode_all(log.read_bytes(0, 1 << 20)) for r in recs]
    assert values == [b"v1", b"v3"]
    log.close()
    reopened = UnifiedLog.open(tmp_path / "t-0", LogConfig())
    assert reopened.log_end_offset == 2


def test_recompressed_puts_a_produced_batch_in_the_topic_codec_without_touching_the_log(
    tmp_path: Path,
) -> None:
    """What the replica manager runs in a worker thread for big produced batches: the batch
    in the topic's codec, the log itself unchanged; batches already in it, topics that keep
    the producer's codec and invalid input come back as given (the append judges those)."""
    log = UnifiedLog.open(tmp_path / "t-0", LogConfig(compression_type="zstd"))
    values = [(None, f"value-{i}".encode() * 20) for i in range(50)]
    lz4 = bytearray(build_batch(values, compression=Compression.LZ4))
    out = log.recompressed(lz4)
    [info] = scan_batches(out)
    assert info.compression == Compression.ZSTD and info.record_count == 50
    assert [r.value for r in decode_records(out)] == [v for _, v in values]
    assert log.log_end_offset == 0
    assert log.recompressed(out) is out
    assert log.recompressed(lz4[:-3]) == lz4[:-3]
    keeps = UnifiedLog.open(tmp_path / "t-1", LogConfig(compression_type="producer"))
    assert keeps.recompressed(lz4) is lz4
    log.close()
    keeps.close()
