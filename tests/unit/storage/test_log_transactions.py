"""Transactions in the log: the last stable offset, markers, the aborted-transaction index
(Kafka's ``.txnindex`` format), snapshots carrying open transactions, recovery and
truncation keeping the index consistent."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
from storage_helpers import append, batch

from moldau.config.topic import LogConfig
from moldau.protocol.errors import ErrorCode, InvalidProducerEpochError, KafkaError
from moldau.records.batch import scan_batches
from moldau.records.control import build_marker_batch, read_marker
from moldau.storage.producer_state import CoordinatorFencedError, ProducerStateManager
from moldau.storage.txn_index import AbortedTxn
from moldau.storage.unified_log import UnifiedLog

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=100, file_delete_delay_ms=0)


def txn(log: UnifiedLog, pid: int, seq: int, n: int = 2, *, epoch: int = 0, tag: int = 0) -> int:
    """A transactional batch of ``n`` records; returns its base offset."""
    data = batch(
        n,
        tag=tag,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    return append(log, data).base_offset


def plain(log: UnifiedLog, n: int = 1, tag: int = 0) -> int:
    return append(log, batch(n, tag=tag)).base_offset


def marker(
    log: UnifiedLog, pid: int, *, commit: bool, epoch: int = 0, coordinator_epoch: int = 0
) -> int:
    data = build_marker_batch(
        pid, epoch, committed=commit, coordinator_epoch=coordinator_epoch, timestamp=5_000
    )
    infos = scan_batches(data, strict=False)
    return log.append_as_leader(data, infos, leader_epoch=0).base_offset


def all_aborted(log: UnifiedLog) -> list[AbortedTxn]:
    return log.collect_aborted_transactions(0, log.log_end_offset)


def test_marker_batches_round_trip() -> None:
    data = build_marker_batch(7, 3, committed=False, coordinator_epoch=11, timestamp=1)
    (info,) = scan_batches(data, strict=False)
    assert info.is_control and info.is_transactional
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (7, 3, -1)
    found = read_marker(data)
    assert found is not None and (found.committed, found.coordinator_epoch) == (False, 11)


def test_lso_follows_open_transactions_and_the_high_watermark(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    plain(log, 3)  # 0-2
    first_a = txn(log, 1, 0)  # 3-4
    plain(log, 1, tag=1)  # 5
    first_b = txn(log, 2, 0, tag=2)  # 6-7
    txn(log, 1, 2, tag=3)  # 8-9: same transaction of producer 1
    hw = log.log_end_offset
    assert log.last_stable_offset(hw) == first_a == 3
    assert log.last_stable_offset(2) == 2  # never above the high watermark
    end_a = marker(log, 1, commit=True)  # 10
    hw = log.log_end_offset
    # Producer 1's marker is not replicated yet until the HW passes it.
    assert log.last_stable_offset(end_a) == first_a
    assert log.last_stable_offset(hw) == first_b
    marker(log, 2, commit=False)  # 11
    assert log.last_stable_offset(log.log_end_offset) == log.log_end_offset == 12
    assert all_aborted(log) == [AbortedTxn(2, first_b, 11, 12)]
    log.close()


def test_aborted_entries_record_the_next_undecided_offset(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    a = txn(log, 1, 0)  # 0-1
    b = txn(log, 2, 0, tag=1)  # 2-3
    end_a = marker(log, 1, commit=False)  # 4: producer 2 still open from 2
    end_b = marker(log, 2, commit=False)  # 5
    assert all_aborted(log) == [AbortedTxn(1, a, end_a, b), AbortedTxn(2, b, end_b, end_b + 1)]
    # Only transactions overlapping the fetched range come back.
    assert log.collect_aborted_transactions(5, 6) == [AbortedTxn(2, b, end_b, end_b + 1)]
    assert log.collect_aborted_transactions(0, 2) == [AbortedTxn(1, a, end_a, b)]
    log.close()


def test_txnindex_file_is_kafkas_format(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    txn(log, 9, 0, n=3)
    marker(log, 9, commit=False)
    marker(log, 9, commit=True)  # a marker without data on this partition: no entry
    log.flush()
    files = list((tmp_path / "t-0").glob("*.txnindex"))
    assert [f.name for f in files] == ["00000000000000000000.txnindex"]
    assert files[0].read_bytes() == struct.pack(">hqqqq", 0, 9, 0, 3, 4)
    log.close()


def test_markers_are_fenced_by_producer_and_coordinator_epoch(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    txn(log, 1, 0, epoch=2)
    marker(log, 1, commit=True, epoch=2, coordinator_epoch=5)
    with pytest.raises(InvalidProducerEpochError):
        marker(log, 1, commit=False, epoch=1, coordinator_epoch=5)
    with pytest.raises(CoordinatorFencedError) as fenced:
        marker(log, 1, commit=False, epoch=2, coordinator_epoch=4)
    assert fenced.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # A bumped epoch (the coordinator fencing the producer) is accepted.
    marker(log, 1, commit=False, epoch=3, coordinator_epoch=6)
    assert log.producer_state.producers[1].producer_epoch == 3
    log.close()


def test_plain_batch_inside_an_open_transaction_is_refused(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    txn(log, 1, 0)
    idempotent = batch(1, producer_id=1, producer_epoch=0, base_sequence=2)
    with pytest.raises(KafkaError) as refused:
        append(log, idempotent)
    assert refused.value.code == ErrorCode.INVALID_TXN_STATE
    log.close()


def test_snapshot_carries_open_transactions(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    plain(log, 2)
    first = txn(log, 4, 0, epoch=1)
    marker(log, 4, commit=True, epoch=1, coordinator_epoch=3)
    second = txn(log, 4, 2, epoch=1, tag=5)
    log.close()  # writes a snapshot; reopening reads only it
    reopened = UnifiedLog.open(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=10**9)
    entry = reopened.producer_state.producers[4]
    assert (entry.current_txn_first_offset, entry.coordinator_epoch) == (second, 3)
    assert reopened.last_stable_offset(reopened.log_end_offset) == second != first
    marker(reopened, 4, commit=False, epoch=1, coordinator_epoch=3)
    assert reopened.last_stable_offset(reopened.log_end_offset) == reopened.log_end_offset
    reopened.close()


def test_version_1_snapshots_still_load(tmp_path: Path) -> None:
    """Snapshots written before transactions (version 1) load with no open transaction."""
    state = ProducerStateManager()
    body = struct.pack(">qi", 10, 1) + struct.pack(">qhqqb", 5, 2, 1_000, 9, 0)
    from crc32c import crc32c

    path = tmp_path / "00000000000000000010.snapshot"
    path.write_bytes(struct.pack(">hI", 1, crc32c(body)) + body)
    assert state.load_snapshot(path) == 10
    assert state.producers[5].producer_epoch == 2 and not state.ongoing


def fill_transactions(log: UnifiedLog, rounds: int) -> list[AbortedTxn]:
    """Interleaved transactions of two producers, every third one aborted, over many
    segments; returns the aborted ones as the index must hold them."""
    expected = []
    seqs = {1: 0, 2: 0}
    for r in range(rounds):
        firsts = {}
        for pid in (1, 2):
            firsts[pid] = txn(log, pid, seqs[pid], n=3, tag=r * 2 + pid)
            seqs[pid] += 3
            plain(log, 1, tag=r)
        for pid in (1, 2):
            abort = (r + pid) % 3 == 0
            end = marker(log, pid, commit=not abort)
            if abort:
                later = [f for p, f in firsts.items() if p != pid and f > -1]
                lso = later[0] if later else end + 1
                expected.append(AbortedTxn(pid, firsts[pid], end, lso))
            firsts[pid] = -1
    return expected


def test_crash_recovery_rebuilds_the_transaction_index(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "live" / "t-0", CONFIG)
    expected = fill_transactions(log, 40)
    first_open = txn(log, 1, 120, tag=99)
    assert all_aborted(log) == expected
    assert len(log.segments) > 3
    copy = tmp_path / "crash" / "t-0"
    shutil.copytree(log.dir, copy)
    for f in copy.glob("*.txnindex"):
        f.unlink()  # written after the last flush: lost in the crash
    for f in copy.glob("*.snapshot"):
        f.unlink()
    recovered = UnifiedLog.open(copy, CONFIG, recovery_point=0)
    assert all_aborted(recovered) == expected
    assert recovered.last_stable_offset(recovered.log_end_offset) == first_open
    recovered.close()
    log.close()


def test_truncation_drops_aborted_transactions_past_the_cut(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    expected = fill_transactions(log, 30)
    cut = expected[len(expected) // 2].last_offset
    log.truncate_to(cut)
    assert all_aborted(log) == [t for t in expected if t.last_offset < cut]
    # The transaction whose marker was cut is open again: the LSO stops at it.
    assert log.last_stable_offset(log.log_end_offset) == expected[len(expected) // 2].first_offset
    log.close()


def test_follower_appends_build_the_same_index(tmp_path: Path) -> None:
    leader = UnifiedLog.open(tmp_path / "leader" / "t-0", CONFIG)
    expected = fill_transactions(leader, 20)
    follower = UnifiedLog.open(tmp_path / "follower" / "t-0", CONFIG)
    data = bytearray(leader.read_bytes(0, 1 << 30))
    follower.append_as_follower(data, scan_batches(data, strict=False))
    assert all_aborted(follower) == expected
    assert follower.last_stable_offset(follower.log_end_offset) == follower.log_end_offset
    leader.close()
    follower.close()
