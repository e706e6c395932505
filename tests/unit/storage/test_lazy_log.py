"""Logs registered at load and opened at their first use (``UnifiedLog.lazy``): they
answer as an eager open does, and a crash before or after their first use recovers."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from storage_helpers import append, batch

from moldau.records.record import Record, build_batch
from moldau.storage.checkpoint import read_checkpoint
from moldau.storage.log_loader import LoadedLog, LogLoader
from moldau.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    LogManager,
)
from moldau.storage.unified_log import UnifiedLog

PROPS = {"log.segment.bytes": "4096"}


def fill(log: UnifiedLog, count: int, *, leader_epoch: int = 0, tag: int = 0) -> list[bytes]:
    out = []
    for i in range(count):
        data = batch(2, value_size=40, tag=tag + i)
        append(log, data, leader_epoch=leader_epoch)
        out.append(bytes(data))
    return out


def idempotent(producer_id: int, sequence: int) -> bytearray:
    records = [Record(0, 1_000, b"k", b"v")]
    return bytearray(build_batch(records, producer_id=producer_id, base_sequence=sequence))


def shut_down_with_logs(path: Path) -> dict[tuple[str, int], list[bytes]]:
    """Logs of several shapes, then a clean shutdown; returns what each holds."""
    manager = LogManager([path], PROPS)
    config = manager.config_for({})
    stored = {}
    many = manager.get_or_create_log("many", 0, config)  # segments, two epochs, a moved start
    stored[("many", 0)] = fill(many, 60) + fill(many, 20, leader_epoch=3, tag=60)
    many.delete_records_before(61, many.log_end_offset)
    stored[("empty", 0)] = []
    manager.get_or_create_log("empty", 0, config)
    producer = manager.get_or_create_log("producer", 0, config)
    stored[("producer", 0)] = []
    for sequence in range(3):
        data = idempotent(7, sequence)
        append(producer, data)
        stored[("producer", 0)].append(bytes(data))
    manager.shutdown()
    return stored


def eager_open(path: Path, tp: tuple[str, int], config) -> UnifiedLog:
    """What the eager load did: the log opened from the dir's checkpoints, clean."""
    recovery = read_checkpoint(path / RECOVERY_POINT_CHECKPOINT)
    starts = read_checkpoint(path / LOG_START_OFFSET_CHECKPOINT)
    return UnifiedLog.open(
        path / f"{tp[0]}-{tp[1]}",
        config,
        recovery_point=recovery[tp],
        log_start_offset=starts[tp],
        clean_shutdown=True,
    )


def test_a_lazy_log_answers_as_an_eager_open(tmp_path: Path) -> None:
    stored = shut_down_with_logs(tmp_path / "lazy")
    shutil.copytree(tmp_path / "lazy", tmp_path / "eager")
    manager = LogManager([tmp_path / "lazy"], PROPS)
    manager.load_logs()
    config = manager.config_for({})
    for tp, batches in stored.items():
        log = manager.get_log(*tp)
        assert log is not None and not log.loaded
        eager = eager_open(tmp_path / "eager", tp, config)
        # from the checkpoints, before any file is opened
        assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (
            eager.log_start_offset,
            eager.log_end_offset,
            eager.recovery_point,
        ), tp
        assert not log.loaded
        # and the same once open
        start = eager.log_start_offset
        assert log.read_bytes(start, 1 << 30) == eager.read_bytes(start, 1 << 30), tp
        assert log.loaded
        assert log.epoch_cache.entries == eager.epoch_cache.entries
        assert log.producer_state.producers.keys() == eager.producer_state.producers.keys()
        assert (log.log_start_offset, log.log_end_offset) == (
            eager.log_start_offset,
            eager.log_end_offset,
        )
        assert log.read_bytes(log.log_start_offset, 1 << 30).endswith(b"".join(batches[-1:]))
        eager.close()
    many = manager.get_log("many", 0)
    assert many.log_start_offset == 61 and many.epoch_cache.entries[-1] == (3, 120)
    manager.shutdown()


