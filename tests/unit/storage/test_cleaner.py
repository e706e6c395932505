"""Log compaction: latest value per key at its original offset, crash-safe swaps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import FakeClock, append

from moldau.config.topic import LogConfig
from moldau.records.batch import DELETE_HORIZON_FLAG
from moldau.records.compression import Compression
from moldau.records.record import build_batch, decode_all
from moldau.storage import local_log as local_log_module
from moldau.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT, read_checkpoint
from moldau.storage.cleaner import clean_log, cleanable_range
from moldau.storage.local_log import CLEANED_SUFFIX, SWAP_SUFFIX, LocalLog
from moldau.storage.log_manager import LogManager
from moldau.storage.unified_log import UnifiedLog

DAY_MS = 86_400_000
NOW = 1_700_000_000_000


def compact_config(**overrides: str) -> LogConfig:
    return LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": "400", **overrides})


def put(log: UnifiedLog, items, *, ts: int = NOW, compression: int = Compression.NONE) -> int:
    """Append one batch of (key, value) records like Produce does; returns the batch's
    base offset."""
    data = bytearray(build_batch(list(items), base_timestamp=ts, compression=compression))
    return append(log, data, now_ms=ts).base_offset


def clean(log: UnifiedLog, checkpoint: int, now_ms: int, **kwargs) -> int | None:
    """Clean with a single replica's high watermark: the log end offset."""
    return clean_log(log, checkpoint, now_ms, high_watermark=log.log_end_offset, **kwargs)


def hws(manager: LogManager) -> dict:
    return {tp: log.log_end_offset for tp, log in manager.logs.items()}


def read_all(log: UnifiedLog):
    """(batch info, [(offset, key, value)]) for every batch from the log start."""
    raw = log.read_bytes(log.log_start_offset, 1 << 30)
    return [
        (info, [(r.offset, r.key, r.value) for r in records]) for info, records in decode_all(raw)
    ]


def records_of(log: UnifiedLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [record for _, records in read_all(log) for record in records]


def latest(records) -> dict:
    """Last value per key, tombstoned keys left out."""
    view: dict = {}
    for _, key, value in records:
        view[key] = value
    return {k: v for k, v in view.items() if v is not None}


def expected_after_clean(written, end: int):
    """Below ``end`` only each key's last record there survives; the rest is untouched."""
    last_below = {key: offset for offset, key, _ in written if offset < end}
    return [r for r in written if r[0] >= end or last_below[r[1]] == r[0]]


def fill(log: UnifiedLog, updates: int, keys: int, *, ts: int = NOW):
    written = []
    for i in range(updates):
        key, value = f"key-{i % keys}".encode(), f"value-{i}".encode()
        written.append((put(log, [(key, value)], ts=ts), key, value))
    return written


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


def open_log(path: Path, config: LogConfig, clock: FakeClock, **kwargs) -> UnifiedLog:
    return UnifiedLog.open(path, config, clock=clock, **kwargs)


def test_latest_value_per_key_at_original_offsets(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path / "t-0", compact_config(), clock)
    written = fill(log, 300, 5)
    active, active_size = log.active, log.active.size
    leo, segments_before = log.log_end_offset, len(log.segments)
    assert segments_before > 10

    end = clean(log, 0, NOW)

    assert end == active.base_offset
    kept = records_of(log)
    assert kept == expected_after_clean(written, end)
    assert len([r for r in kept if r[0] < end]) == 5
    assert latest(kept) == latest(written)
    offsets = [offset for offset, _, _ in kept]
    assert offsets == sorted(set(offsets))
    assert log.log_end_offset == leo
    assert log.active is active and active.size == active_size
    assert len(log.segments) < segments_before
    assert sorted(p.name for p in log.dir.iterdir() if p.name.endswith(SWAP_SUFFIX)) == []
    # The indexes of the rewritten segments work: every kept offset can be read from.
    for offset in offsets:
        assert read_all_from(log, offset)[0] == offset
    log.close()
    reopened = open_log(tmp_path / "t-0", compact_config(), clock, clean_shutdown=True)
    assert records_of(reopened) == kept


def read_all_from(log: UnifiedLog, offset: int) -> list[int]:
    raw = log.read_bytes(offset, 1 << 30)
    return [r.offset for _, records in decode_all(raw) for r in records if r.offset >= offset]


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD])
def test_compressed_batches_stay_compressed(
    tmp_path: Path, clock: FakeClock, codec: Compression
) -> None:
    log = open_log(tmp_path / "t-0", compact_config(**{"segment.bytes": "600"}), clock)
    written = []
    for i in range(60):
        items = [(f"key-{(i + j) % 7}".encode(), f"v{i}-{j}".encode() * 3) for j in range(4)]
        base = put(log, items, compression=codec)
        written += [(base + j, k, v) for j, (k, v) in enumerate(items)]
    ranges_before = {(info.base_offset, info.last_offset) for info, _ in read_all(log)}

    end = clean(log, 0, NOW)

    after = read_all(log)
    assert [r for _, records in after for r in records] == expected_after_clean(written, end)
    assert all(info.compression == codec for info, _ in after)
    # Rewritten batches keep their original offset range, even when they lost records.
    assert {(info.base_offset, info.last_offset) for info, _ in after} <= ranges_before
    assert any(len(records) < info.last_offset_delta + 1 for info, records in after)


