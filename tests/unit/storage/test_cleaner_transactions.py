"""Compaction of transactional data: aborted data goes whatever its keys, never
supersedes committed values, markers go once their transaction has no data left and
``delete.retention.ms`` passed, and the cleaned segments' transaction indexes agree."""

from __future__ import annotations

from pathlib import Path

from storage_helpers import FakeClock, append

from moldau.config.topic import LogConfig
from moldau.records.batch import DELETE_HORIZON_FLAG, BatchInfo, scan_batches
from moldau.records.control import build_marker_batch, read_marker
from moldau.records.record import build_batch, decode_all
from moldau.storage.cleaner import clean_log
from moldau.storage.unified_log import UnifiedLog

NOW = 1_700_000_000_000
DAY_MS = 86_400_000


def config() -> LogConfig:
    return LogConfig.from_props(
        {"cleanup.policy": "compact", "segment.bytes": "600", "file.delete.delay.ms": "0"}
    )


class Writer:
    def __init__(self, log: UnifiedLog) -> None:
        self.log = log
        self.seqs: dict[int, int] = {}

    def put(self, key: bytes, value: bytes, *, pid: int = -1) -> int:
        transactional = pid >= 0
        seq = self.seqs.get(pid, 0)
        data = bytearray(
            build_batch(
                [(key, value)],
                base_timestamp=NOW,
                producer_id=pid,
                producer_epoch=0 if transactional else -1,
                base_sequence=seq if transactional else -1,
                is_transactional=transactional,
            )
        )
        if transactional:
            self.seqs[pid] = seq + 1
        return append(self.log, data, now_ms=NOW).base_offset

    def end(self, pid: int, *, commit: bool) -> int:
        data = build_marker_batch(pid, 0, committed=commit, coordinator_epoch=0, timestamp=NOW)
        return self.log.append_as_leader(
            data, scan_batches(data, strict=False), leader_epoch=0
        ).base_offset


def contents(log: UnifiedLog) -> tuple[list[tuple[int, bytes | None, bytes | None]], list[tuple]]:
    """Data records and markers (offset, producer, committed) left in the log."""
    data, markers = [], []
    raw = log.read_bytes(log.log_start_offset, 1 << 30)
    for info, records in decode_all(raw):
        if info.is_control:
            batch = raw[info.position : info.end_position]
            m = read_marker(batch)
            markers.append((info.base_offset, info.producer_id, m.committed if m else None))
        else:
            data += [(r.offset, r.key, r.value) for r in records]
    return data, markers


def roll_and_clean(log: UnifiedLog, now: int) -> None:
    log.roll(now)
    assert clean_log(log, 0, now, high_watermark=log.log_end_offset, force=True) is not None


