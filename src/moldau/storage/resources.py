"""Process limits storage depends on: descriptors, memory maps, disk; and their budget.

At start the broker raises its soft ``RLIMIT_NOFILE`` to the hard limit and derives its
descriptor budget from what it got: half for cached segment files
(``log.segment.open.files.max``; Kafka keeps every segment open, so a broker should hold
the active segment of each partition it writes to), the rest for sockets, in-flight
sendfile ranges and transient opens. Running out of any of these is a ``StorageError`` (KAFKA_STORAGE_ERROR)
naming the resource, for the request that hit it.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from moldau.protocol.errors import StorageError

if TYPE_CHECKING:
    from moldau.config.broker import BrokerConfig

logger = logging.getLogger(__name__)

OPEN_FILES_SHARE = 2  # 1/2 of the descriptor limit caches segment files
MIN_OPEN_FILES = 16
MAX_OPEN_FILES = 32_768
# Derived max.broker.partitions: 5 per descriptor of the limit, counted between these.
PARTITIONS_PER_DESCRIPTOR, PARTITION_LIMIT_RANGE = 5, (64, 65_536)
DESCRIPTOR_RESERVE = 32  # descriptors a partition creation leaves free for everything else
MAP_RESERVE = 1024  # memory maps kept free for the interpreter and libraries

_MESSAGES = {
    errno.EMFILE: "out of file descriptors (raise the open-files limit, ulimit -n)",
    errno.ENFILE: "the system is out of file descriptors",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENOMEM: "out of memory or memory maps (vm.max_map_count)",
    errno.EROFS: "the file system is read-only",
    errno.EIO: "I/O error",
}


def storage_error(exc: OSError, action: str) -> StorageError:
    """A KAFKA_STORAGE_ERROR for an OS error, saying what was being done and why it failed."""
    reason = _MESSAGES.get(exc.errno or 0, exc.strerror or str(exc))
    return StorageError(f"{action}: {reason}")


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1 << 20) if soft != resource.RLIM_INFINITY else soft
    if soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            logger.info("raised the open-files limit (RLIMIT_NOFILE) from %d to %d", soft, hard)
            soft = hard
        except (OSError, ValueError) as e:
            logger.warning("could not raise the open-files limit from %d: %s", soft, e)
    else:
        logger.info("open-files limit (RLIMIT_NOFILE) is %d", soft)
    return open_files_limit()


def open_files_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


@dataclass(frozen=True)
class DescriptorBudget:
    """How the descriptor limit is shared out."""

    limit: int  # soft RLIMIT_NOFILE
    open_files_max: int  # segment files kept open by the FileCache
    max_partitions: int  # partitions this broker accepts (max.broker.partitions)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> DescriptorBudget:
        """``log.segment.open.files.max`` and ``max.broker.partitions`` against this
        process's descriptor limit."""
        return cls.derive(
            open_files_limit(),
            config.int("log.segment.open.files.max"),
            config.int("max.broker.partitions"),
        )

    @classmethod
    def derive(
        cls, limit: int, open_files_max: int = -1, max_partitions: int = -1
    ) -> DescriptorBudget:
        """Fill in the -1 (derived) values from ``limit``."""
        if open_files_max < 0:
            open_files_max = min(MAX_OPEN_FILES, max(MIN_OPEN_FILES, limit // OPEN_FILES_SHARE))
        if max_partitions < 0:
            low, high = PARTITION_LIMIT_RANGE
            max_partitions = PARTITIONS_PER_DESCRIPTOR * min(max(limit, low), high)
        return cls(limit, open_files_max, max_partitions)


def open_descriptors() -> int:
    """Descriptors this process has open now."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # minus the one listdir used
    except OSError:
        return 0


def memory_maps() -> int:
    """Memory map regions of this process now (Linux), 0 where unknown."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def max_memory_maps() -> int | None:
    """``vm.max_map_count``, None where unknown."""
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class DiskSpace:
    free_bytes: int  # usable by this process (f_bavail)
    free_inodes: int
    total_bytes: int = -1

    @classmethod
    def of(cls, path: Path) -> DiskSpace:
        st = os.statvfs(path)
        inodes = st.f_favail if st.f_files else 1 << 62  # file systems without inode limits
        return cls(st.f_bavail * st.f_frsize, inodes, st.f_blocks * st.f_frsize)
