"""Kafka's log cleaner: compaction of ``cleanup.policy=compact`` logs.

One pass over a log: the *cleanable* range is the sealed segments below the first
uncleanable offset (the active segment, the bound the caller gives -- the last stable
offset, so no undecided transaction is touched -- and ``min.compaction.lag.ms`` bound it);
its *dirty* part starts at the cleaner checkpoint. An offset map (key -> latest
offset) is built over the dirty part, then every cleanable segment is rewritten in groups
whose cleaned size stays under ``segment.bytes``, keeping each key's latest record. Offsets and
timestamps never change: a rewritten batch keeps its base offset, offset range, codec,
producer fields and leader epoch; batches that lose nothing are copied byte for byte.

Transactions, as Kafka cleans them: batches of aborted transactions (known from the
transaction index) go whole, without looking at keys, and never enter the offset map; a
marker stays while any batch of its transaction does, unless it is its producer's last
batch (which keeps the producer's epoch); the cleaned segment's transaction index keeps
the aborted transactions whose marker it keeps.

Tombstones and markers go by Kafka's delete horizon (KIP-534), not by their timestamps:
the first pass that keeps a batch with a tombstone (or a marker whose transaction has no
data left) rewrites it with the delete horizon flag and the pass's time plus
``delete.retention.ms`` as its base timestamp (records keep their timestamps); a later
pass drops them once its time reaches that horizon. So a consumer that read the log up to
a tombstone's offset has ``delete.retention.ms`` after the tombstone was first cleaned to
see it, however old its timestamp.

This is the one storage component that decodes records; it is not on the produce/fetch
path and may run in a worker thread: it only reads sealed segments, writes a new one and
takes the log's lock for the swap (``UnifiedLog.replace_segments``), which is dropped if the log
was truncated meanwhile. It gives up the GIL after every batch, so requests wait for at
most one batch's decoding instead of the interpreter's 5 ms switch interval.

The offset map holds at most ``max_map_entries`` keys, Kafka's capacity for
``log.cleaner.dedupe.buffer.size`` (:func:`offset_map_capacity`). When it fills, the pass
stops where the map stopped, as Kafka's cleaner does: it cleans the segments the map
reached, keeping every record past that offset, and returns that offset as the new
checkpoint, so the next pass goes on from there.
"""

from __future__ import annotations

import copy
import heapq
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from moldau.protocol.errors import KafkaError
from moldau.records.batch import (
    INT32_MAX,
    BatchInfo,
    read_batch_header,
    scan_batches,
    set_log_append_time,
)
from moldau.records.control import EndTxnMarker, read_marker
from moldau.records.record import Record, build_batch, iter_batches
from moldau.storage.local_log import CleaningAbortedError
from moldau.storage.segment import Segment, SegmentDeletedError
from moldau.storage.txn_index import AbortedTxn, TransactionIndex
from moldau.storage.unified_log import UnifiedLog

READ_CHUNK = 8 * 1024 * 1024  # bytes of whole batches decoded per pread
_NEVER = -(2**63)  # a time before every delete horizon
# Kafka's SkimpyOffsetMap: a 16-byte MD5 of the key and an 8-byte offset per entry.
MAP_BYTES_PER_ENTRY = 24
CLEANER_MAP_LOAD_FACTOR = 0.9  # Kafka's log.cleaner.io.buffer.load.factor default


