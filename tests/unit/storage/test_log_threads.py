"""Cleaning and flushing in a worker thread while the log is appended to and read."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from storage_helpers import FakeClock, append

from moldau.config.topic import LogConfig
from moldau.records.record import build_batch, decode_all
from moldau.storage.cleaner import clean_log
from moldau.storage.local_log import CLEANED_SUFFIX, CleaningAbortedError
from moldau.storage.segment import Segment
from moldau.storage.unified_log import UnifiedLog

NOW = 1_700_000_000_000
CONFIG = LogConfig.from_props(
    {"cleanup.policy": "compact", "segment.bytes": "600", "file.delete.delay.ms": "0"}
)


def put(log: UnifiedLog, i: int, keys: int = 7) -> tuple[int, bytes, bytes]:
    key, value = b"key-%d" % (i % keys), b"value-%d" % i
    data = bytearray(build_batch([(key, value)], base_timestamp=NOW))
    return append(log, data, now_ms=NOW).base_offset, key, value


def records(raw: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for _, recs in decode_all(raw) for r in recs]


def test_cleaning_in_a_thread_while_appending_and_reading(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG, clock=FakeClock(NOW))
    written = {}
    for i in range(400):
        offset, key, value = put(log, i)
        written[offset] = (key, value)
    hw = log.log_end_offset
    failures: list[BaseException] = []
    ends: list[int | None] = []

    def clean() -> None:
        try:
            ends.append(clean_log(log, 0, NOW, high_watermark=hw))
        except BaseException as e:  # reported by the main thread
            failures.append(e)

    cleaner = threading.Thread(target=clean)
    cleaner.start()
    reads = 0
    i = 400
    while cleaner.is_alive() or reads < 20:
        offset, key, value = put(log, i)
        written[offset] = (key, value)
        i += 1
        got = records(log.read_bytes(0, 1 << 30))
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(set(offsets))
        assert all(written[o] == (k, v) for o, k, v in got)
        assert offsets[-1] == log.log_end_offset - 1  # nothing appended went missing
        reads += 1
    cleaner.join()
    assert not failures
    (end,) = ends
    assert end is not None and end > 300
    got = records(log.read_bytes(0, 1 << 30))
    below = [(o, k) for o, k, _ in got if o < end]
    assert len(below) == len({k for _, k in below})  # one record per key where cleaned
    assert [o for o, _, _ in got if o >= end] == [o for o in written if o >= end]
    log.close()
    reopened = UnifiedLog.open(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=10**9)
    assert records(reopened.read_bytes(0, 1 << 30)) == got


@pytest.mark.parametrize("change", ["truncate", "delete_records", "close"])
def test_a_log_changed_during_cleaning_keeps_its_segments(tmp_path: Path, change: str) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG, clock=FakeClock(NOW))
    for i in range(300):
        put(log, i)
    hw = log.log_end_offset
    calls = 0

    def meanwhile() -> bool:
        """Runs between segments of the pass, as the event loop thread could."""
        nonlocal calls
        calls += 1
        if calls == 3:
            if change == "truncate":
                log.truncate_to(hw - 50)
            elif change == "delete_records":
                log.delete_records_before(log.segments[4].base_offset, hw)
            else:
                log.close()
        return False

    before = log.read_bytes(0, 1 << 30) if change != "close" else b""
    with pytest.raises(CleaningAbortedError):
        clean_log(log, 0, NOW, high_watermark=hw, aborted=meanwhile)
    assert not [p for p in log.dir.iterdir() if CLEANED_SUFFIX in p.name]
    if change == "truncate":
        assert log.read_bytes(0, 1 << 30) == before[: len(log.read_bytes(0, 1 << 30))]
        assert log.log_end_offset == hw - 50
    elif change == "delete_records":
        start = log.log_start_offset
        assert records(log.read_bytes(start, 1 << 30)) == [
            r for r in records(before) if r[0] >= start
        ]


def test_stopping_aborts_a_pass(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG, clock=FakeClock(NOW))
    for i in range(300):
        put(log, i)
    before = log.read_bytes(0, 1 << 30)
    with pytest.raises(CleaningAbortedError):
        clean_log(log, 0, NOW, high_watermark=log.log_end_offset, aborted=lambda: True)
    assert log.read_bytes(0, 1 << 30) == before


def test_a_flush_racing_a_truncation_keeps_the_recovery_point_below_the_end(
    tmp_path: Path, monkeypatch
) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG, clock=FakeClock(NOW))
    for i in range(100):
        put(log, i)
    fsync = Segment.flush
    truncated = []

    def racing(segment: Segment) -> None:
        fsync(segment)
        if not truncated:  # the event loop truncates while the worker fsyncs
            truncated.append(log.log_end_offset - 30)
            log.truncate_to(truncated[0])

    monkeypatch.setattr(Segment, "flush", racing)
    flusher = threading.Thread(target=log.flush)
    flusher.start()
    flusher.join()
    assert log.log_end_offset == truncated[0]
    assert log.recovery_point <= log.log_end_offset
