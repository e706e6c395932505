"""What replication builds on: leader and follower appends, truncation, the epoch cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from storage_helpers import append, batch

from moldau.config.topic import LogConfig
from moldau.protocol.errors import InvalidRecordError, OffsetOutOfRangeError
from moldau.records.batch import scan_batches
from moldau.records.record import decode_all
from moldau.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from moldau.storage.unified_log import UnifiedLog

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=256, file_delete_delay_ms=0)


def leader_log(path: Path, epochs: list[int]) -> tuple[UnifiedLog, list[bytes]]:
    """A leader log with one 2-record batch per entry of ``epochs``; returns the stored
    (stamped) batches, which a follower fetches as they are."""
    log = UnifiedLog.open(path, CONFIG)
    stored = []
    for i, epoch in enumerate(epochs):
        data = batch(2, value_size=40, tag=i, timestamp=1_000 + i)
        append(log, data, leader_epoch=epoch)
        stored.append(bytes(data))
    return log, stored


def follow(log: UnifiedLog, data: bytes):
    buf = bytearray(data)
    return log.append_as_follower(buf, scan_batches(buf, strict=False))


def test_leader_append_stamps_epoch_and_starts_it_in_the_cache(tmp_path: Path) -> None:
    log, stored = leader_log(tmp_path / "t-0", [0, 0, 3, 3, 3, 5])
    epochs = [info.partition_leader_epoch for info in scan_batches(b"".join(stored), strict=False)]
    assert epochs == [0, 0, 3, 3, 3, 5]
    assert log.epoch_cache.entries == [(0, 0), (3, 4), (5, 10)]
    assert log.epoch_cache.end_offset_for(3, log.log_end_offset) == (3, 10)
    assert log.epoch_cache.end_offset_for(5, log.log_end_offset) == (5, 12)
    log.close()


def test_follower_keeps_the_leaders_offsets_epochs_and_bytes(tmp_path: Path) -> None:
    leader, stored = leader_log(tmp_path / "leader-0", [1] * 5 + [2] * 3 + [4] * 10 + [7] * 9)
    follower = UnifiedLog.open(tmp_path / "follower-0", CONFIG)
    fetched = leader.read_bytes(0, 1 << 30)
    position = 0
    while position < len(fetched):  # fetch in uneven chunks of whole batches
        infos = scan_batches(fetched[position:], strict=False)[:3]
        chunk = fetched[position : position + sum(i.size for i in infos)]
        result = follow(follower, chunk)
        assert (result.base_offset, result.last_offset) == (
            infos[0].base_offset,
            infos[-1].last_offset,
        )
        position += len(chunk)
    assert follower.read_bytes(0, 1 << 30) == fetched == b"".join(stored)
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.epoch_cache.entries == leader.epoch_cache.entries
    assert len(follower.segments) > 2  # rolled at segment.bytes like the leader
    leader.close()
    follower.close()


def test_follower_refuses_offsets_below_its_end_and_out_of_order(tmp_path: Path) -> None:
    _, stored = leader_log(tmp_path / "leader-0", [0, 0, 0])
    follower = UnifiedLog.open(tmp_path / "follower-0", CONFIG)
    follow(follower, stored[0] + stored[1])
    with pytest.raises(OffsetOutOfRangeError):
        follow(follower, stored[1])  # offsets 2-3 again
    with pytest.raises(InvalidRecordError):
        follow(follower, stored[2] + stored[1])  # 4-5 then 2-3
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(bytearray(), [])
    assert follower.log_end_offset == 4
    assert follower.read_bytes(0, 1 << 30) == stored[0] + stored[1]
    follow(follower, stored[2])
    assert follower.log_end_offset == 6


def test_follower_accepts_a_gap_after_compaction(tmp_path: Path) -> None:
    _, stored = leader_log(tmp_path / "leader-0", [0] * 4)
    follower = UnifiedLog.open(tmp_path / "follower-0", CONFIG)
    follow(follower, stored[0])
    follow(follower, stored[3])  # offsets 2..5 were compacted away on the leader
    assert follower.log_end_offset == 8
    assert [r.offset for _, recs in decode_all(follower.read_bytes(0, 1 << 30)) for r in recs] == [
        0,
        1,
        6,
        7,
    ]
    assert follower.read(3, 100).first_offset == 6


def test_follower_producer_state_lets_it_lead_without_duplicates(tmp_path: Path) -> None:
    """A follower records the leader's idempotent batches, so after becoming leader it
    answers a producer's retry with the original offsets."""
    leader = UnifiedLog.open(tmp_path / "leader-0", CONFIG)
    first = batch(2, producer_id=9, producer_epoch=0, base_sequence=0, tag=1)
    append(leader, first)
    follower = UnifiedLog.open(tmp_path / "follower-0", CONFIG)
    follow(follower, leader.read_bytes(0, 1 << 30))
    retry = append(follower, batch(2, producer_id=9, producer_epoch=0, base_sequence=0, tag=1))
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (0, 1)
    nxt = append(
        follower, batch(1, producer_id=9, producer_epoch=0, base_sequence=2), leader_epoch=1
    )
    assert not nxt.duplicate and nxt.base_offset == 2
    assert follower.epoch_cache.entries == [(0, 0), (1, 2)]


