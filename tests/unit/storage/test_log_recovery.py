"""Crash recovery: unflushed, torn and garbage tails, and reopening after a crash."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from storage_helpers import append, batch

from moldau.config.topic import LogConfig
from moldau.storage.unified_log import UnifiedLog

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=200, file_delete_delay_ms=0)


def fill(log: UnifiedLog, count: int, start_tag: int = 0) -> list[bytes]:
    out = []
    for i in range(start_tag, start_tag + count):
        data = batch(2, value_size=30 + i % 40, tag=i, timestamp=50_000 + i)
        append(log, data)
        out.append(bytes(data))
    return out


def crash_copy(log: UnifiedLog, target: Path) -> Path:
    """The directory as a crash would leave it: files as written, indexes untrimmed and
    no clean close (the object is then dropped without close)."""
    shutil.copytree(log.dir, target)
    return target


def assert_intact(log: UnifiedLog, stored: list[bytes]) -> None:
    """Every batch comes back byte-identical and every offset is found via the index."""
    assert log.log_end_offset == 2 * len(stored)
    assert log.read_bytes(0, 1 << 30) == b"".join(stored)
    for offset in range(0, 2 * len(stored)):
        assert log.read_bytes(offset, 1) == stored[offset // 2], offset
    for segment in log.segments[:-1]:
        assert segment.offset_index.entries > 0


@pytest.mark.parametrize("recovery_point", [0, 100, 10**9])
def test_crash_without_close_recovers_everything_written(
    tmp_path: Path, recovery_point: int
) -> None:
    log = UnifiedLog.open(tmp_path / "live" / "t-0", CONFIG)
    stored = fill(log, 200)
    copy = crash_copy(log, tmp_path / "crash" / "t-0")
    del log  # dropped, never closed
    recovered = UnifiedLog.open(copy, CONFIG, recovery_point=recovery_point)
    assert_intact(recovered, stored)
    more = fill(recovered, 20, start_tag=200)
    assert_intact(recovered, stored + more)
    recovered.close()
    reopened = UnifiedLog.open(copy, CONFIG, clean_shutdown=True, recovery_point=10**9)
    assert_intact(reopened, stored + more)
    reopened.close()


def test_untrimmed_index_of_unrecovered_segment_is_usable(tmp_path: Path) -> None:
    """A crash after a flush: the active segment is below the recovery point and its index
    file is still preallocated with zeros."""
    log = UnifiedLog.open(tmp_path / "live" / "t-0", CONFIG)
    stored = fill(log, 60)
    log.flush()
    copy = crash_copy(log, tmp_path / "crash" / "t-0")
    active_index = copy / f"{log.segments[-1].base_offset:020d}.index"
    assert active_index.stat().st_size == CONFIG.segment_index_bytes
    recovered = UnifiedLog.open(
        copy, CONFIG, recovery_point=log.log_end_offset, clean_shutdown=True
    )
    assert_intact(recovered, stored)
    recovered.close()
    log.close()


@pytest.mark.parametrize("garbage", [b"\x00" * 100, os.urandom(5000), b"\xff" * 7])
def test_garbage_tail_is_truncated(tmp_path: Path, garbage: bytes) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    stored = fill(log, 150)
    active = log.segments[-1]
    good_size = active.size
    log.close()
    with open(active.path, "ab") as f:
        f.write(garbage)
    recovered = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    assert recovered.segments[-1].size == good_size
    assert os.path.getsize(recovered.segments[-1].path) == good_size
    assert_intact(recovered, stored)
    recovered.close()


@pytest.mark.parametrize("cut", [1, 12, 61, 70])
def test_partial_last_batch_is_truncated(tmp_path: Path, cut: int) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    stored = fill(log, 150)
    last = bytearray(batch(2, value_size=300, tag=999))
    append(log, last)
    path = log.segments[-1].path
    log.close()
    size = os.path.getsize(path)
    os.truncate(path, size - len(last) + cut)  # only the first ``cut`` bytes made it
    recovered = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    assert_intact(recovered, stored)
    assert append(recovered, batch(1, tag=5)).base_offset == 300
    recovered.close()


def test_corrupt_batch_in_older_segment_drops_everything_after_it(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    stored = fill(log, 150)
    victim = log.segments[2]
    keep = victim.base_offset // 2  # batches before the victim segment
    log.close()
    with open(victim.path, "r+b") as f:
        f.seek(100)  # inside the victim's first batch: CRC mismatch
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    recovered = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    assert recovered.log_end_offset == 2 * keep
    assert_intact(recovered, stored[:keep])
    recovered.close()


def test_lost_index_files_are_rebuilt(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    stored = fill(log, 150)
    log.close()
    for index in (tmp_path / "t-0").glob("*index"):
        index.unlink()
    recovered = UnifiedLog.open(tmp_path / "t-0", CONFIG, recovery_point=10**9, clean_shutdown=True)
    assert_intact(recovered, stored)
    recovered.close()


def test_stray_files_are_cleaned_up(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    stored = fill(log, 10)
    log.close()
    (tmp_path / "t-0" / "00000000000000000000.log.deleted").write_bytes(b"old")
    (tmp_path / "t-0" / "00000000000000009999.index").write_bytes(b"")
    (tmp_path / "t-0" / "00000000000000000020.snapshot.tmp").write_bytes(b"")
    recovered = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    names = {p.name for p in (tmp_path / "t-0").iterdir()}
    assert not any(
        n.endswith((".deleted", ".tmp")) or n.startswith("00000000000000009999") for n in names
    )
    assert_intact(recovered, stored)
    recovered.close()


def test_idempotent_state_survives_a_crash(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "live" / "t-0", CONFIG)
    fill(log, 100)  # rolls write producer snapshots
    for seq in range(0, 10, 2):
        append(log, batch(2, producer_id=7, producer_epoch=3, base_sequence=seq, tag=seq))
    copy = crash_copy(log, tmp_path / "crash" / "t-0")
    recovered = UnifiedLog.open(copy, CONFIG)
    retry = append(recovered, batch(2, producer_id=7, producer_epoch=3, base_sequence=8, tag=8))
    assert retry.duplicate and retry.base_offset == 208
    assert not append(
        recovered, batch(1, producer_id=7, producer_epoch=3, base_sequence=10)
    ).duplicate
    recovered.close()
    log.close()
