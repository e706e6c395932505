"""Moving a replica between log dirs (AlterReplicaLogDirs), as Kafka's
ReplicaAlterLogDirsThread does: a *future* log in the destination dir follows the
current log locally, batch by batch, until it has caught up; the log manager then swaps
it in. The current log keeps taking appends and serving reads throughout.

Pure of threads and timers: ``catch_up`` is one bounded step the caller repeats.
"""

from __future__ import annotations

from moldau.records.batch import scan_batches
from moldau.storage.unified_log import UnifiedLog

FUTURE_DIR_SUFFIX = "-future"
COPY_BYTES_PER_STEP = 8 << 20  # what one step copies at most per partition


def future_dir_name(current_name: str, unique_id: str) -> str:
    """``<topic>-<partition>.<uniqueId>-future``: Kafka's name for a future replica."""
    return f"{current_name}.{unique_id}{FUTURE_DIR_SUFFIX}"


def parse_future_dir_name(name: str) -> str | None:
    """The current log's dir name of a future replica's dir, None for other names."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    current, sep, unique_id = name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")
    return current if sep and unique_id.isalnum() else None


def catch_up(current: UnifiedLog, future: UnifiedLog, max_bytes: int = COPY_BYTES_PER_STEP) -> bool:
    """Bring ``future`` one step closer to ``current``; returns whether it has caught up
    (same log end offset).

    Follows the current log as a follower follows its leader: it restarts at the current
    log start if retention went past it, cuts what the current log no longer has (a
    follower's current log is truncated when it diverged from a new leader; the epoch
    cache tells where), then copies whole batches verbatim with their offsets and epochs.
    """
    if future.log_end_offset < current.log_start_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)
    _truncate_diverged(current, future)
    leo = future.log_end_offset
    if leo < current.log_end_offset:
        data = current.read_bytes(leo, max_bytes)
        if data:
            future.append_as_follower(memoryview(data), scan_batches(data, strict=False))
    return future.log_end_offset == current.log_end_offset


def _truncate_diverged(current: UnifiedLog, future: UnifiedLog) -> None:
    leo, current_leo = future.log_end_offset, current.log_end_offset
    latest = future.epoch_cache.latest_epoch
    target = leo
    if latest is not None:
        epoch, end = current.epoch_cache.end_offset_for(latest, current_leo)
        if end < 0:  # the current log was cut below this epoch: drop it, look again next step
            target = future.epoch_cache.entries[-1][1]
        elif epoch != latest or end < leo:
            target = end
    target = min(target, current_leo)
    if target < leo:
        future.truncate_to(target)
