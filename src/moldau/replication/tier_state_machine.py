"""The follower's side of KIP-405 (Kafka's ReplicaFetcherTierStateMachine): a new or
far-behind follower of a tiered partition does not fetch the history the remote tier
holds. When the leader answers OFFSET_MOVED_TO_TIERED_STORAGE, the follower asks the
leader where its local log starts (ListOffsets, earliest-local), then restarts its log
empty right after the last segment of the remote tier, with the leader-epoch entries and
producer state of that point, both read from the remote tier (the segment's leader-epoch
checkpoint and producer snapshot), and fetches from there.

Kafka restarts at the leader's local log start; restarting after the highest remote
offset is as valid (the leader keeps every segment not yet copied, so that offset is in
its local log) and fetches less: only what the remote tier does not have. It needs this
follower's view of the remote tier (its copy of ``__remote_log_metadata``) to reach the
leader's local log start: a restarted broker's view trails the leader's until its
metadata replica has caught up, and a restart from a trailing view lands below the
leader's local log again (another OFFSET_MOVED_TO_TIERED_STORAGE, another truncation and
remote read, for as long as the leader keeps copying). So a view that ends before the
leader's local log start is not used: the log is left as it is and the rebuild is retried
once the view has caught up (:class:`RemoteTierBehindError`).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from moldau.storage.producer_state import SNAPSHOT_SUFFIX
from moldau.storage.remote.segment import IndexType, RemoteLogSegmentMetadata
from moldau.storage.remote.storage_manager import (
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
)
from moldau.storage.segment import file_stem
from moldau.storage.unified_log import UnifiedLog

T = TypeVar("T")
ToThread = Callable[..., Awaitable[Any]]


class RemoteTierBehindError(RemoteStorageError):
    """This follower's view of the remote tier does not reach the leader's local log
    start yet (retriable: its remote log metadata is still catching up)."""


@dataclass(frozen=True, slots=True)
class RemoteAuxState:
    """Where the follower's log restarts, and the state it needs there."""

    next_offset: int
    leader_epochs: list[tuple[int, int]]  # (epoch, start offset), epochs increasing
    producer_snapshot: bytes | None
    log_start_offset: int  # the remote tier's: where the log starts over both tiers


def parse_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """Kafka's leader-epoch checkpoint text: version 0, a count, then "epoch offset" lines."""
    try:
        lines = data.decode("ascii").splitlines()
        version, count = int(lines[0]), int(lines[1])
        if version != 0:
            raise ValueError(f"unsupported version {version}")
        entries = []
        for line in lines[2 : 2 + count]:
            epoch, offset = line.split()
            entries.append((int(epoch), int(offset)))
        if len(entries) != count:
            raise ValueError(f"{count} entries announced, {len(entries)} found")
    except (UnicodeDecodeError, IndexError, ValueError) as e:
        raise RemoteStorageError(f"malformed remote leader-epoch checkpoint: {e}") from None
    return entries


def fetch_remote_aux_state(
    rsm: RemoteStorageManager, segment: RemoteLogSegmentMetadata, log_start_offset: int
) -> RemoteAuxState:
    """Read, from the remote tier, the state at the end of ``segment`` (blocking: call it
    on a worker thread). A segment without a producer snapshot had no producers."""
    epochs = parse_epoch_checkpoint(rsm.fetch_index(segment, IndexType.LEADER_EPOCH))
    try:
        snapshot: bytes | None = rsm.fetch_index(segment, IndexType.PRODUCER_SNAPSHOT)
    except RemoteResourceNotFoundError:
        snapshot = None
    next_offset = segment.end_offset + 1
    return RemoteAuxState(
        next_offset, [(e, o) for e, o in epochs if o < next_offset], snapshot, log_start_offset
    )


def restore(replica_log: UnifiedLog, state: RemoteAuxState) -> None:
    """Restart ``replica_log`` empty at ``state.next_offset`` with the remote tier's leader
    epochs and producer state there (the snapshot is kept as the log's own, so a restart
    recovers from it); its log start is the remote tier's."""
    replica_log.truncate_fully_and_start_at(
        state.next_offset, log_start_offset=state.log_start_offset
    )
    for epoch, start in state.leader_epochs:
        replica_log.epoch_cache.assign(epoch, start)
    replica_log.epoch_cache.write()
    if state.producer_snapshot is not None:
        path = replica_log.dir / (file_stem(state.next_offset) + SNAPSHOT_SUFFIX)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(state.producer_snapshot)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        replica_log.producer_state.load_snapshot(path)


def restart_segment(
    remote_segments: list[RemoteLogSegmentMetadata], leader_local_start: int
) -> RemoteLogSegmentMetadata:
    """The remote segment the follower restarts after: the last one it knows, provided
    the leader holds the next offset locally (``leader_local_start``, the leader's local
    log start, at or before it). Raises RemoteStorageError (retriable) otherwise."""
    if not remote_segments:
        raise RemoteStorageError("the remote tier holds no segment of this partition yet")
    last = max(remote_segments, key=lambda md: md.end_offset)
    if last.end_offset + 1 < leader_local_start:
        raise RemoteTierBehindError(
            f"the remote tier known here ends at {last.end_offset}, before the leader's "
            f"local log start {leader_local_start}"
        )
    return last


async def build_remote_log_aux_state(
    replica_log: UnifiedLog,
    remote_segments: list[RemoteLogSegmentMetadata],
    leader_local_start: int,
    rsm: RemoteStorageManager,
    to_thread: ToThread,
) -> int:
    """Rebuild ``replica_log`` from the remote tier (``remote_segments``: the partition's
    copied segments, from its remote log metadata; ``leader_local_start``: where the
    leader's local log starts); the offset to fetch from next. Raises RemoteStorageError
    (retriable, the log untouched) when the remote tier known here does not reach the
    leader's local log or the store does not answer. The remote reads run through
    ``to_thread`` (the reader pool)."""
    last = restart_segment(remote_segments, leader_local_start)
    start = min(md.start_offset for md in remote_segments)
    state: RemoteAuxState = await to_thread(fetch_remote_aux_state, rsm, last, start)
    restore(replica_log, state)
    return state.next_offset
