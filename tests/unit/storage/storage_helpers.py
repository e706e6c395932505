"""Shared builders for the storage tests: real v2 batches, appended the way Produce does."""

from __future__ import annotations

import contextlib
import os

from moldau.records.batch import scan_batches
from moldau.records.record import Record, build_batch
from moldau.storage.unified_log import AppendResult, UnifiedLog


class FakeClock:
    """Injected wall clock (seconds, like time.time) the tests move by hand."""

    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def batch(n: int = 1, *, value_size: int = 10, timestamp: int = 1_000, tag: int = 0, **kwargs):
    """A batch of ``n`` records stamped ``timestamp``, ``timestamp + 1``, ...; ``tag``
    makes each batch's bytes distinct. Returns a bytearray, as Produce hands to append."""
    records = [
        Record(i, timestamp + i, f"k{tag}-{i}".encode(), bytes([tag % 251]) * value_size)
        for i in range(n)
    ]
    return bytearray(build_batch(records, **kwargs))


def append(log: UnifiedLog, data: bytearray, *, leader_epoch: int = 0, **kwargs) -> AppendResult:
    """Validate like the Produce handler, then append as leader (stamps ``data`` in place)."""
    return log.append_as_leader(data, scan_batches(data), leader_epoch=leader_epoch, **kwargs)


def open_paths() -> list[str]:
    """Files this process has open, one entry per descriptor (descriptor numbers get
    reused, paths do not)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
    return out