def test_aborted_data_goes_and_never_supersedes(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", config(), clock=FakeClock(NOW))
    w = Writer(log)
    w.put(b"a", b"committed-a")  # plain write
    w.put(b"b", b"b1", pid=1)
    w.put(b"a", b"aborted-a", pid=1)  # would supersede a if it counted
    w.end(1, commit=False)
    w.put(b"b", b"b2", pid=2)
    w.put(b"c", b"c1", pid=2)
    w.end(2, commit=True)
    roll_and_clean(log, NOW)
    data, markers = contents(log)
    assert {k: v for _, k, v in data} == {b"a": b"committed-a", b"b": b"b2", b"c": b"c1"}
    assert all(v != b"aborted-a" and v != b"b1" for _, _, v in data)
    # Inside delete.retention.ms every marker stays. As in Kafka, the pass that removed the
    # aborted data keeps its index entry; the next pass finds no data and drops it.
    assert [(pid, committed) for _, pid, committed in markers] == [(1, False), (2, True)]
    assert [t.producer_id for t in log.collect_aborted_transactions(0, 100)] == [1]
    roll_and_clean(log, NOW)
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []
    assert contents(log)[1] == markers
    log.close()


def test_markers_go_after_delete_retention_once_their_data_is_gone(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", config(), clock=FakeClock(NOW))
    w = Writer(log)
    w.put(b"k", b"v1", pid=1)
    w.end(1, commit=True)
    w.put(b"k", b"v2", pid=1)  # supersedes v1: the first transaction has no data left
    w.end(1, commit=True)
    w.put(b"x", b"aborted", pid=2)
    w.end(2, commit=False)
    w.put(b"z", b"plain")
    roll_and_clean(log, NOW)  # removes v1 and the aborted data
    # KIP-534: the markers' timestamps are long past delete.retention.ms (one day), but
    # the pass that first finds a marker's transaction without data only stamps its
    # delete horizon (now + one day) on it.
    second = NOW + 2 * DAY_MS
    roll_and_clean(log, second)
    first_marker, _, abort_marker = (b for b in batches(log) if b.is_control)
    assert first_marker.attributes & DELETE_HORIZON_FLAG
    assert first_marker.delete_horizon_ms == second + DAY_MS
    assert first_marker.max_timestamp < NOW + DAY_MS  # its own time is kept
    assert abort_marker.delete_horizon_ms == second + DAY_MS
    roll_and_clean(log, second + DAY_MS - 1)
    assert [(pid, committed) for _, pid, committed in contents(log)[1]] == [
        (1, True),
        (1, True),
        (2, False),
    ]
    roll_and_clean(log, second + DAY_MS)
    data, markers = contents(log)
    assert [(k, v) for _, k, v in data] == [(b"k", b"v2"), (b"z", b"plain")]
    # Producer 1's second marker covers v2 (kept); producer 2's abort marker is its
    # producer's last batch, kept for the epoch; producer 1's first marker went.
    assert [(pid, committed) for _, pid, committed in markers] == [(1, True), (2, False)]
    log.close()


def batches(log: UnifiedLog) -> list[BatchInfo]:
    return [info for info, _ in decode_all(log.read_bytes(log.log_start_offset, 1 << 30))]


def test_aborted_transaction_with_data_keeps_marker_and_index(tmp_path: Path) -> None:
    """Aborted data spread over several segments is removed; the abort marker keeps its
    index entry in the cleaned segment, and both survive a reopen."""
    log = UnifiedLog.open(tmp_path / "t-0", config(), clock=FakeClock(NOW))
    w = Writer(log)
    for i in range(6):
        w.put(f"k{i}".encode(), b"x" * 40, pid=3)
    end = w.end(3, commit=False)
    w.put(b"tail", b"plain")
    before = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [(t.producer_id, t.last_offset) for t in before] == [(3, end)]
    roll_and_clean(log, NOW)
    data, markers = contents(log)
    assert [(k, v) for _, k, v in data] == [(b"tail", b"plain")]
    assert markers == [(end, 3, False)]
    assert log.collect_aborted_transactions(0, log.log_end_offset) == before
    reopened_dir = log.dir
    log.close()
    reopened = UnifiedLog.open(
        reopened_dir, config(), clock=FakeClock(NOW), clean_shutdown=True, recovery_point=10**9
    )
    assert contents(reopened) == (data, markers)
    assert reopened.collect_aborted_transactions(0, reopened.log_end_offset) == before
    reopened.close()


def test_open_transactions_bound_the_cleanable_range(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", config(), clock=FakeClock(NOW))
    w = Writer(log)
    w.put(b"k", b"old")
    first_open = w.put(b"k", b"undecided", pid=5)
    for i in range(10):
        w.put(f"p{i}".encode(), b"y" * 40)
    w.put(b"k", b"newer")
    log.roll(NOW)
    lso = log.last_stable_offset(log.log_end_offset)
    assert lso == first_open
    clean_log(log, 0, NOW, high_watermark=lso, force=True)
    data, _ = contents(log)
    assert (first_open, b"k", b"undecided") in data  # nothing at or after the LSO moved
    log.close()