def test_tombstones_go_once_the_delete_horizon_the_first_pass_stamped_is_reached(
    tmp_path: Path, clock: FakeClock
) -> None:
    """KIP-534: the tombstone's old timestamp does not count; the first pass that keeps it
    stamps its batch with now + delete.retention.ms, and only a pass at or after that
    horizon drops it."""
    log = open_log(tmp_path / "t-0", compact_config(), clock)
    put(log, [(b"gone", b"old value")])
    tombstone = put(log, [(b"gone", None)])
    written = fill(log, 40, 3)
    first_pass = NOW + 3 * DAY_MS  # long after the records' timestamps + delete.retention.ms
    end = clean(log, 0, first_pass)
    assert (tombstone, b"gone", None) in records_of(log)
    assert not any(key == b"gone" and value is not None for _, key, value in records_of(log))
    raw = log.read_bytes(log.log_start_offset, 1 << 30)
    stamped = {info.base_offset: (info, records) for info, records in decode_all(raw)}
    info, records = stamped[tombstone]
    assert info.attributes & DELETE_HORIZON_FLAG
    assert info.delete_horizon_ms == info.base_timestamp == first_pass + DAY_MS
    assert info.max_timestamp == NOW and [r.timestamp for r in records] == [NOW]
    # Batches without tombstones are not stamped.
    assert all(i.delete_horizon_ms is None for o, (i, _) in stamped.items() if o != tombstone)

    assert clean(log, end, first_pass + DAY_MS - 1, force=True) == end
    assert (tombstone, b"gone", None) in records_of(log)
    assert read_all(log)[0][0].delete_horizon_ms == first_pass + DAY_MS  # not stamped again

    clean(log, end, first_pass + DAY_MS, force=True)
    assert not any(key == b"gone" for _, key, _ in records_of(log))
    assert latest(records_of(log)) == latest(written)


def test_a_tombstone_in_a_batch_with_other_records_keeps_them_when_it_goes(
    tmp_path: Path, clock: FakeClock
) -> None:
    """The stamped batch keeps its horizon when a later pass rewrites it."""
    log = open_log(tmp_path / "t-0", compact_config(), clock)
    base = put(log, [(b"dead", None), (b"alive", b"value")])
    fill(log, 40, 3)
    end = clean(log, 0, NOW)
    assert [(base, b"dead", None), (base + 1, b"alive", b"value")] == records_of(log)[:2]
    clean(log, end, NOW + DAY_MS, force=True)
    info, records = read_all(log)[0]
    assert records == [(base + 1, b"alive", b"value")]
    assert (info.base_offset, info.last_offset) == (base, base + 1)
    assert info.delete_horizon_ms == NOW + DAY_MS


def test_null_keys_are_dropped(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path / "t-0", compact_config(), clock)
    put(log, [(None, b"no key"), (b"k", b"v")])
    fill(log, 30, 2)
    clean(log, 0, NOW)
    assert all(key is not None for _, key, _ in records_of(log))


