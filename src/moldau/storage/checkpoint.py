"""Kafka's text checkpoint files and ``meta.properties``.

A checkpoint is ``version\\ncount\\n`` then one ``topic partition offset`` line per
partition; it is written to a temp file, fsynced and renamed over the old one, so a crash
leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from moldau.protocol.errors import StorageError

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # high watermarks
META_PROPERTIES = "meta.properties"
CHECKPOINT_VERSION = 0

TopicPartition = tuple[str, int]


def atomic_write(path: Path, text: str, *, sync: bool = True) -> None:
    """Write via temp file + fsync + rename + directory fsync. ``sync=False`` skips both
    fsyncs, for callers that make many files durable at once (:func:`sync_filesystems`)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        if sync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def sync_filesystems(directories: Iterable[Path]) -> None:
    """Make everything written under ``directories`` durable: one syncfs(2) per file
    system they are on (not os.sync, which also waits for every other process' dirty
    pages on the machine); os.sync where syncfs is not available."""
    syncfs = getattr(_libc(), "syncfs", None)
    if syncfs is None:
        os.sync()
        return
    for directory in {os.stat(d).st_dev: d for d in directories}.values():
        fd = os.open(directory, os.O_RDONLY)
        try:
            if syncfs(fd) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err), str(directory))
        finally:
            os.close(fd)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name, use_errno=True) if name else None


def fsync_dir(directory: Path) -> None:
    """Make a directory's entries (new, renamed, removed files) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    atomic_write(path, "\n".join(lines) + "\n")


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Offsets in a checkpoint file; empty if it does not exist. Raises StorageError if
    it is malformed (a torn file cannot happen, so that is real corruption)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    try:
        version, count = int(lines[0]), int(lines[1])
        if version != CHECKPOINT_VERSION:
            raise ValueError(f"unsupported version {version}")
        entries = lines[2 : 2 + count]
        if len(entries) != count:
            raise ValueError(f"expected {count} entries, found {len(entries)}")
        offsets: dict[TopicPartition, int] = {}
        for line in entries:
            topic, partition, offset = line.split(" ")
            offsets[(topic, int(partition))] = int(offset)
    except (IndexError, ValueError) as exc:
        raise StorageError(f"malformed checkpoint file {path}: {exc}") from None
    return offsets


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    """Java-properties style ``key=value`` lines (``meta.properties``)."""
    atomic_write(path, "".join(f"{key}={value}\n" for key, value in props.items()))
