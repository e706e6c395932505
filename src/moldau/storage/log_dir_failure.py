"""Kafka's LogDirFailureChannel: where an I/O error in a log dir is reported, from any
thread, so that the dir is taken offline once, on the event loop (its partitions go
offline on this broker; every other dir keeps serving).

Disk full (ENOSPC, EDQUOT) is not a failure of the dir here: Moldau answers
KAFKA_STORAGE_ERROR for the appends and serves again once space is freed.
"""

from __future__ import annotations

import errno
import threading
from pathlib import Path

NOT_A_DIR_FAILURE = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_dir_failure(error: OSError) -> bool:
    return error.errno not in NOT_A_DIR_FAILURE


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reported: set[Path] = set()  # each dir is reported once
        self._pending: list[tuple[Path, str]] = []

    def report(self, log_dir: Path, reason: str) -> None:
        with self._lock:
            if log_dir not in self._reported:
                self._reported.add(log_dir)
                self._pending.append((log_dir, reason))

    def take(self) -> list[tuple[Path, str]]:
        """The dirs reported since the last call, and why."""
        with self._lock:
            pending, self._pending = self._pending, []
        return pending