def test_truncate_to_keeps_epoch_cache_and_producer_state_consistent(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    for i in range(30):
        epoch = 0 if i < 10 else 2 if i < 20 else 4
        append(
            log,
            batch(2, producer_id=5, producer_epoch=0, base_sequence=2 * i, tag=i),
            leader_epoch=epoch,
        )
    assert log.epoch_cache.entries == [(0, 0), (2, 20), (4, 40)]
    log.truncate_to(30)
    assert log.log_end_offset == 30
    assert log.epoch_cache.entries == [(0, 0), (2, 20)]
    assert LeaderEpochFileCache.load(log.dir / LEADER_EPOCH_CHECKPOINT).entries == [(0, 0), (2, 20)]
    # The producer's next sequence is the one after the last batch left.
    retry = append(log, batch(2, producer_id=5, producer_epoch=0, base_sequence=28, tag=14))
    assert retry.duplicate and retry.base_offset == 28
    nxt = append(
        log, batch(2, producer_id=5, producer_epoch=0, base_sequence=30, tag=99), leader_epoch=6
    )
    assert nxt.base_offset == 30 and not nxt.duplicate
    assert log.epoch_cache.entries == [(0, 0), (2, 20), (6, 30)]
    log.close()
    reopened = UnifiedLog.open(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=32)
    assert reopened.epoch_cache.entries == [(0, 0), (2, 20), (6, 30)]
    assert reopened.log_end_offset == 32


def test_truncate_at_the_end_drops_an_epoch_started_there(tmp_path: Path) -> None:
    """A replica led epoch 1 without appending to it (its entry starts at the log end),
    then follows a leader whose epoch 4 starts there: the truncation the leader's
    diverging epoch asks for removes no record, but it must remove that entry, else the
    follower fetches with epoch 1 and is told to truncate again, forever (seen after a
    kill -9 of a whole cluster)."""
    log, _ = leader_log(tmp_path / "t-0", [0, 0, 0])
    log.assign_epoch_start_offset(1)
    assert log.epoch_cache.entries == [(0, 0), (1, 6)]
    log.truncate_to(6)
    assert log.log_end_offset == 6
    assert log.epoch_cache.entries == [(0, 0)]
    assert LeaderEpochFileCache.load(log.dir / LEADER_EPOCH_CHECKPOINT).entries == [(0, 0)]
    log.close()


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log, _ = leader_log(tmp_path / "t-0", [1] * 20)
    append(log, batch(1, producer_id=3, producer_epoch=0, base_sequence=0), leader_epoch=1)
    assert log.producer_state.producers
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (500, 500, 500)
    assert log.epoch_cache.entries == [] and log.producer_state.producers == {}
    assert [s.base_offset for s in log.segments] == [500]
    assert log.read_bytes(500, 1 << 30) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    source, _ = leader_log(tmp_path / "src-0", [2] * 300)
    fetched = source.read_bytes(500, 1 << 30)
    follow(log, fetched)
    assert log.epoch_cache.entries == [(2, 500)]
    log.close()
    reopened = UnifiedLog.open(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=10**9)
    assert reopened.log_start_offset == 500 and reopened.read_bytes(500, 1 << 30) == fetched
    assert reopened.epoch_cache.entries == [(2, 500)]


def test_truncate_below_log_start_restarts_there(tmp_path: Path) -> None:
    log, _ = leader_log(tmp_path / "t-0", [0] * 20)
    log.delete_records_before(20, high_watermark=40)
    log.truncate_to(10)
    assert (log.log_start_offset, log.log_end_offset) == (10, 10)


def test_log_start_moves_truncate_the_epoch_cache_from_the_start(tmp_path: Path) -> None:
    log, _ = leader_log(tmp_path / "t-0", [0] * 10 + [1] * 10)
    log.delete_records_before(5, high_watermark=40)
    assert log.epoch_cache.entries == [(0, 5), (1, 20)]
    log.delete_records_before(25, high_watermark=40)
    assert log.epoch_cache.entries == [(1, 25)]


def test_epoch_checkpoint_is_written_on_new_epochs_and_synced_by_flush(tmp_path: Path) -> None:
    log, _ = leader_log(tmp_path / "t-0", [3, 3, 4])
    path = log.dir / LEADER_EPOCH_CHECKPOINT
    # Written as each new epoch starts (as Kafka), without fsync: appends never wait for it.
    assert path.read_text() == "0\n2\n3 0\n4 4\n"
    assert not log.epoch_cache.durable
    log.flush()  # before the recovery point passes the entries, the file is made durable
    assert log.epoch_cache.durable and log.recovery_point == 6
    assert path.read_text() == "0\n2\n3 0\n4 4\n"


def test_a_clean_restart_reads_no_batch_header_for_the_epoch_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, _ = leader_log(tmp_path / "t-0", [0] * 5 + [2] * 5)
    log.close(sync=False)
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    assert LeaderEpochFileCache.load(path).entries == [(0, 0), (2, 10)]

    def no_rebuild(*args: object, **kwargs: object) -> None:
        raise AssertionError("the epoch cache was rebuilt from batch headers")

    # Rebuilding assigns an entry per epoch found in the headers; loading the file does not.
    monkeypatch.setattr(LeaderEpochFileCache, "assign", no_rebuild)
    reopened = UnifiedLog.open(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=20)
    assert reopened.epoch_cache.entries == [(0, 0), (2, 10)]


@pytest.mark.parametrize("damage", ["delete", "garbage"])
def test_epoch_cache_is_rebuilt_from_the_batches(tmp_path: Path, damage: str) -> None:
    log, _ = leader_log(tmp_path / "t-0", [0] * 30 + [2] * 30 + [5] * 30)
    entries = log.epoch_cache.entries
    assert entries == [(0, 0), (2, 60), (5, 120)]
    log.close()
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    if damage == "delete":
        path.unlink()
    else:
        path.write_text("0\n3\nbroken\n")
    reopened = UnifiedLog.open(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=180)
    assert reopened.epoch_cache.entries == entries
    reopened.close()
    assert LeaderEpochFileCache.load(path).entries == entries


def test_crash_recovery_restores_epochs_past_the_recovery_point(tmp_path: Path) -> None:
    log, _ = leader_log(tmp_path / "live" / "t-0", [0] * 40)
    log.flush()
    for i in range(20):
        append(log, batch(2, tag=100 + i), leader_epoch=7)  # never flushed
    crashed = tmp_path / "crash" / "t-0"
    shutil.copytree(log.dir, crashed)
    # The crash lost the checkpoint written (without fsync) when epoch 7 started.
    (crashed / LEADER_EPOCH_CHECKPOINT).write_text("0\n1\n0 0\n")
    recovered = UnifiedLog.open(crashed, CONFIG, recovery_point=80)
    assert recovered.epoch_cache.entries == [(0, 0), (7, 80)]
    assert recovered.log_end_offset == 120


def test_stale_epochs_past_the_end_are_dropped_on_open(tmp_path: Path) -> None:
    log, _ = leader_log(tmp_path / "t-0", [0] * 10)
    log.close()
    (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT).write_text("0\n2\n0 0\n9 500\n")
    reopened = UnifiedLog.open(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=20)
    assert reopened.epoch_cache.entries == [(0, 0)]


def test_a_small_log_closes_without_a_snapshot_and_reopens_the_same(tmp_path: Path) -> None:
    """A broker shutting down (close without fsync, one sync for all) must not create a
    producer snapshot per one-segment log: what it would hold comes back from the
    segment's headers, which the next open reads anyway. The epoch checkpoint was
    written as the epochs started."""
    log, _ = leader_log(tmp_path / "t-0", [0, 0, 2])
    log.close(sync=False)
    names = {p.name for p in (tmp_path / "t-0").iterdir()}
    assert LEADER_EPOCH_CHECKPOINT in names
    assert not any(n.endswith(".snapshot") for n in names)
    reopened = UnifiedLog.open(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=6)
    assert reopened.epoch_cache.entries == [(0, 0), (2, 4)]
    retry = batch(1, producer_id=4, producer_epoch=0, base_sequence=0)
    append(reopened, retry, leader_epoch=2)
    reopened.close(sync=False)  # an idempotent producer's state is kept in a snapshot
    assert any(p.name.endswith(".snapshot") for p in (tmp_path / "t-0").iterdir())
    again = UnifiedLog.open(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=7)
    duplicate = append(again, batch(1, producer_id=4, producer_epoch=0, base_sequence=0))
    assert duplicate.duplicate and duplicate.base_offset == 6


def test_reads_at_the_latest_batches_find_them_after_truncation_too(tmp_path: Path) -> None:
    """Segments remember where their latest batches start; a read at any of those offsets
    (and with any of them as its upper bound) returns exactly the batches there, also once
    truncation rewrote the tail with batches of other sizes."""
    log, stored = leader_log(tmp_path / "t-0", [0] * 12)
    for i in range(12):
        assert log.read(2 * i, 1 << 20).to_bytes() == b"".join(stored[i:])
        assert log.read(2 * i, 1 << 20, max_offset=2 * i + 4).to_bytes() == b"".join(
            stored[i : i + 2]
        )
    log.truncate_to(10)
    rewritten = []
    for i in range(3):
        data = batch(3, value_size=7, tag=50 + i)  # offsets 10-12, 13-15, 16-18
        append(log, data, leader_epoch=1)
        rewritten.append(bytes(data))
    assert log.log_end_offset == 19
    for offset, first in ((10, 0), (12, 0), (13, 1), (14, 1), (16, 2), (18, 2)):
        assert log.read(offset, 1 << 20).to_bytes() == b"".join(rewritten[first:])
    assert log.read(8, 1 << 20, max_offset=14).to_bytes() == stored[4] + rewritten[0]
    log.close()