def test_a_crash_after_lazy_open_recovers(tmp_path: Path) -> None:
    stored = shut_down_with_logs(tmp_path / "live")
    manager = LogManager([tmp_path / "live"], PROPS)
    manager.load_logs()
    many = manager.get_log("many", 0)
    stored[("many", 0)] += fill(many, 10, leader_epoch=5, tag=80)  # opens it
    assert many.loaded and many.log_end_offset == 180
    with open(many.active.path, "ab") as f:
        f.write(b"\0\0\0\0\0\0\0\7torn")  # half a batch: the crash cut a write
    shutil.copytree(tmp_path / "live", tmp_path / "crash")  # kill -9: no shutdown
    manager.shutdown()

    crashed = LogManager([tmp_path / "crash"], PROPS)
    crashed.load_logs()
    recovered = crashed.get_log("many", 0)
    assert not recovered.loaded
    assert recovered.log_end_offset == 180  # unknown after a crash: this opens (recovers) it
    assert recovered.loaded
    assert recovered.read_bytes(61, 1 << 30).endswith(b"".join(stored[("many", 0)][-10:]))
    assert recovered.epoch_cache.latest_epoch == 5
    untouched = crashed.get_log("producer", 0)
    assert not untouched.loaded
    crashed.shutdown()  # recovers nothing that was never used: the dir stays unclean
    assert not untouched.loaded
    assert not (tmp_path / "crash" / CLEAN_SHUTDOWN_FILE).exists()

    again = LogManager([tmp_path / "crash"], PROPS)
    again.load_logs()
    for tp, batches in stored.items():
        log = again.get_log(*tp)
        assert not log.loaded
        end = log.log_end_offset  # still owed: this recovers it
        assert log.loaded
        assert log.read_bytes(log.log_start_offset, 1 << 30).endswith(b"".join(batches[-1:]))
        assert log.log_end_offset == end
    assert again.get_log("producer", 0).producer_state.producers.keys() == {7}
    again.shutdown()  # every log is open: now the dir is marked clean
    assert (tmp_path / "crash" / CLEAN_SHUTDOWN_FILE).exists()

    last = LogManager([tmp_path / "crash"], PROPS)
    last.load_logs()
    for tp, batches in stored.items():
        log = last.get_log(*tp)
        end = log.log_end_offset
        assert not log.loaded  # known from the clean shutdown's checkpoints
        assert log.read_bytes(log.log_start_offset, 1 << 30).endswith(b"".join(batches[-1:]))
        assert log.log_end_offset == end
    last.shutdown()


def test_logs_written_after_a_crash_restart_survive_a_dir_left_unclean(tmp_path: Path) -> None:
    """kill -9, restart, writes to some logs, clean stop: a log never opened keeps the dir
    unclean, so the next start recovers every log of it, the written ones too, from the
    recovery point the stop checkpointed (their end): nothing written after the restart
    is lost, cut or duplicated, and an idempotent producer's retry is still recognised."""
    stored = shut_down_with_logs(tmp_path / "live")
    shutil.copytree(tmp_path / "live", tmp_path / "crash")
    (tmp_path / "crash" / CLEAN_SHUTDOWN_FILE).unlink()  # as if killed -9 after its writes
    restarted = LogManager([tmp_path / "crash"], PROPS)
    restarted.load_logs()
    many = restarted.get_log("many", 0)
    stored[("many", 0)] += fill(many, 40, leader_epoch=6, tag=200)  # rolls segments
    producer = restarted.get_log("producer", 0)
    for sequence in (3, 4):
        data = idempotent(7, sequence)
        append(producer, data)
        stored[("producer", 0)].append(bytes(data))
    ends = {tp: restarted.get_log(*tp).log_end_offset for tp in (("many", 0), ("producer", 0))}
    assert len(many.segments) > 1 and not restarted.get_log("empty", 0).loaded
    restarted.shutdown()
    assert not (tmp_path / "crash" / CLEAN_SHUTDOWN_FILE).exists()
    points = read_checkpoint(tmp_path / "crash" / RECOVERY_POINT_CHECKPOINT)
    assert {tp: points[tp] for tp in ends} == ends

    again = LogManager([tmp_path / "crash"], PROPS)
    again.load_logs()
    for tp, batches in stored.items():
        log = again.get_log(*tp)
        start = log.log_start_offset
        first = start // 2 if tp == ("many", 0) else 0  # its batches hold 2 records each
        assert log.read_bytes(start, 1 << 30) == b"".join(batches[first:]), tp
        assert log.log_end_offset == ends.get(tp, 0), tp
    assert again.get_log("many", 0).epoch_cache.entries[-1] == (6, ends[("many", 0)] - 80)
    retry = append(again.get_log("producer", 0), idempotent(7, 4))
    assert retry.duplicate and retry.base_offset == ends[("producer", 0)] - 1
    again.shutdown()
    assert (tmp_path / "crash" / CLEAN_SHUTDOWN_FILE).exists()


