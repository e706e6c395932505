"""read_committed share fetches: which batches of a read belong to aborted transactions,
and how their acquired records are archived instead of handed out."""

from __future__ import annotations

from moldau.coordinator.share.partition import (
    Acquired,
    RecordState,
    ShareLimits,
    SharePartition,
)
from moldau.records.batch import read_batch_header, stamp_base_offset
from moldau.records.control import build_marker_batch
from moldau.records.record import build_batch
from moldau.server.handlers.share_fetch import _aborted_batches, _archive_aborted
from moldau.storage.remote.remote_log_reader import RemoteLogReadResult
from moldau.storage.txn_index import AbortedTxn


def _log(*batches: tuple[int, bytes | bytearray]) -> RemoteLogReadResult:
    """Batches stamped at their base offsets, as a read returns them."""
    data = bytearray()
    for base, batch in batches:
        buf = bytearray(batch)
        stamp_base_offset(buf, read_batch_header(buf), base, 0)
        data += buf
    last = read_batch_header(bytes(buf))
    return RemoteLogReadResult(bytes(data), batches[0][0], last.next_offset)


def _records(n: int, producer_id: int = -1) -> bytes:
    return build_batch(
        [(None, b"v%d" % i) for i in range(n)],
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=producer_id >= 0,
    )


def test_aborted_batches_are_the_aborted_producers_transactional_batches_up_to_its_marker():
    aborted, other = 7, 8
    read = _log(
        (0, _records(2)),  # 0-1 plain
        (2, _records(3, aborted)),  # 2-4 aborted
        (5, _records(2, other)),  # 5-6 another producer's, interleaved: kept
        (7, _records(1, aborted)),  # 7 aborted
        (8, build_marker_batch(aborted, 0, committed=False, coordinator_epoch=0)),  # 8 marker
        (9, _records(2, aborted)),  # 9-10 its next transaction (committed): kept
    )
    assert _aborted_batches(read.to_bytes(), [AbortedTxn(aborted, 2, 8, 0)]) == [(2, 4), (7, 7)]


def test_acquired_records_of_aborted_transactions_are_archived_not_handed_out():
    sp = SharePartition(0, ShareLimits())
    taken = sp.acquire("m", 10, 100, now_ms=0)
    assert taken == [Acquired(0, 10, 1)]
    kept = _archive_aborted(sp, "m", taken, [(2, 4), (7, 7)])
    assert kept == [Acquired(0, 1, 1), Acquired(5, 6, 1), Acquired(8, 10, 1)]
    assert [sp.state_of(o)[0] for o in (1, 2, 4, 5, 7, 8)] == [
        RecordState.ACQUIRED,
        RecordState.ARCHIVED,
        RecordState.ARCHIVED,
        RecordState.ACQUIRED,
        RecordState.ARCHIVED,
        RecordState.ACQUIRED,
    ]


def test_a_read_entirely_aborted_hands_out_nothing_and_moves_the_start_offset():
    sp = SharePartition(0, ShareLimits())
    taken = sp.acquire("m", 4, 100, now_ms=0)
    assert _archive_aborted(sp, "m", taken, [(0, 4)]) == []
    assert sp.start_offset == 5 and sp.fetch_offset() == 5
