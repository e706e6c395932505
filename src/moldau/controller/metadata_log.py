"""The ``__cluster_metadata`` log of a quorum of one: committed once appended and fsynced.

A single node with no quorum configured is its own controller quorum: there is nobody to
replicate to, so a batch is committed when it is durable locally and the commit callback
(the controller, then the metadata loader) runs right away, in log order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from moldau.config.topic import LogConfig
from moldau.metadata.records import MetadataRecord, decode_record, encode_record
from moldau.metadata.topics import METADATA_TOPIC
from moldau.records.batch import scan_batches
from moldau.records.record import build_batch, decode_all
from moldau.storage.unified_log import UnifiedLog

logger = logging.getLogger(__name__)

METADATA_DIR = f"{METADATA_TOPIC}-0"
_CONFIG = LogConfig(segment_bytes=64 << 20, retention_ms=-1, retention_bytes=-1)
_READ_CHUNK = 8 << 20

CommitCallback = Callable[[Sequence[MetadataRecord], int], None]


class MetadataLog:
    def __init__(self, log: UnifiedLog) -> None:
        self.log = log
        self._on_commit: CommitCallback = lambda records, offset: None

    @classmethod
    def open(cls, log_dir: Path) -> MetadataLog:
        """Open the log, recovering it from the start (it is small and must be exact)."""
        return cls(UnifiedLog.open(log_dir / METADATA_DIR, _CONFIG, recovery_point=0))

    def batches(self) -> Iterator[tuple[list[MetadataRecord], int]]:
        """Every committed batch, oldest first: (records, last offset). A record that
        does not decode (written by a newer release, or damaged) is skipped with an error
        naming its offset: a node must always be able to start on its own data."""
        offset = self.log.log_start_offset
        while offset < self.log.log_end_offset:
            data = self.log.read_bytes(offset, _READ_CHUNK)
            for info, records in decode_all(data):
                decoded = []
                for i, r in enumerate(records):
                    try:
                        record = decode_record(r.key, r.value)
                    except ValueError as e:
                        logger.error(
                            "%s: skipping the record at offset %d: %s",
                            METADATA_DIR,
                            info.base_offset + i,
                            e,
                        )
                        continue
                    if record is not None:
                        decoded.append(record)
                yield decoded, info.last_offset
                offset = info.next_offset

    def set_commit_callback(self, callback: CommitCallback) -> None:
        """Who hears of each committed batch (the node fans it out to its controller and
        its broker's metadata loader)."""
        self._on_commit = callback

    def append(self, records: Sequence[MetadataRecord]) -> int:
        """Append one batch holding ``records``, fsync it, announce the commit."""
        batch = bytearray(build_batch([encode_record(r) for r in records]))
        result = self.log.append_as_leader(batch, scan_batches(batch, strict=False), leader_epoch=0)
        self.log.flush()
        self._on_commit(records, result.last_offset)
        return result.last_offset

    async def wait_committed(self, offset: int) -> None:
        """A quorum of one has committed what it appended."""

    def close(self) -> None:
        self.log.close()
