"""A task of a direct read: one remote segment's records straight from the object store.

The segment's `.log` object is read in chunks through the same remote storage manager the
brokers use, its whole batches are decoded into Arrow by `columnar` and filtered to the
task's offsets, control batches dropped. Under `read_committed` a segment whose
transaction index is not empty (it holds aborted transactions) is not read here: the task
reads that range through a broker instead, which drops the aborted records from the remote
transaction index as for any consumer.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from moldau.records.batch import scan_log_prefix
from moldau.spark.fetcher import decode_log
from moldau.spark.offsets import OffsetRange
from moldau.spark.remote_options import RemoteOptions
from moldau.storage.remote.segment import IndexType, RemoteLogSegmentMetadata
from moldau.storage.remote.storage_manager import (
    RemoteResourceNotFoundError,
    RemoteStorageManager,
    load_remote_storage_manager,
)

CHUNK_BYTES = 8 * 1024 * 1024


def read_segment(
    options: RemoteOptions,
    segment: RemoteLogSegmentMetadata,
    r: OffsetRange,
    *,
    read_committed: bool,
    schema: pa.Schema,
) -> Iterator[pa.RecordBatch] | None:
    """The records of `r` (within `segment`), or None when the range must be read through
    a broker (read_committed over aborted transactions)."""
    manager = load_remote_storage_manager(options.class_name, options.configs)
    if read_committed and _has_aborted(manager, segment):
        manager.close()
        return None
    return _batches(manager, segment, r, schema)


def _has_aborted(manager: RemoteStorageManager, segment: RemoteLogSegmentMetadata) -> bool:
    try:
        return len(manager.fetch_index(segment, IndexType.TRANSACTION)) > 0
    except RemoteResourceNotFoundError:  # no transaction index: nothing aborted
        return False


def _batches(
    manager: RemoteStorageManager,
    segment: RemoteLogSegmentMetadata,
    r: OffsetRange,
    schema: pa.Schema,
) -> Iterator[pa.RecordBatch]:
    """Chunk by chunk; a batch cut by a chunk's end is decoded with the next chunk."""
    position, rest = 0, b""
    try:
        while True:
            data = manager.fetch_log_segment(segment, position, position + CHUNK_BYTES - 1)
            position += len(data)
            buf = memoryview(rest + data)
            batches, used = scan_log_prefix(buf, verify_crc=False)
            yield from decode_log(buf, batches, r, schema)
            rest = bytes(buf[used:])
            if (batches and batches[-1].next_offset >= r.end) or len(data) < CHUNK_BYTES:
                break
    finally:
        manager.close()
    if rest and not (batches and batches[-1].next_offset >= r.end):
        raise RuntimeError(f"remote segment {segment.segment_id} ends inside a record batch")
