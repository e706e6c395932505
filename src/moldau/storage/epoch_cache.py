"""Kafka's leader-epoch cache: the first offset each leader epoch wrote.

Followers and consumers ask "where did epoch E end?" (OffsetForLeaderEpoch) to find
where their log diverges from the leader's; the answer comes from this cache, which is
persisted in the partition directory as ``leader-epoch-checkpoint`` in Kafka's format
(version line ``0``, entry count, then ``epoch start_offset`` lines), written atomically.

Pure apart from ``write``: the log decides when the file is written. As Kafka, it does
so whenever an append starts a new epoch and on truncation, so a clean restart reads it
instead of every batch header; the append path writes without fsync (the log fsyncs it
before its recovery point passes the new entries, and what a crash could lose past the
recovery point is rebuilt from the batches' leader epochs), so it never waits for a disk.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from pathlib import Path

from moldau.protocol.errors import StorageError
from moldau.storage.checkpoint import atomic_write

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    """Epoch -> start offset, both strictly increasing (Kafka's LeaderEpochFileCache)."""

    def __init__(self, path: Path, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = path
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        self.dirty = False  # changed since the file was last written
        self.on_disk = False  # the checkpoint file exists
        self.durable = True  # the file, if any, was fsynced
        for epoch, offset in entries or []:
            self._assign(epoch, offset)

    @classmethod
    def load(cls, path: Path) -> LeaderEpochFileCache | None:
        """The cache in ``path``; None if there is no file (the caller rebuilds it)."""
        try:
            lines = path.read_text(encoding="ascii").splitlines()
        except FileNotFoundError:
            return None
        try:
            version, count = int(lines[0]), int(lines[1])
            if version != CHECKPOINT_VERSION:
                raise ValueError(f"unsupported version {version}")
            entries = [_parse_entry(line) for line in lines[2 : 2 + count]]
            if len(entries) != count:
                raise ValueError(f"expected {count} entries, found {len(entries)}")
        except (IndexError, ValueError) as exc:
            raise StorageError(f"malformed leader epoch checkpoint {path}: {exc}") from None
        cache = cls(path, entries)
        cache.dirty = False
        cache.on_disk = True
        return cache

    # -- reading ---------------------------------------------------------------------
    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._offsets[0]) if self._epochs else None

    def previous_epoch(self, epoch: int) -> int | None:
        """The largest cached epoch below ``epoch``."""
        i = bisect_left(self._epochs, epoch)
        return self._epochs[i - 1] if i else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset``: the last entry starting at or before it."""
        i = bisect_right(self._offsets, offset)
        return self._epochs[i - 1] if i else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, with Kafka's semantics.

        The epoch is the largest cached epoch <= the requested one and the end offset the
        start of the next larger cached epoch, or the log end offset for the latest
        epoch. An undefined requested epoch, or one above every cached epoch (other than
        the latest), gives (-1, -1); one below every cached epoch gives the requested
        epoch and the first cached start offset.
        """
        epochs = self._epochs
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epochs and epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._offsets[0]
        return epochs[higher - 1], self._offsets[higher]

    # -- changing --------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether anything
        changed. Entries that would break monotonicity (an epoch >= the new one, or a
        start offset >= the new one) are removed first, as Kafka does."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        changed = self._assign(epoch, start_offset)
        self.dirty |= changed
        return changed

    def _assign(self, epoch: int, start_offset: int) -> bool:
        epochs, offsets = self._epochs, self._offsets
        if epochs and epochs[-1] == epoch and offsets[-1] <= start_offset:
            return False
        while epochs and (epochs[-1] >= epoch or offsets[-1] >= start_offset):
            epochs.pop()
            offsets.pop()
        epochs.append(epoch)
        offsets.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after ``end_offset`` (log truncation)."""
        offsets = self._offsets
        if end_offset < 0 or not offsets or offsets[-1] < end_offset:
            return
        keep = bisect_left(offsets, end_offset)
        del self._epochs[keep:], offsets[keep:]
        self.dirty = True

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly below ``start_offset``; the epoch holding it now starts
        there (the log start moved up). Entries at or after it stay."""
        offsets = self._offsets
        if start_offset < 0 or not offsets or offsets[0] > start_offset:
            return
        last_at_or_before = bisect_right(offsets, start_offset) - 1
        if last_at_or_before == 0 and offsets[0] == start_offset:
            return
        epoch = self._epochs[last_at_or_before]
        del self._epochs[:last_at_or_before], offsets[:last_at_or_before]
        self._epochs[0], offsets[0] = epoch, start_offset
        self.dirty = True

    def clear(self) -> None:
        self._epochs.clear()
        self._offsets.clear()
        self.dirty = True

    # -- persistence -----------------------------------------------------------------
    def write(self, *, sync: bool = True) -> None:
        """Write the checkpoint file atomically (temp file, rename)."""
        lines = [str(CHECKPOINT_VERSION), str(len(self._epochs))]
        lines += [f"{e} {o}" for e, o in zip(self._epochs, self._offsets, strict=True)]
        atomic_write(self.path, "\n".join(lines) + "\n", sync=sync)
        self.dirty = False
        self.on_disk = True
        self.durable = sync


def _parse_entry(line: str) -> tuple[int, int]:
    epoch, offset = line.split()
    return int(epoch), int(offset)