def test_dirty_ratio_threshold(tmp_path: Path, clock: FakeClock) -> None:
    config = compact_config(**{"min.cleanable.dirty.ratio": "0.6"})
    log = open_log(tmp_path / "t-0", config, clock)
    fill(log, 200, 40)
    end = clean(log, 0, NOW)
    assert end is not None
    fill(log, 20, 40)  # a few more sealed segments: dirty, but well under 60 %
    rng = cleanable_range(log, end, NOW, log.log_end_offset)
    assert 0 < rng.dirty_ratio < 0.6
    files_before = sorted(os.listdir(log.dir))
    assert clean(log, end, NOW) is None
    assert sorted(os.listdir(log.dir)) == files_before
    fill(log, 200, 40)
    assert cleanable_range(log, end, NOW, log.log_end_offset).dirty_ratio >= 0.6
    assert clean(log, end, NOW) is not None


def test_max_compaction_lag_forces_cleaning(tmp_path: Path, clock: FakeClock) -> None:
    config = compact_config(
        **{"min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "60000"}
    )
    log = open_log(tmp_path / "t-0", config, clock)
    fill(log, 200, 40)
    end = clean(log, 0, NOW)
    fill(log, 20, 40, ts=NOW + 1000)
    assert clean(log, end, NOW + 2000) is None
    assert clean(log, end, NOW + 1000 + 60_001) is not None


def test_min_compaction_lag_protects_young_segments(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path / "t-0", compact_config(**{"min.compaction.lag.ms": "5000"}), clock)
    old = fill(log, 50, 2, ts=NOW)
    young = fill(log, 50, 2, ts=NOW + 10_000)
    end = clean(log, 0, NOW + 12_000)
    assert end is not None and end <= young[0][0]
    kept = records_of(log)
    assert [r for r in kept if r[0] >= young[0][0]] == young  # nothing young was touched
    assert len([r for r in kept if r[0] < end]) == 2
    assert old[-1] in kept


def test_cleaner_checkpoint_round_trip(tmp_path: Path, clock: FakeClock) -> None:
    manager = LogManager([tmp_path], {"log.segment.bytes": "400"}, clock=clock)
    log = manager.get_or_create_log("compacted", 0, compact_config())
    manager.get_or_create_log("plain", 0, LogConfig.from_props({"segment.bytes": "400"}))
    fill(log, 200, 5)
    fill(manager.get_log("plain", 0), 200, 5)
    plain_segments = manager.get_log("plain", 0).segments

    assert manager.run_cleaner(hws(manager), NOW) == 1
    checkpoint = read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    assert checkpoint == {("compacted", 0): log.active.base_offset}
    assert manager.get_log("plain", 0).segments == plain_segments
    assert manager.run_cleaner(hws(manager), NOW) == 0
    manager.shutdown()

    manager = LogManager([tmp_path], {"log.segment.bytes": "400"}, clock=clock)
    manager.load_logs(lambda topic: {"cleanup.policy": "compact"} if topic == "compacted" else {})
    assert manager.run_cleaner(hws(manager), NOW) == 0
    fill(manager.get_log("compacted", 0), 200, 5)
    assert manager.run_cleaner(hws(manager), NOW) == 1


def _crash_before_old_segments_go(monkeypatch) -> None:
    def crash(self, segment, now_ms):
        raise KeyboardInterrupt("crash")

    monkeypatch.setattr(LocalLog, "schedule_delete", crash)


def _crash_before_swap_is_renamed(monkeypatch) -> None:
    rename = os.rename

    def crash(src, dst):
        if str(src).endswith(SWAP_SUFFIX):
            raise KeyboardInterrupt("crash")
        rename(src, dst)

    monkeypatch.setattr(local_log_module.os, "rename", crash)


@pytest.mark.parametrize("crash", [_crash_before_old_segments_go, _crash_before_swap_is_renamed])
def test_interrupted_swap_is_completed_on_open(
    tmp_path: Path, clock: FakeClock, monkeypatch, crash
) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, compact_config(), clock)
    written = fill(log, 300, 5)
    log.flush()
    crash(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        clean(log, 0, NOW)
    monkeypatch.undo()
    assert any(p.name.endswith(SWAP_SUFFIX) for p in path.iterdir())
    (path / f"{0:020d}.log{CLEANED_SUFFIX}").write_bytes(b"half-written garbage")

    reopened = open_log(path, compact_config(), clock, recovery_point=log.log_end_offset)

    names = [p.name for p in path.iterdir()]
    assert not [n for n in names if n.endswith((SWAP_SUFFIX, CLEANED_SUFFIX, ".deleted"))]
    kept = records_of(reopened)
    originals = {offset: (key, value) for offset, key, value in written}
    assert all(originals[offset] == (key, value) for offset, key, value in kept)
    offsets = [offset for offset, _, _ in kept]
    assert offsets == sorted(set(offsets))
    assert latest(kept) == latest(written)
    assert reopened.log_end_offset == log.log_end_offset
    # The first group was cleaned: its segment holds one record per key at most.
    first = reopened.segments[0]
    first_records = [r for r in kept if r[0] < first.next_offset]
    assert len(first_records) == len({key for _, key, _ in first_records})
    # And the next cleaning finishes the job.
    clean(reopened, 0, NOW)
    assert records_of(reopened) == expected_after_clean(written, reopened.active.base_offset)


def test_reader_keeps_ranges_from_before_the_swap(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path / "t-0", compact_config(), clock)
    fill(log, 300, 5)
    before = log.read(0, 1 << 30)
    expected = before.to_bytes()
    clean(log, 0, NOW)
    assert log.read_bytes(0, 1 << 30) != expected
    assert before.to_bytes() == expected


KEYS = [b"a", b"b", b"c", b"d"]
op = st.one_of(
    st.tuples(
        st.just("append"),
        st.lists(
            st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(max_size=30))),
            min_size=1,
            max_size=4,
        ),
        st.sampled_from([Compression.NONE, Compression.ZSTD]),
    ),
    st.tuples(st.just("clean"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("reopen"), st.just(0), st.just(0)),
)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(op, max_size=80))
def test_compaction_keeps_latest_per_key(tmp_path_factory, ops) -> None:
    path = tmp_path_factory.mktemp("prop") / "t-0"
    clock = FakeClock(NOW)
    config = compact_config(
        **{
            "segment.bytes": "250",
            "delete.retention.ms": "3000",
            "min.cleanable.dirty.ratio": "0.3",
        }
    )
    log = open_log(path, config, clock)
    reference: dict[bytes, bytes | None] = {}
    originals: dict[int, tuple[bytes, bytes | None]] = {}
    checkpoint = 0
    for kind, arg, codec in ops:
        clock.ms += 1000
        if kind == "append":
            base = put(log, arg, ts=clock.ms, compression=codec)
            for i, (key, value) in enumerate(arg):
                reference[key] = value
                originals[base + i] = (key, value)
        elif kind == "clean":
            end = clean(log, checkpoint, clock.ms, force=bool(arg))
            if end is not None:
                checkpoint = end
                cleaned_keys = [key for offset, key, _ in records_of(log) if offset < end]
                assert len(cleaned_keys) == len(set(cleaned_keys))
        else:
            leo = log.log_end_offset
            log.close()
            log = open_log(path, config, clock, recovery_point=leo, clean_shutdown=True)
        kept = records_of(log)
        assert latest(kept) == {k: v for k, v in reference.items() if v is not None}
        offsets = [offset for offset, _, _ in kept]
        assert offsets == sorted(set(offsets))
        assert all(originals[offset] == (key, value) for offset, key, value in kept)
        assert log.log_end_offset == len(originals)
    log.close()


