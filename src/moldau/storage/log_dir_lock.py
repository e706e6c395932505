"""An exclusive lock per log dir, as Kafka's ``.lock`` file.

Two processes writing one log dir would interleave appends to the same segments and
overwrite each other's checkpoints. So a node (and ``moldau storage format``) locks every
log dir before it reads or writes anything in it, and a second process is refused with a
message naming the dir and the PID written into the lock file by the holder.

The lock is ``flock(LOCK_EX)`` on an open file: the kernel drops it when the holding
process ends, however it ends (kill -9 included), so nothing is ever left to clean up.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

from moldau.protocol.errors import StorageError

LOCK_FILE = ".lock"


class LogDirLockedError(StorageError):
    """Another process holds the lock of a log dir."""


class LogDirLocks:
    """The locks of a set of log dirs, held until :meth:`release` (or the process ends)."""

    def __init__(self, fds: dict[Path, int]) -> None:
        self._fds = fds

    @classmethod
    def acquire(cls, log_dirs: Iterable[Path]) -> LogDirLocks:
        """Lock every dir (creating missing ones), or none: raises LogDirLockedError, or
        StorageError if a dir cannot be created or locked."""
        locks = cls({})
        try:
            for log_dir in dict.fromkeys(Path(d).absolute() for d in log_dirs):
                locks._fds[log_dir] = _lock(log_dir)
        except BaseException:
            locks.release()
            raise
        return locks

    @property
    def dirs(self) -> list[Path]:
        return list(self._fds)

    def release(self) -> None:
        """Unlock and close; the lock files stay (as Kafka's), holding a stale PID."""
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self._fds.clear()


def _lock(log_dir: Path) -> int:
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise StorageError(f"log dir {log_dir} cannot be locked: {e.strerror or e}") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        by = f" (PID {holder})" if holder else ""
        raise LogDirLockedError(f"log dir {log_dir} is locked by another process{by}") from None
    except OSError as e:
        os.close(fd)
        raise StorageError(f"log dir {log_dir} cannot be locked: {e.strerror or e}") from e
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _holder(fd: int) -> int | None:
    """The PID the holder wrote, if it has (it writes right after locking)."""
    with contextlib.suppress(OSError, ValueError):
        return int(os.pread(fd, 32, 0).decode().strip())
    return None
