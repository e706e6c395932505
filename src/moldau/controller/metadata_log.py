"""The ``__cluster_metadata`` log: metadata records made durable before they take effect.

A single-node server is a quorum of one, so "committed" means "appended and fsynced
locally". Startup replays the whole log into a fresh image.
"""

from __future__ import annotations

from pathlib import Path

from moldau.controller.image import MetadataImage
from moldau.controller.records import MetadataRecord, decode_record
from moldau.records.batch import scan_batches
from moldau.records.record import build_batch, decode_all
from moldau.storage.config import LogConfig
from moldau.storage.log import Log

METADATA_TOPIC = "__cluster_metadata"
METADATA_DIR = f"{METADATA_TOPIC}-0"
_CONFIG = LogConfig(segment_bytes=64 << 20, retention_ms=-1, retention_bytes=-1)
_READ_CHUNK = 8 << 20


class MetadataLog:
    def __init__(self, log: Log) -> None:
        self.log = log

    @classmethod
    def open(cls, log_dir: Path) -> tuple[MetadataLog, MetadataImage]:
        """Open (recovering from the start) and replay into an image."""
        log = Log.open(log_dir / METADATA_DIR, _CONFIG, recovery_point=0)
        image = MetadataImage()
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read_bytes(offset, _READ_CHUNK)
            for info, records in decode_all(data):
                image = image.apply(
                    [decode_record(r.key, r.value) for r in records], info.last_offset
                )
                offset = info.next_offset
        return cls(log), image

    def append(self, records: list[MetadataRecord]) -> int:
        """Append one batch holding ``records`` and fsync it; returns its last offset."""
        batch = bytearray(build_batch([r.encode() for r in records]))
        result = self.log.append_as_leader(batch, scan_batches(batch, strict=False), leader_epoch=0)
        self.log.flush()
        return result.last_offset

    def close(self) -> None:
        self.log.close()