def test_log_append_time_batches_keep_their_timestamp_type(
    tmp_path: Path, clock: FakeClock
) -> None:
    config = compact_config(**{"message.timestamp.type": "LogAppendTime"})
    log = open_log(tmp_path / "t-0", config, clock)
    for i in range(40):
        items = [(b"same", b"old %d" % i), (b"key-%d" % (i % 3), b"new %d" % i)]
        data = bytearray(build_batch(items, base_timestamp=5))
        append(log, data, now_ms=NOW + i)
    before = {info.base_offset: info.max_timestamp for info, _ in read_all(log)}
    clean(log, 0, NOW + 100)
    raw = log.read_bytes(0, 1 << 30)
    batches = decode_all(raw)
    assert any(len(records) < info.last_offset_delta + 1 for info, records in batches)
    for info, records in batches:
        assert info.timestamp_type == 1
        assert info.max_timestamp == before[info.base_offset]
        assert all(r.timestamp == before[info.base_offset] for r in records)


def test_rewritten_batches_keep_producer_fields_and_leader_epoch(
    tmp_path: Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path / "t-0", compact_config(), clock)
    for i in range(40):
        items = [(b"same", b"old %d" % i), (b"key-%d" % (i % 3), b"new %d" % i)]
        data = bytearray(
            build_batch(
                items, base_timestamp=NOW, producer_id=7, producer_epoch=2, base_sequence=2 * i
            )
        )
        append(log, data, leader_epoch=3)
    fields = ("producer_id", "producer_epoch", "base_sequence", "partition_leader_epoch")

    def header(info):
        return tuple(getattr(info, f) for f in fields) + (info.last_offset_delta,)

    before = {info.base_offset: header(info) for info, _ in read_all(log)}
    clean(log, 0, NOW)
    after = read_all(log)
    assert any(len(records) < info.last_offset_delta + 1 for info, records in after)
    assert all(header(info) == before[info.base_offset] for info, _ in after)


