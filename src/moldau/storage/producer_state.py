"""Producer state of one partition (Kafka's ProducerStateManager), pure.

For every producer id it keeps the epoch and the metadata of its last five batches, which
is what a broker needs to drop retried batches (answering with their original offsets)
and to reject sequence gaps or fenced epochs. For transactional producers it also keeps
the first offset of the transaction open on this partition and the epoch of the
coordinator that wrote its last marker: the open transactions bound the last stable
offset (LSO), and a marker completes one (an aborted one goes to the transaction index).
Snapshots bound recovery: load the latest one, then ``replay`` the batches appended after
it; they carry the open transactions.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from moldau.protocol.errors import (
    ErrorCode,
    InvalidProducerEpochError,
    KafkaError,
    OutOfOrderSequenceError,
    StorageError,
)
from moldau.records.batch import INT32_MAX, NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchInfo
from moldau.records.control import EndTxnMarker
from moldau.storage.checkpoint import fsync_dir

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 2  # 2 adds the coordinator epoch and the open transaction's offset
NO_TXN = -1

_SNAPSHOT_HEADER = struct.Struct(">hI")  # version, crc32c of the rest
_SNAPSHOT_BODY_HEADER = struct.Struct(">qi")  # end offset, producer count
_ENTRY_V1 = struct.Struct(">qhqqb")  # producer id, epoch, last timestamp, last offset, batches
_ENTRY = struct.Struct(">qhqqiqb")  # ... coordinator epoch, open txn first offset, batches
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, timestamp


class CorruptSnapshotError(StorageError):
    """A snapshot file is unreadable; recovery should delete it and replay the log."""


class InvalidTxnStateError(KafkaError):
    code = ErrorCode.INVALID_TXN_STATE


class CoordinatorFencedError(KafkaError):
    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker just ended on this partition."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool
    last_stable_offset: int  # the first offset still undecided once it ended


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class DuplicateBatch:
    """A retried batch already in the log: answer with these offsets, append nothing."""

    base_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1
    last_offset: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = NO_TXN

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, info: BatchInfo) -> BatchMetadata | None:
        if info.producer_epoch != self.producer_epoch:
            return None
        first, last = info.base_sequence, info.last_sequence
        for batch in self.batches:
            if batch.first_seq == first and batch.last_seq == last:
                return batch
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_path(log_dir: Path, end_offset: int) -> Path:
    return log_dir / f"{end_offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(log_dir: Path, names: Iterable[str] | None = None) -> list[tuple[int, Path]]:
    """(end offset, path) of the snapshot files in ``log_dir`` (or among ``names``, a
    listing of it already made), oldest first."""
    found = []
    for name in os.listdir(log_dir) if names is None else names:
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit():
            found.append((int(stem), log_dir / name))
    return sorted(found)


class ProducerStateManager:
    """Producer id -> ProducerEntry for one partition, and its open transactions."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        # first offset -> producer id of each open transaction; offsets only grow, so
        # insertion order is offset order and the first key is the first undecided offset
        self.ongoing: dict[int, int] = {}
        # first offset -> marker offset of ended transactions whose marker may still be
        # above the high watermark (Kafka's unreplicated transactions)
        self.unreplicated: dict[int, int] = {}

    def check(self, info: BatchInfo) -> DuplicateBatch | None:
        """Validate a produce batch against the state before it is appended.

        Returns the original offsets of a duplicate (retried) batch; raises
        InvalidProducerEpochError for a fenced epoch, OutOfOrderSequenceError for a gap and
        InvalidTxnStateError for a plain batch while the producer's transaction is open.
        Batches without a sequence (the coordinators' own) skip the sequence checks.
        """
        if info.producer_id < 0:
            return None
        entry = self.producers.get(info.producer_id)
        if entry is None:
            # An unknown producer may start at any sequence: its earlier batches can have
            # been removed by retention.
            return None
        if info.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {info.producer_id} epoch {info.producer_epoch} is older than "
                f"current epoch {entry.producer_epoch}"
            )
        if info.is_control:
            return None
        if entry.current_txn_first_offset != NO_TXN and not info.is_transactional:
            raise InvalidTxnStateError(
                f"producer {info.producer_id} wrote a non-transactional batch while its "
                f"transaction from offset {entry.current_txn_first_offset} is open"
            )
        if info.base_sequence == NO_SEQUENCE:
            return None
        duplicate = entry.find_duplicate(info)
        if duplicate is not None:
            return DuplicateBatch(
                duplicate.first_offset, duplicate.last_offset, duplicate.timestamp
            )
        if info.producer_epoch != entry.producer_epoch:
            if info.base_sequence != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {info.producer_id} new epoch {info.producer_epoch} must start "
                    f"at sequence 0, got {info.base_sequence}"
                )
        elif not in_sequence(entry.last_seq, info.base_sequence):
            raise OutOfOrderSequenceError(
                f"producer {info.producer_id} sequence {info.base_sequence} does not follow "
                f"{entry.last_seq}"
            )
        return None

    def check_marker(self, info: BatchInfo, marker: EndTxnMarker) -> None:
        """A marker from an older producer epoch or an older coordinator is refused
        (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED)."""
        entry = self.producers.get(info.producer_id)
        if entry is None:
            return
        if info.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"marker of producer {info.producer_id} has epoch {info.producer_epoch}, "
                f"older than {entry.producer_epoch}"
            )
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise CoordinatorFencedError(
                f"marker of producer {info.producer_id} from coordinator epoch "
                f"{marker.coordinator_epoch}, older than {entry.coordinator_epoch}"
            )

    def update(
        self,
        info: BatchInfo,
        base_offset: int,
        append_timestamp: int,
        marker: EndTxnMarker | None = None,
    ) -> CompletedTxn | None:
        """Record an appended batch; returns the transaction its marker ended, if any.

        ``base_offset`` is the offset assigned to it, ``append_timestamp`` the timestamp
        the broker reports for it (maxTimestamp, or the log-append time) and ``marker``
        what a control batch says (None for data, or an empty control batch).
        """
        if info.producer_id < 0:
            return None
        pid = info.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid)
        if info.producer_epoch != entry.producer_epoch:
            entry.producer_epoch = info.producer_epoch
            entry.batches.clear()
        last_offset = base_offset + info.last_offset_delta
        entry.last_timestamp = append_timestamp
        entry.last_offset = last_offset
        if info.is_control:
            if marker is None:
                return None
            entry.coordinator_epoch = max(entry.coordinator_epoch, marker.coordinator_epoch)
            first = entry.current_txn_first_offset
            if first == NO_TXN:
                return None  # a marker of a transaction with no data here
            entry.current_txn_first_offset = NO_TXN
            self.ongoing.pop(first, None)
            self.unreplicated[first] = base_offset
            return CompletedTxn(
                pid,
                first,
                base_offset,
                not marker.committed,
                next(iter(self.ongoing), base_offset + 1),
            )
        if info.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(
                    info.base_sequence,
                    info.last_sequence,
                    base_offset,
                    last_offset,
                    append_timestamp,
                )
            )
        if info.is_transactional and entry.current_txn_first_offset == NO_TXN:
            entry.current_txn_first_offset = base_offset
            self.ongoing[base_offset] = pid
        return None

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset != NO_TXN

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset whose transaction is undecided, or decided by a marker the
        high watermark has not passed yet; None if there is none."""
        unreplicated = self.unreplicated
        if unreplicated:
            for first, marker in list(unreplicated.items()):
                if marker < high_watermark:
                    del unreplicated[first]
        candidates = [*unreplicated]
        if self.ongoing:
            candidates.append(next(iter(self.ongoing)))
        return min(candidates) if candidates else None

    def replay(
        self,
        infos: Iterable[BatchInfo],
        markers: Callable[[BatchInfo], EndTxnMarker | None] = lambda info: None,
    ) -> list[CompletedTxn]:
        """Rebuild state from batches already in the log (recovery after a snapshot);
        ``markers`` reads a control batch's marker. Returns the transactions ended."""
        completed = []
        for info in infos:
            marker = markers(info) if info.is_control and info.producer_id >= 0 else None
            done = self.update(info, info.base_offset, info.max_timestamp, marker)
            if done is not None:
                completed.append(done)
        return completed

    def remove_before(self, offset: int) -> None:
        """Forget producers whose last batch is below the new log start offset (a producer
        with an open transaction stays: the transaction still bounds the LSO)."""
        self.producers = {
            pid: entry
            for pid, entry in self.producers.items()
            if entry.last_offset >= offset or entry.current_txn_first_offset != NO_TXN
        }
        self.unreplicated = {f: m for f, m in self.unreplicated.items() if m >= offset}

    def remove_expired(self, now_ms: int, expiration_ms: int) -> None:
        """Forget producers idle longer than ``producer.id.expiration.ms`` (never one with
        an open transaction)."""
        self.producers = {
            pid: entry
            for pid, entry in self.producers.items()
            if now_ms - entry.last_timestamp < expiration_ms
            or entry.current_txn_first_offset != NO_TXN
        }

    def write_snapshot(self, log_dir: Path, end_offset: int, *, sync: bool = True) -> Path:
        """Atomically write ``<end_offset:020d>.snapshot`` in ``log_dir`` and return its path.

        ``end_offset`` is the log end offset the state covers (the next offset to append):
        recovery replays batches from there. Without ``sync`` a crash may leave a torn
        file, which ``load_snapshot`` rejects by its CRC (recovery then uses an older one).
        """
        body = bytearray(_SNAPSHOT_BODY_HEADER.pack(end_offset, len(self.producers)))
        for entry in self.producers.values():
            body += _ENTRY.pack(
                entry.producer_id,
                entry.producer_epoch,
                entry.last_timestamp,
                entry.last_offset,
                entry.coordinator_epoch,
                entry.current_txn_first_offset,
                len(entry.batches),
            )
            for batch in entry.batches:
                body += _BATCH.pack(
                    batch.first_seq,
                    batch.last_seq,
                    batch.first_offset,
                    batch.last_offset,
                    batch.timestamp,
                )
        path = snapshot_path(log_dir, end_offset)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(_SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, crc32c(body)))
            f.write(body)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
        if sync:
            fsync_dir(log_dir)  # make the rename itself durable
        return path

    def load_snapshot(self, path: Path) -> int:
        """Replace the state with a snapshot's (version 1 or 2); return the end offset to
        replay from."""
        data = memoryview(path.read_bytes())
        try:
            version, crc = _SNAPSHOT_HEADER.unpack_from(data)
            body = data[_SNAPSHOT_HEADER.size :]
            if version not in (1, SNAPSHOT_VERSION) or crc32c(body) != crc:
                raise CorruptSnapshotError(f"bad version or CRC in snapshot {path}")
            end_offset, count = _SNAPSHOT_BODY_HEADER.unpack_from(body)
            pos = _SNAPSHOT_BODY_HEADER.size
            producers: dict[int, ProducerEntry] = {}
            layout = _ENTRY if version == SNAPSHOT_VERSION else _ENTRY_V1
            for _ in range(count):
                pid, epoch, last_ts, last_offset, *txn, n = layout.unpack_from(body, pos)
                pos += layout.size
                entry = ProducerEntry(pid, epoch, last_timestamp=last_ts, last_offset=last_offset)
                if txn:
                    entry.coordinator_epoch, entry.current_txn_first_offset = txn
                for _ in range(n):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                producers[pid] = entry
        except struct.error as exc:
            raise CorruptSnapshotError(f"truncated snapshot {path}: {exc}") from None
        if pos != len(body):
            raise CorruptSnapshotError(f"trailing bytes in snapshot {path}")
        self.producers = producers
        open_txns = sorted(
            (e.current_txn_first_offset, pid)
            for pid, e in producers.items()
            if e.current_txn_first_offset != NO_TXN
        )
        self.ongoing = dict(open_txns)
        self.unreplicated = {}
        return end_offset