def test_first_uses_from_two_threads_open_once(tmp_path: Path, monkeypatch) -> None:
    shut_down_with_logs(tmp_path)
    opened: list[Path] = []
    real_load = LogLoader.load

    def counting(self: LogLoader) -> LoadedLog:
        opened.append(self.directory)
        return real_load(self)

    monkeypatch.setattr(LogLoader, "load", counting)
    manager = LogManager([tmp_path], PROPS)
    manager.load_logs()
    log = manager.get_log("many", 0)
    reads: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: reads.append(log.read_bytes(61, 1 << 30))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(reads)) == 1 and reads[0]
    assert opened == [tmp_path / "many-0"]
    manager.shutdown()


def test_periodic_passes_leave_unused_logs_unopened(tmp_path: Path) -> None:
    shut_down_with_logs(tmp_path)
    manager = LogManager([tmp_path], PROPS)
    manager.load_logs()
    manager.flush_due()
    manager.checkpoint()
    manager.expire_producers(10**13, 1)
    manager.run_cleaner({tp: log.log_end_offset for tp, log in manager.logs.items()})
    sizes = {tp: (log.size_bytes, log.segment_count) for tp, log in manager.logs.items()}
    assert not any(log.loaded for log in manager.logs.values())
    for tp, log in manager.logs.items():  # listed, not opened: the same as once open
        log.load()
        assert sizes[tp] == (log.size_bytes, len(log.segments)), tp
    assert read_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT)[("many", 0)] == 61
    manager.shutdown()


def test_a_shutdown_makes_index_files_only_for_segments_with_records(tmp_path: Path) -> None:
    """Closing an idle partition's log creates nothing (at 50,000 partitions most are
    idle), and a log without index files for its empty segment opens cleanly, as often
    as it is closed and opened again."""
    stored = shut_down_with_logs(tmp_path)
    for _ in range(2):
        for tp in stored:
            directory = tmp_path / f"{tp[0]}-{tp[1]}"
            for segment in directory.glob("*.log"):
                indexes = [segment.with_suffix(s).exists() for s in (".index", ".timeindex")]
                assert indexes == [segment.stat().st_size > 0] * 2, segment
        assert not list((tmp_path / "empty-0").glob("*index"))
        manager = LogManager([tmp_path], PROPS)
        manager.load_logs()
        for tp, batches in stored.items():
            log = manager.get_log(*tp)
            assert log is not None
            data = log.read_bytes(log.log_start_offset, 1 << 30)  # opens it
            assert log.loaded and data.endswith(b"".join(batches[-1:])), tp
            ends = {"many": 160, "empty": 0, "producer": 3}  # batches of 2, 0, 1 records
            assert log.log_end_offset == ends[tp[0]], tp
        manager.shutdown()
