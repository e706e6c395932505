"""The follower path of KIP-405 over real logs and a real `file` remote tier: a follower
restarts after the last remote segment with the leader's epochs and producer state there,
and goes on from there with what the leader still has locally."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from moldau.config.topic import LogConfig
from moldau.records.batch import scan_batches
from moldau.records.record import build_batch
from moldau.replication.tier_state_machine import (
    RemoteTierBehindError,
    build_remote_log_aux_state,
    parse_epoch_checkpoint,
    restart_segment,
)
from moldau.storage.producer_state import SNAPSHOT_SUFFIX
from moldau.storage.remote.file_storage import FileRemoteStorageManager
from moldau.storage.remote.segment import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from moldau.storage.remote.storage_manager import RemoteStorageError
from moldau.storage.segment import file_stem
from moldau.storage.unified_log import UnifiedLog

CONFIG = LogConfig(segment_bytes=1 << 20, file_delete_delay_ms=0)
TP = TopicIdPartition(uuid.uuid4(), "orders", 0)
PRODUCER = 7


def produce(log: UnifiedLog, sequence: int, epoch: int) -> bytearray:
    data = bytearray(
        build_batch(
            [(b"k", f"v{sequence + i}".encode()) for i in range(5)],
            producer_id=PRODUCER,
            producer_epoch=0,
            base_sequence=sequence,
        )
    )
    log.append_as_leader(data, scan_batches(data), leader_epoch=epoch)
    return data


def copy(log: UnifiedLog, rsm: FileRemoteStorageManager, index: int) -> RemoteLogSegmentMetadata:
    """Copy closed segment ``index`` as the RemoteLogManager does."""
    segment = log.segments[index]
    end = log.segments[index + 1].base_offset - 1
    entries = [(e, o) for e, o in log.epoch_cache.entries if o <= end]
    checkpoint = "\n".join(["0", str(len(entries)), *(f"{e} {o}" for e, o in entries)]) + "\n"
    snapshot = log.dir / (file_stem(end + 1) + SNAPSHOT_SUFFIX)
    md = RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate(TP), segment.base_offset, end, 0, 1, 0, 1, dict(entries)
    )
    data = LogSegmentData(
        segment.path,
        segment.offset_index.path,
        segment.time_index.path,
        None,
        snapshot if snapshot.exists() else None,
        checkpoint.encode(),
    )
    rsm.copy_log_segment_data(md, data)
    return md


def test_a_follower_restarts_after_the_remote_tier_with_its_epochs_and_producers(tmp_path: Path):
    leader = UnifiedLog.open(tmp_path / "leader" / "orders-0", CONFIG)
    rsm = FileRemoteStorageManager()
    rsm.configure({"dir": str(tmp_path / "remote")})
    produce(leader, 0, epoch=0)
    produce(leader, 5, epoch=0)
    leader.roll()
    produce(leader, 10, epoch=3)
    leader.roll()
    last_copied = produce(leader, 15, epoch=5)  # the last batch of the copied tier
    leader.roll()
    tail = [produce(leader, 20, epoch=5), produce(leader, 25, epoch=6)]
    copied = [copy(leader, rsm, i) for i in range(3)]
    assert copied[-1].end_offset == 19

    follower = UnifiedLog.open(tmp_path / "follower" / "orders-0", CONFIG)
    produce(follower, 0, epoch=0)  # stale data of its own, to be replaced
    next_offset = asyncio.run(
        build_remote_log_aux_state(follower, copied, 20, rsm, asyncio.to_thread)
    )
    assert next_offset == 20
    assert follower.local_log_start_offset == follower.log_end_offset == 20
    assert follower.log_start_offset == 0  # over both tiers
    assert follower.epoch_cache.entries == [(0, 0), (3, 10), (5, 15)]
    # The producer's state is the leader's at offset 20: a retry of the last copied batch
    # is recognised as a duplicate, so exactly-once holds across the tier boundary.
    duplicate = follower.producer_state.check(scan_batches(last_copied)[0])
    assert duplicate is not None and duplicate.base_offset == 15

    # Fetching on from the leader's local log: the logs end up the same.
    for data in tail:
        follower.append_as_follower(bytearray(data), scan_batches(data))
    assert follower.log_end_offset == leader.log_end_offset == 30
    assert follower.epoch_cache.entries == leader.epoch_cache.entries
    follower.close()

    # A restart recovers the producer state from the snapshot the restore kept.
    again = UnifiedLog.open(tmp_path / "follower" / "orders-0", CONFIG)
    assert again.producer_state.producers[PRODUCER].last_seq == 29
    assert again.local_log_start_offset == 20
    again.close()
    leader.close()


def test_nothing_in_the_remote_tier_or_a_bad_checkpoint_is_retriable(tmp_path: Path):
    follower = UnifiedLog.open(tmp_path / "orders-0", CONFIG)
    rsm = FileRemoteStorageManager()
    rsm.configure({"dir": str(tmp_path / "remote")})
    with pytest.raises(RemoteStorageError, match="no segment"):
        asyncio.run(build_remote_log_aux_state(follower, [], 0, rsm, asyncio.to_thread))
    for bad in (b"", b"1\n0\n", b"0\n2\n0 0\n", b"0\n1\nx y\n"):
        with pytest.raises(RemoteStorageError, match="malformed"):
            parse_epoch_checkpoint(bad)
    assert parse_epoch_checkpoint(b"0\n2\n0 0\n4 100\n") == [(0, 0), (4, 100)]
    follower.close()


def test_a_view_of_the_remote_tier_behind_the_leaders_local_log_is_not_used(tmp_path: Path):
    """A restarted follower whose remote log metadata trails the leader's: restarting
    after its last known segment would land below the leader's local log again. Its log
    is left as it is until the view reaches the leader's local log start."""
    leader = UnifiedLog.open(tmp_path / "leader" / "orders-0", CONFIG)
    rsm = FileRemoteStorageManager()
    rsm.configure({"dir": str(tmp_path / "remote")})
    for sequence in range(0, 20, 5):
        produce(leader, sequence, epoch=1)
        leader.roll()
    produce(leader, 20, epoch=2)
    copied = [copy(leader, rsm, i) for i in range(4)]  # 0-4, 5-9, 10-14, 15-19
    follower = UnifiedLog.open(tmp_path / "follower" / "orders-0", CONFIG)
    produce(follower, 0, epoch=1)

    # The leader dropped 0-14 from its disk; the follower knows the copies up to 9 only.
    with pytest.raises(RemoteTierBehindError, match="ends at 9, before the leader's local"):
        asyncio.run(build_remote_log_aux_state(follower, copied[:2], 15, rsm, asyncio.to_thread))
    assert (follower.log_start_offset, follower.log_end_offset) == (0, 5)  # untouched
    assert follower.epoch_cache.entries == [(1, 0)]

    # Up to the leader's local log start, or past it: after the last known segment.
    assert restart_segment(copied[:3], 15) is copied[2]
    assert restart_segment(copied, 15) is copied[3]
    assert restart_segment(list(reversed(copied)), 20) is copied[3]
    next_offset = asyncio.run(
        build_remote_log_aux_state(follower, copied, 15, rsm, asyncio.to_thread)
    )
    assert next_offset == 20
    assert (follower.log_start_offset, follower.local_log_start_offset) == (0, 20)
    assert follower.epoch_cache.entries == [(1, 0)]
    follower.close()
    leader.close()
