"""UnifiedLog over two tiers: local retention deletes only copied segments, the log start
offset spans the remote tier, reads below the local log start say where the data went."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import FakeClock, append, batch

from moldau.config.topic import LogConfig
from moldau.protocol.errors import OffsetMovedToTieredStorageError, OffsetOutOfRangeError
from moldau.storage.unified_log import UnifiedLog

# ~100-byte batches of one record: a segment holds two batches
TIERED = LogConfig(
    segment_bytes=250,
    file_delete_delay_ms=0,
    remote_storage_enable=True,
    retention_ms=-1,
    local_retention_bytes=0,
)


def filled(path: Path, config: LogConfig, clock: FakeClock, **kw) -> UnifiedLog:
    log = UnifiedLog.open(path, config, clock=clock, remote_log_enabled=True, **kw)
    for i in range(10):
        append(log, batch(1, value_size=40, tag=i))
    return log


def test_local_retention_waits_for_copies(tmp_path: Path) -> None:
    clock = FakeClock()
    log = filled(tmp_path / "t-0", TIERED, clock)
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6, 8]
    hw = log.log_end_offset
    assert log.enforce_retention(hw) == 0  # nothing copied: everything stays local
    # each closed segment keeps the producer snapshot at its end until it is copied
    snapshots = sorted(int(p.name.split(".")[0]) for p in log.dir.glob("*.snapshot"))
    assert snapshots == [2, 4, 6, 8]
    log.update_highest_offset_in_remote_storage(3)  # two segments copied
    assert log.enforce_retention(hw) == 2
    assert log.local_log_start_offset == 4
    assert log.log_start_offset == 0  # the records before 4 are in the remote tier
    with pytest.raises(OffsetMovedToTieredStorageError):
        log.read(1, 1000)
    assert log.read(4, 1000).first_offset == 4
    log.update_highest_offset_in_remote_storage(9)  # even the active segment's offsets
    assert log.enforce_retention(hw) == 2  # never the active segment
    assert log.local_log_start_offset == 8


def test_remote_retention_and_delete_records_move_the_log_start(tmp_path: Path) -> None:
    clock = FakeClock()
    log = filled(tmp_path / "t-0", TIERED, clock)
    log.update_highest_offset_in_remote_storage(5)
    log.enforce_retention(log.log_end_offset)
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 6)
    log.update_log_start_offset_from_remote_tier(2)  # remote retention deleted [0, 2)
    assert log.log_start_offset == 2
    log.update_log_start_offset_from_remote_tier(9)  # never past the local log start
    assert log.log_start_offset == 6
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 1000)
    assert log.delete_records_before(9, log.log_end_offset) == 9
    assert log.local_log_start_offset == 9
    assert [s.base_offset for s in log.segments] == [8]


def test_a_tiered_log_reopens_with_its_remote_log_start(tmp_path: Path) -> None:
    clock = FakeClock()
    log = filled(tmp_path / "t-0", TIERED, clock)
    log.update_highest_offset_in_remote_storage(3)
    log.enforce_retention(log.log_end_offset)
    log.close()
    reopened = UnifiedLog.open(
        tmp_path / "t-0",
        TIERED,
        clock=clock,
        remote_log_enabled=True,
        log_start_offset=log.log_start_offset,
        recovery_point=log.recovery_point,
    )
    assert (reopened.log_start_offset, reopened.local_log_start_offset) == (0, 4)
    # untiered, the same checkpoint cannot go below the first local segment
    untiered = UnifiedLog.open(tmp_path / "t-1", LogConfig(), clock=clock, log_start_offset=0)
    assert untiered.log_start_offset == untiered.local_log_start_offset == 0


def test_an_untiered_log_is_unchanged(tmp_path: Path) -> None:
    clock = FakeClock()
    config = LogConfig(segment_bytes=250, file_delete_delay_ms=0, retention_bytes=0)
    log = UnifiedLog.open(tmp_path / "t-0", config, clock=clock)
    for i in range(10):
        append(log, batch(1, value_size=40, tag=i))
    assert log.enforce_retention(log.log_end_offset) == 4
    assert log.log_start_offset == log.local_log_start_offset == 8


def test_a_truncation_below_the_local_log_keeps_the_remote_log_start(tmp_path: Path) -> None:
    """A follower whose diverged tail starts below its local log (it deleted copied
    segments as a leader) restarts empty there, and the remote tier still holds what
    precedes: the log start offset stays where the remote tier starts."""
    log = filled(tmp_path / "t-0", TIERED, FakeClock())
    log.update_highest_offset_in_remote_storage(5)
    log.enforce_retention(log.log_end_offset)
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 6)
    log.truncate_to(4)
    assert (log.log_start_offset, log.local_log_start_offset, log.log_end_offset) == (0, 4, 4)
    with pytest.raises(OffsetMovedToTieredStorageError):
        log.read(2, 1000)
