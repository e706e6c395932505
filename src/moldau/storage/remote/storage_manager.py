"""The remote storage manager interface (Kafka's ``RemoteStorageManager``): copy a closed
segment with its indexes to a remote store, read ranges of it back, delete it.

Every method BLOCKS and is called from a worker thread, never from the event loop, so an
implementation may use any blocking client. Implementations are chosen by
``remote.log.storage.manager.class.name``: the built-ins by short name (``file``, ``s3``)
or any ``package.module:Class`` (or ``package.module.Class``, as Kafka's Java class names
read), instantiated without arguments and then given the broker's ``rsm.config.``-prefixed
settings, prefix stripped, through :meth:`RemoteStorageManager.configure`.

Objects of one segment are named alike by both built-ins, so an operator can tell what each
is: ``<topic>-<topicId>/<partition>/<20-digit base offset>-<segment id><suffix>``.
"""

from __future__ import annotations

import abc
import importlib
from typing import Any

from moldau.storage.remote.segment import IndexType, LogSegmentData, RemoteLogSegmentMetadata

LOG_SUFFIX = ".log"
BUILT_INS = {
    "file": "moldau.storage.remote.file_storage:FileRemoteStorageManager",
    "s3": "moldau.storage.remote.s3_storage:S3RemoteStorageManager",
}


class RemoteStorageError(Exception):
    """The store failed or did not answer in time (Kafka's RemoteStorageException):
    retriable, the caller tries again later."""


class RemoteResourceNotFoundError(RemoteStorageError):
    """The object asked for is not in the store (Kafka's RemoteResourceNotFoundException,
    a RemoteStorageException too): e.g. the transaction index of a segment with no
    aborted transaction, or a segment deleted meanwhile."""


class RemoteStorageManager(abc.ABC):
    """One instance per broker, shared by its copy and reader threads: implementations
    must be thread-safe."""

    @abc.abstractmethod
    def configure(self, configs: dict[str, str]) -> None:
        """Take the ``rsm.config.*`` settings (prefix stripped); raise ValueError on a bad
        one so the broker refuses to start with a clear message."""

    @abc.abstractmethod
    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> bytes | None:
        """Copy the segment and its indexes; return custom metadata to keep with the
        segment (or None). Idempotent: a retry (always with a fresh segment id) overwrites.
        The records object is written last, so a copy interrupted midway never looks whole."""

    @abc.abstractmethod
    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> bytes:
        """Bytes ``start_position..end_position`` (inclusive, as Kafka's) of the segment's
        records, or up to its end when ``end_position`` is None (or past the end)."""

    @abc.abstractmethod
    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        """The whole index of that type; RemoteResourceNotFoundError if the segment has none."""

    @abc.abstractmethod
    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Delete every object of the segment, whichever of them exist (idempotent; also
        cleans up a partial upload)."""

    def close(self) -> None:  # noqa: B027 - optional hook, most managers hold nothing
        """Release clients and connections."""


def object_name(metadata: RemoteLogSegmentMetadata, suffix: str) -> str:
    """The relative name of one object of a segment (``/``-separated), e.g.
    ``orders-<topic id>/3/00000000000000001000-<segment id>.log``."""
    sid = metadata.segment_id
    return (
        f"{sid.topic}-{sid.topic_id}/{sid.partition}/{metadata.start_offset:020d}-{sid.id}{suffix}"
    )


SEGMENT_SUFFIXES = (LOG_SUFFIX, *(t.suffix for t in IndexType))


def check_range(start_position: int, end_position: int | None) -> None:
    if start_position < 0 or (end_position is not None and end_position < start_position):
        raise ValueError(f"bad remote segment range {start_position}..{end_position}")


def load_remote_storage_manager(class_name: str, configs: dict[str, str]) -> RemoteStorageManager:
    """Instantiate and configure the manager named ``class_name`` (see the module doc)."""
    path = BUILT_INS.get(class_name, class_name)
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ValueError(
            f"remote.log.storage.manager.class.name {class_name!r}: expected 'file', 's3' "
            "or 'package.module:Class'"
        )
    try:
        cls: Any = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"remote.log.storage.manager.class.name {class_name!r}: {e}") from e
    if not (isinstance(cls, type) and issubclass(cls, RemoteStorageManager)):
        raise ValueError(
            f"remote.log.storage.manager.class.name {class_name!r} is not a RemoteStorageManager"
        )
    manager: RemoteStorageManager = cls()
    manager.configure(dict(configs))
    return manager
