"""The ``file`` remote storage manager: the remote tier in a directory (``rsm.config.dir``),
laid out as the object keys of the ``s3`` manager. Meant for development and tests, or a
shared mount; each file is written to a temporary name, fsynced and renamed, the records
file last, so a crash mid-copy never leaves a whole-looking segment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

from moldau.storage.remote.segment import IndexType, LogSegmentData, RemoteLogSegmentMetadata
from moldau.storage.remote.storage_manager import (
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    check_range,
    object_name,
)


class FileRemoteStorageManager(RemoteStorageManager):
    def __init__(self) -> None:
        self._root: Path | None = None

    def configure(self, configs: dict[str, str]) -> None:
        root = configs.get("dir")
        if not root:
            raise ValueError("the file remote storage manager needs rsm.config.dir")
        self._root = Path(root)
        self._root.mkdir(parents=True, exist_ok=True)

    @property
    def root(self) -> Path:
        if self._root is None:
            raise RemoteStorageError("the file remote storage manager is not configured")
        return self._root

    def _path(self, metadata: RemoteLogSegmentMetadata, suffix: str) -> Path:
        return self.root / object_name(metadata, suffix)

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> bytes | None:
        try:
            for index_type in IndexType:
                source = data.index_source(index_type)
                if source is not None:
                    self._write(self._path(metadata, index_type.suffix), source)
            self._write(self._path(metadata, LOG_SUFFIX), data.log_segment)
        except OSError as e:
            raise RemoteStorageError(f"copying {metadata.segment_id}: {e}") from e
        return None

    @staticmethod
    def _write(target: Path, source: Path | bytes) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as out:
                if isinstance(source, bytes):
                    out.write(source)
                else:
                    with open(source, "rb") as src:
                        shutil.copyfileobj(src, out, 1 << 20)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> bytes:
        check_range(start_position, end_position)
        path = self._path(metadata, LOG_SUFFIX)
        try:
            with open(path, "rb") as f:
                f.seek(start_position)
                return f.read(-1 if end_position is None else end_position - start_position + 1)
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundError(f"no remote segment {path}") from e
        except OSError as e:
            raise RemoteStorageError(f"reading {path}: {e}") from e

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        path = self._path(metadata, index_type.suffix)
        try:
            return path.read_bytes()
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundError(f"no remote {index_type.name} index {path}") from e
        except OSError as e:
            raise RemoteStorageError(f"reading {path}: {e}") from e

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        # The records file first: from then on the segment no longer looks whole.
        try:
            for suffix in SEGMENT_SUFFIXES:
                self._path(metadata, suffix).unlink(missing_ok=True)
        except OSError as e:
            raise RemoteStorageError(f"deleting {metadata.segment_id}: {e}") from e
        # Leave no empty partition/topic directories behind a deleted topic.
        partition_dir = self._path(metadata, LOG_SUFFIX).parent
        for directory in (partition_dir, partition_dir.parent):
            try:
                directory.rmdir()
            except OSError:
                break