def offset_map_capacity(dedupe_buffer_bytes: int, threads: int, load_factor: float) -> int:
    """Keys one pass may map: Kafka's share of ``log.cleaner.dedupe.buffer.size`` per
    cleaner thread, in entries, filled up to ``log.cleaner.io.buffer.load.factor``."""
    slots = min(dedupe_buffer_bytes // max(threads, 1), 2**31 - 1) // MAP_BYTES_PER_ENTRY
    return max(1, int(slots * load_factor))


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """What one cleaning pass over a log would cover."""

    segments: tuple[Segment, ...]  # sealed segments wholly below ``end``
    first_dirty: int  # the cleaner checkpoint, clamped into the log
    end: int  # first uncleanable offset
    dirty_bytes: int
    total_bytes: int

    @property
    def dirty_ratio(self) -> float:
        return self.dirty_bytes / self.total_bytes if self.total_bytes else 0.0


def first_uncleanable_offset(log: UnifiedLog, now_ms: int, high_watermark: int) -> int:
    """The active segment's base, bounded by ``high_watermark`` (callers pass the last
    stable offset) and by the first segment holding a batch younger than
    ``min.compaction.lag.ms``."""
    end = min(log.active.base_offset, high_watermark)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        young = next((s for s in log.segments if s.max_timestamp > now_ms - lag), None)
        if young is not None:
            end = min(end, young.base_offset)
    return end


def cleanable_range(
    log: UnifiedLog, checkpoint: int, now_ms: int, high_watermark: int
) -> CleanableRange:
    """The sealed segments below the first uncleanable offset and how dirty they are.

    A checkpoint outside the log (truncation, deleted segments) restarts from its start.
    """
    end = first_uncleanable_offset(log, now_ms, high_watermark)
    everything = log.segments
    segments = tuple(
        s
        for s, following in zip(everything, everything[1:], strict=False)
        if following.base_offset <= end
    )
    start = log.segments[0].base_offset
    outside = checkpoint < start or checkpoint > log.log_end_offset
    first_dirty = start if outside else min(checkpoint, end)
    dirty = sum(s.size for s in segments if s.next_offset > first_dirty)
    return CleanableRange(segments, first_dirty, end, dirty, sum(s.size for s in segments))


def needs_cleaning(rng: CleanableRange, log: UnifiedLog, now_ms: int) -> bool:
    """Kafka's choice: dirty ratio >= min.cleanable.dirty.ratio, or dirty data older than
    max.compaction.lag.ms."""
    if not rng.dirty_bytes:
        return False
    if rng.dirty_ratio >= log.config.min_cleanable_dirty_ratio:
        return True
    deadline = now_ms - log.config.max_compaction_lag_ms
    return any(
        0 <= s.first_timestamp < deadline for s in rng.segments if s.next_offset > rng.first_dirty
    )


def clean_log(
    log: UnifiedLog,
    checkpoint: int,
    now_ms: int,
    *,
    high_watermark: int,
    force: bool = False,
    aborted: Callable[[], bool] = lambda: False,
    max_map_entries: int | None = None,
) -> int | None:
    """Compact ``log`` if it is dirty enough (or ``force``); returns the new cleaner
    checkpoint (the first uncleanable offset, or where a full offset map stopped), None
    if nothing was cleaned. Raises CleaningAbortedError if the log changed under the
    pass or ``aborted()`` turned true."""
    truncations = log.truncations
    rng = cleanable_range(log, checkpoint, now_ms, high_watermark)
    if not rng.segments or not (force or needs_cleaning(rng, log, now_ms)):
        return None
    horizon = DeleteHorizon(now_ms, now_ms + log.config.delete_retention_ms)
    max_bytes = log.config.segment_bytes
    group: list[Segment] = []
    out: _CleanedSegment | None = None
    last_offsets = {pid: e.last_offset for pid, e in list(log.producer_state.producers.items())}
    try:
        aborted_txns = log.collect_aborted_transactions(rng.segments[0].base_offset, rng.end)
        offset_map, end = build_offset_map(
            rng.segments, rng.first_dirty, aborted, aborted_txns, max_map_entries, rng.end
        )
        txns = TransactionCleaning(aborted_txns, last_offsets)
        for segment in (s for s in rng.segments if s.base_offset < end):
            if aborted():
                raise CleaningAbortedError(f"{log.dir.name}: cleaning stopped")
            if out and segment.next_offset - 1 - group[0].base_offset > INT32_MAX:
                out.swap(group, truncations)
                group, out = [], None
            out = out or _CleanedSegment(log, segment.base_offset, aborted)
            mark, saved = out.mark(), txns.copy()
            out.write_segment(segment, offset_map, horizon, txns, end)
            if group and out.segment.size > max_bytes:
                # The group is full: cut this segment off and start the next group with it.
                out.rewind(mark)
                txns = saved
                out.swap(group, truncations)
                group, out = [], _CleanedSegment(log, segment.base_offset, aborted)
                out.write_segment(segment, offset_map, horizon, txns, end)
            group.append(segment)
        if out:
            out.swap(group, truncations)
    except (KafkaError, OSError) as e:
        if isinstance(e, CleaningAbortedError) or not (
            log.closed or log.truncations != truncations or isinstance(e, SegmentDeletedError)
        ):
            raise
        # The loop thread truncated, deleted or closed the log under the pass.
        raise CleaningAbortedError(f"{log.dir.name} changed during cleaning: {e}") from e
    finally:
        if out:
            out.abort()
    return end


@dataclass(frozen=True, slots=True)
class DeleteHorizon:
    """A pass's view of KIP-534's delete horizons: its time, and the horizon it stamps
    on the batches it first keeps with tombstones or markers."""

    now_ms: int
    new_horizon_ms: int  # now + delete.retention.ms

    def passed(self, info: BatchInfo) -> bool:
        """True once ``info``'s tombstones (or marker) may go."""
        stamped = info.delete_horizon_ms
        return stamped is not None and stamped <= self.now_ms


class _CleanedSegment:
    """``<base>.log.cleaned`` and its indexes: the rewritten batches of one group."""

    def __init__(self, log: UnifiedLog, base_offset: int, aborted: Callable[[], bool]) -> None:
        self.log = log
        self.segment = log.new_cleaned_segment(base_offset)
        self.swapped = False
        self.aborted = aborted

    def write_segment(
        self,
        segment: Segment,
        offset_map: dict[bytes, int],
        horizon: DeleteHorizon,
        txns: TransactionCleaning,
        end: int,
    ) -> None:
        """Rewrite ``segment``; batches reaching ``end`` (where a full offset map stopped)
        keep their tombstones and markers: the map did not see what they supersede (they
        may still get their delete horizon, as Kafka stamps every batch it keeps)."""
        index = self.segment.txn_index
        for info, records, raw in _decoded_batches(segment, self.aborted):
            data: bytes | bytearray | memoryview
            if info.last_offset >= end:
                horizon = replace(horizon, now_ms=_NEVER)
            if info.is_control:
                data = txns.clean_control(info, records, raw, horizon, index)
            elif txns.is_aborted(info):
                data = b""
            else:
                data = _clean_batch(info, records, raw, offset_map, horizon)
            if data:
                header = read_batch_header(data)
                header.position = 0
                self.segment.append(data, [header])

    def mark(self) -> int:
        """Where the output ends now, to ``rewind`` to."""
        return self.segment.next_offset

    def rewind(self, mark: int) -> None:
        """Drop the batches written since ``mark`` (and their index entries)."""
        self.segment.truncate_to(mark)

    def swap(self, group: Sequence[Segment], truncations: int) -> None:
        """Seal, make durable and swap in for ``group``."""
        self.segment.seal()
        self.segment.flush()
        self.swapped = True  # from here the files belong to the log (or to UnifiedLog.open)
        try:
            self.log.replace_segments(group, self.segment, truncations=truncations)
        except CleaningAbortedError:
            self.swapped = False  # refused before anything was renamed: still ours
            raise

    def abort(self) -> None:
        """Drop the files unless they were handed to the log (an error cut the pass
        short)."""
        if not self.swapped:
            self.segment.discard()


def build_offset_map(
    segments: Sequence[Segment],
    first_dirty: int,
    aborted: Callable[[], bool] = lambda: False,
    aborted_txns: Sequence[AbortedTxn] = (),
    max_entries: int | None = None,
    end: int = 2**63 - 1,
) -> tuple[dict[bytes, int], int]:
    """Key -> offset of its latest record at or after ``first_dirty``; records of aborted
    transactions do not count (they supersede nothing). With ``max_entries`` keys mapped,
    the map stops before the first record of a new key: the offset it covers up to is
    returned with it (``end`` when it never filled)."""
    offset_map: dict[bytes, int] = {}
    limit = 2**63 - 1 if max_entries is None else max_entries
    txns = TransactionCleaning(aborted_txns, {})
    for segment in segments:
        if segment.next_offset <= first_dirty:
            continue
        for info, records, _ in _decoded_batches(segment, aborted):
            if info.is_control:
                txns.end(info, None)
                continue
            if txns.is_aborted(info) or info.last_offset < first_dirty:
                continue
            for record in records:
                if record.key is not None and record.offset >= first_dirty:
                    if len(offset_map) >= limit and record.key not in offset_map:
                        return offset_map, record.offset  # full: clean up to here
                    offset_map[record.key] = record.offset
    return offset_map, end


def _clean_batch(
    info: BatchInfo,
    records: list[Record],
    raw: memoryview,
    offset_map: dict[bytes, int],
    horizon: DeleteHorizon,
) -> bytes | bytearray | memoryview:
    """The batch without superseded records, null keys and tombstones past the batch's
    delete horizon: the original bytes if nothing goes (and no horizon is to be
    stamped), empty if everything does."""
    passed = horizon.passed(info)
    kept = [
        r
        for r in records
        if r.key is not None
        and r.offset >= offset_map.get(r.key, -1)
        and not (r.value is None and passed)
    ]
    stamp = info.delete_horizon_ms is None and any(r.value is None for r in kept)
    if len(kept) == len(records) and not stamp:
        return raw
    if not kept:
        return b""
    return _rebuild(info, kept, horizon.new_horizon_ms if stamp else info.delete_horizon_ms)


def _rebuild(info: BatchInfo, records: list[Record], delete_horizon_ms: int | None) -> bytearray:
    """``records`` (a subset of ``info``'s) as a batch with ``info``'s offsets, codec,
    producer fields and leader epoch."""
    data = bytearray(
        build_batch(
            records,
            base_offset=info.base_offset,
            compression=info.compression,
            producer_id=info.producer_id,
            producer_epoch=info.producer_epoch,
            base_sequence=info.base_sequence,
            is_transactional=info.is_transactional,
            is_control=info.is_control,
            partition_leader_epoch=info.partition_leader_epoch,
            last_offset_delta=info.last_offset_delta,
            delete_horizon_ms=delete_horizon_ms,
        )
    )
    if info.timestamp_type:  # decoded records carry the batch's LogAppendTime
        set_log_append_time(data, scan_batches(data, strict=False)[0], info.max_timestamp)
    return data


class TransactionCleaning:
    """Kafka's CleanedTransactionMetadata: the transactions a pass walks through, in
    offset order, deciding which batches of aborted transactions go and which markers may
    go. Copied before a segment is written so a rewound segment can be written again."""

    def __init__(self, aborted: Sequence[AbortedTxn], last_offsets: dict[int, int]) -> None:
        self.pending = [(t.first_offset, i, t) for i, t in enumerate(aborted)]  # a heap
        heapq.heapify(self.pending)
        self.last_offsets = last_offsets  # producer id -> its last offset in the log
        self.aborted_open: dict[int, tuple[AbortedTxn, bool]] = {}  # pid -> (txn, seen data)
        self.committed_open: set[int] = set()  # pids whose committed data was seen
        self.kept: AbortedTxn | None = None  # the aborted transaction a kept marker ends

    def copy(self) -> TransactionCleaning:
        return copy.deepcopy(self)

    def _start_up_to(self, info: BatchInfo) -> None:
        """Open the aborted transactions that began by ``info`` and end at or after it
        (those ending before it were in segments the walk skipped)."""
        pending = self.pending
        while pending and pending[0][0] <= info.last_offset:
            _, _, txn = heapq.heappop(pending)
            if txn.last_offset >= info.base_offset:
                self.aborted_open.setdefault(txn.producer_id, (txn, False))

    def is_aborted(self, info: BatchInfo) -> bool:
        """A data batch: True if it belongs to an aborted transaction (it goes)."""
        self._start_up_to(info)
        if not info.is_transactional:
            return False
        open_abort = self.aborted_open.get(info.producer_id)
        if open_abort is not None:
            self.aborted_open[info.producer_id] = (open_abort[0], True)
            return True
        self.committed_open.add(info.producer_id)
        return False

    def end(self, info: BatchInfo, marker: EndTxnMarker | None) -> bool:
        """A control batch ends its producer's transaction (``marker`` None: an empty one
        the cleaner left); True if no batch of that transaction was left in this pass, so
        the marker may go. A kept ABORT marker's transaction is in ``kept``."""
        self._start_up_to(info)
        self.kept = None
        pid = info.producer_id
        if marker is None:
            self.aborted_open.pop(pid, None)
            self.committed_open.discard(pid)
            return True
        if not marker.committed:
            txn, observed = self.aborted_open.pop(pid, (None, False))
            if txn is not None and observed:
                self.kept = txn
                return False
            return True
        if pid in self.committed_open:
            self.committed_open.discard(pid)
            return False
        return True

    def clean_control(
        self,
        info: BatchInfo,
        records: list[Record],
        raw: memoryview,
        horizon: DeleteHorizon,
        index: TransactionIndex,
    ) -> bytes | bytearray | memoryview:
        """A marker as it goes to the cleaned segment (its aborted transaction to
        ``index`` if it stays): kept while its transaction has data; once that is gone,
        stamped with a delete horizon on the first pass, dropped on a pass past that
        horizon unless it is its producer's last batch."""
        removable = self.end(info, read_marker(raw))
        if self.kept is not None:
            index.append(self.kept)
            return raw
        if not removable:
            return raw
        if info.delete_horizon_ms is None:
            return _rebuild(info, records, horizon.new_horizon_ms)
        if horizon.passed(info) and self.last_offsets.get(info.producer_id) != info.last_offset:
            return b""
        return raw


def _decoded_batches(
    segment: Segment, aborted: Callable[[], bool]
) -> Iterator[tuple[BatchInfo, list[Record], memoryview]]:
    """Every batch of a segment decoded, with its raw bytes; reads chunks of whole
    batches so memory stays bounded by READ_CHUNK (or one larger batch). Checks
    ``aborted`` per chunk, so stopping the broker does not wait for a whole segment."""
    infos = list(segment.batches_from(0))
    i = 0
    while i < len(infos):
        if aborted():
            raise CleaningAbortedError(f"cleaning {segment.path.name} stopped")
        j, start = i + 1, infos[i].position
        while j < len(infos) and infos[j].end_position - start <= READ_CHUNK:
            j += 1
        buf = memoryview(segment.read(start, infos[j - 1].end_position - start))
        for info, records in iter_batches(buf):
            yield info, records, buf[info.position : info.end_position]
            time.sleep(0)  # hand the GIL to the event loop between batches
        i = j
