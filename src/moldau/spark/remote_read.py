"""A task of a direct read: one remote segment's records straight from the object store.

The segment's `.log` object is read in chunks through the same remote storage manager the
brokers use, from the batch its offset index gives for the task's first offset (as a
broker's remote read starts); its whole batches are decoded into Arrow by `columnar` and
filtered to the task's offsets, control batches dropped. Under `read_committed` the task
stops reading the store at the segment's first transactional batch and reads the rest of
its range through a broker, which drops aborted records as for any consumer: whether a
transaction aborted is only known from its marker and the transaction index of the
segment holding that marker, which may be a later segment or still on the broker's disk.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace

import pyarrow as pa

from moldau.records.batch import scan_log_prefix
from moldau.spark.fetcher import decode_log
from moldau.spark.offsets import OffsetRange
from moldau.spark.remote_options import RemoteOptions
from moldau.storage.remote.remote_log_reader import index_position
from moldau.storage.remote.segment import IndexType, RemoteLogSegmentMetadata
from moldau.storage.remote.storage_manager import RemoteStorageManager, load_remote_storage_manager

CHUNK_BYTES = 8 * 1024 * 1024

_managers: dict[tuple[str, tuple[tuple[str, str], ...]], RemoteStorageManager] = {}
_managers_lock = threading.Lock()


Batches = Iterator[pa.RecordBatch]


def read_segment(
    options: RemoteOptions,
    segment: RemoteLogSegmentMetadata,
    r: OffsetRange,
    *,
    read_committed: bool,
    schema: pa.Schema,
    broker_read: Callable[[OffsetRange], Batches],
) -> Batches:
    """The records of `r` (within `segment`); `broker_read` reads a range through a broker."""
    manager = manager_for(options)
    rest = b""
    position = start_position(manager, segment, r.start)
    while True:
        data = manager.fetch_log_segment(segment, position, position + CHUNK_BYTES - 1)
        position += len(data)
        buf = memoryview(rest + data)
        batches, used = scan_log_prefix(buf, verify_crc=False)
        if read_committed:
            txn = next((b for b in batches if b.is_transactional and not b.is_control), None)
            if txn is not None and txn.base_offset < r.end:
                yield from decode_log(buf, batches[: batches.index(txn)], r, schema)
                yield from broker_read(replace(r, start=max(r.start, txn.base_offset)))
                return
        yield from decode_log(buf, batches, r, schema)
        rest = bytes(buf[used:])
        if (batches and batches[-1].next_offset >= r.end) or len(data) < CHUNK_BYTES:
            break
    if rest and not (batches and batches[-1].next_offset >= r.end):
        raise RuntimeError(f"remote segment {segment.segment_id} ends inside a record batch")


def manager_for(options: RemoteOptions) -> RemoteStorageManager:
    """One configured manager per store in this Python worker, shared by the tasks it runs
    (Spark reuses its workers) and kept for the worker's life: making one (a boto3 client
    for `s3`) costs more CPU than reading a segment. Managers are thread-safe."""
    key = (options.class_name, tuple(sorted(options.configs.items())))
    with _managers_lock:
        manager = _managers.get(key)
        if manager is None:
            manager = load_remote_storage_manager(options.class_name, options.configs)
            _managers[key] = manager
    return manager


def start_position(
    manager: RemoteStorageManager, segment: RemoteLogSegmentMetadata, offset: int
) -> int:
    """Where in the segment's `.log` the batch holding `offset` starts, or one before it."""
    if offset <= segment.start_offset:
        return 0
    index = manager.fetch_index(segment, IndexType.OFFSET)
    return index_position(index, segment.start_offset, offset)