def test_a_corrupt_log_is_skipped_and_the_others_still_cleaned(
    tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    manager = LogManager([tmp_path], {}, clock=clock)
    bad = manager.get_or_create_log("bad", 0, compact_config())
    good = manager.get_or_create_log("good", 0, compact_config())
    fill(bad, 200, 5)
    assert manager.run_cleaner(hws(manager), NOW) == 1
    fill(bad, 200, 5)
    fill(good, 200, 5)
    first = bad.segments[0]  # already clean: rewritten, not read, by the next pass
    with open(first.path, "r+b") as f:
        f.seek(first.size - 1)
        last = f.read(1)[0]
        f.seek(first.size - 1)
        f.write(bytes([last ^ 0xFF]))
    raw_before = bad.read_bytes(0, 1 << 30)

    assert manager.run_cleaner(hws(manager), NOW) == 1
    assert len(records_of(good)) < 200
    assert bad.read_bytes(0, 1 << 30) == raw_before
    assert not [p for p in bad.dir.iterdir() if p.name.endswith(CLEANED_SUFFIX)]
    assert [r.message for r in caplog.records] == ["bad-0: log cleaning failed; marked uncleanable"]
    assert manager.run_cleaner(hws(manager), NOW) == 0
    assert len(caplog.records) == 1  # not retried until a restart


def test_full_offset_map_cleans_in_several_passes(tmp_path: Path, clock: FakeClock) -> None:
    """log.cleaner.dedupe.buffer.size: a pass whose key map fills stops where the map
    stopped (Kafka's cleaner does so); the next passes go on from that checkpoint until
    every key keeps only its latest record."""
    log = open_log(tmp_path / "t-0", compact_config(), clock)
    written = fill(log, 120, 40)  # keys 0..39, three updates each
    written.append((put(log, [(b"tail", b"t")]), b"tail", b"t"))  # active: not cleanable
    end = log.active.base_offset
    checkpoint, passes = 0, 0
    while checkpoint < end:
        new = clean(log, checkpoint, NOW, force=True, max_map_entries=15)
        assert new is not None and new > checkpoint
        if new < end:  # a partial pass: nothing past it was touched
            assert [r for r in records_of(log) if r[0] >= new] == [
                r for r in written if r[0] >= new
            ]
        checkpoint, passes = new, passes + 1
    assert passes >= 3
    assert records_of(log) == expected_after_clean(written, end)
    assert latest(records_of(log))[b"key-7"] == b"value-87"


def test_a_tombstone_past_a_full_offset_maps_end_stays_past_its_horizon(
    tmp_path: Path, clock: FakeClock
) -> None:
    """The map did not see what such a tombstone supersedes: it waits for a later pass."""
    log = open_log(tmp_path / "t-0", compact_config(), clock)
    put(log, [(b"a", b"x")])
    put(log, [(b"b", b"y")])
    tombstone = put(log, [(b"gone", None)])
    fill(log, 40, 3)
    clean(log, 0, NOW)  # stamps the tombstone's horizon: NOW + one day
    assert clean(log, 0, NOW + 2 * DAY_MS, force=True, max_map_entries=2) == tombstone
    assert (tombstone, b"gone", None) in records_of(log)
    clean(log, 0, NOW + 2 * DAY_MS, force=True)
    assert not any(key == b"gone" for _, key, _ in records_of(log))


def test_offset_map_capacity_is_kafkas() -> None:
    from moldau.storage.cleaner import CLEANER_MAP_LOAD_FACTOR, offset_map_capacity

    # 128 MiB, one thread: 5592405 slots of 24 bytes, 90% of them usable.
    assert offset_map_capacity(134_217_728, 1, CLEANER_MAP_LOAD_FACTOR) == 5_033_164
    assert offset_map_capacity(240, 2, 0.5) == 2
