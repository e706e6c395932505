"""LogManager: capacity checks, all-or-nothing creation, strays, offline logs, HW checkpoint."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from storage_helpers import append, batch

from moldau.config.topic import LogConfig
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage import log_manager as log_manager_module
from moldau.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT
from moldau.storage.log_loader import LoadedLog, LogLoader
from moldau.storage.log_manager import LogManager
from moldau.storage.resources import DescriptorBudget, DiskSpace
from moldau.storage.unified_log import UnifiedLog

CONFIG = LogConfig(segment_bytes=4096)


def manager(path: Path, *, max_partitions: int = 1000) -> LogManager:
    return LogManager([path], {}, budget=DescriptorBudget(1024, 16, max_partitions))


def specs(topic: str, count: int) -> list[tuple[str, int, LogConfig]]:
    return [(topic, p, CONFIG) for p in range(count)]


def partition_dirs(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.is_dir())


def test_budget_derivation() -> None:
    assert DescriptorBudget.derive(20_000) == DescriptorBudget(20_000, 10_000, 100_000)
    assert DescriptorBudget.derive(256) == DescriptorBudget(256, 128, 1_280)
    assert DescriptorBudget.derive(20) == DescriptorBudget(20, 16, 320)
    assert DescriptorBudget.derive(10**7) == DescriptorBudget(10**7, 32_768, 327_680)
    assert DescriptorBudget.derive(1024, 100, 7) == DescriptorBudget(1024, 100, 7)


def test_partition_limit_is_a_policy_violation_and_creates_nothing(tmp_path: Path) -> None:
    m = manager(tmp_path, max_partitions=10)
    m.create_logs(specs("a", 6))
    with pytest.raises(KafkaError) as raised:
        m.create_logs(specs("b", 5))
    assert raised.value.code == ErrorCode.POLICY_VIOLATION
    assert "accepts at most 10" in str(raised.value)
    assert partition_dirs(tmp_path) == [f"a-{p}" for p in range(6)]
    m.create_logs(specs("b", 4))
    assert len(m.logs) == 10
    m.check_capacity(0)
    # Metadata already committed is honoured without the policy (e.g. on load).
    assert m.get_or_create_log("c", 0, CONFIG) is m.get_log("c", 0)


def test_short_disk_or_descriptors_are_storage_errors(tmp_path: Path, monkeypatch) -> None:
    m = manager(tmp_path)
    monkeypatch.setattr(
        log_manager_module.DiskSpace, "of", classmethod(lambda cls, p: DiskSpace(4 << 20, 10**6))
    )
    with pytest.raises(KafkaError) as raised:
        m.create_logs(specs("t", 3))
    assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "disk space" in str(raised.value)
    monkeypatch.setattr(
        log_manager_module.DiskSpace, "of", classmethod(lambda cls, p: DiskSpace(1 << 40, 20))
    )
    with pytest.raises(KafkaError, match="inodes"):
        m.create_logs(specs("t", 3))
    monkeypatch.undo()
    monkeypatch.setattr(log_manager_module, "open_descriptors", lambda: 10**6)
    with pytest.raises(KafkaError, match="out of file descriptors") as raised:
        m.create_logs(specs("t", 1))
    assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    monkeypatch.undo()
    monkeypatch.setattr(log_manager_module, "memory_maps", lambda: 10**9)
    with pytest.raises(KafkaError, match="memory maps"):
        m.create_logs(specs("t", 1))
    assert partition_dirs(tmp_path) == []


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EMFILE])
def test_a_failed_creation_leaves_no_half_made_partition(
    tmp_path: Path, monkeypatch, err: int
) -> None:
    m = manager(tmp_path)
    m.create_logs(specs("kept", 2))
    opened = 0
    real_open = UnifiedLog.open

    def failing(directory: Path, *args, **kwargs) -> UnifiedLog:
        nonlocal opened
        opened += 1
        if opened == 3:
            directory.mkdir()
            (directory / "00000000000000000000.log").write_bytes(b"")
            raise OSError(err, os.strerror(err))
        return real_open(directory, *args, **kwargs)

    monkeypatch.setattr(log_manager_module.UnifiedLog, "open", failing)
    with pytest.raises(KafkaError) as raised:
        m.create_logs(specs("new", 5))
    assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "cannot create" in str(raised.value)
    assert partition_dirs(tmp_path) == ["kept-0", "kept-1"]
    assert set(m.logs) == {("kept", 0), ("kept", 1)}
    monkeypatch.undo()
    m.create_logs(specs("new", 5))  # the same request works once the disk has room
    assert len(m.logs) == 7


def test_strays_are_deleted_and_unopenable_logs_fail_at_first_use(
    tmp_path: Path, monkeypatch
) -> None:
    m = manager(tmp_path)
    for tp in [("known", 0), ("known", 1), ("stray", 0), ("broken", 0)]:
        append(m.get_or_create_log(*tp, CONFIG), batch(3))
    m.shutdown()
    real_load = LogLoader.load

    def failing(self: LogLoader) -> LoadedLog:
        if self.directory.name == "broken-0":
            raise OSError(errno.EIO, "Input/output error")
        return real_load(self)

    monkeypatch.setattr(LogLoader, "load", failing)
    reloaded = manager(tmp_path)
    reloaded.load_logs(keep=lambda tp: tp[0] != "stray")
    assert set(reloaded.logs) == {("known", 0), ("known", 1), ("broken", 0)}
    assert "stray-0" not in partition_dirs(tmp_path)
    broken = reloaded.get_log("broken", 0)
    for _ in range(2):  # each use tries again
        with pytest.raises(KafkaError, match="broken-0: I/O error") as raised:
            broken.read(0, 1000)
        assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert reloaded.get_log("known", 1).read(0, 1000).next_offset == 3
    monkeypatch.undo()
    assert broken.read(0, 1000).next_offset == 3  # the disk is back


def test_replication_checkpoint_round_trip_per_log_dir(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = LogManager(dirs, {}, budget=DescriptorBudget(1024, 16, 100))
    m.create_logs(specs("t", 4))
    hws = {("t", p): 10 * p for p in range(4)}
    m.write_replication_checkpoint(hws)
    texts = [(d / REPLICATION_OFFSET_CHECKPOINT).read_text() for d in dirs]
    assert all(t.startswith("0\n2\n") for t in texts)  # two partitions per dir
    assert m.read_replication_checkpoint() == hws
    (dirs[1] / REPLICATION_OFFSET_CHECKPOINT).write_text("garbage")
    assert len(m.read_replication_checkpoint()) == 2  # unreadable: ignored, not fatal


def test_clean_restart_of_many_partitions_opens_files_only_when_used(tmp_path: Path) -> None:
    m = manager(tmp_path)
    for p in range(50):
        log = m.get_or_create_log("t", p, CONFIG)
        for i in range(20):
            append(log, batch(2, value_size=200, tag=i))
    assert all(len(log.segments) > 2 for log in m.logs.values())
    m.shutdown()
    reloaded = LogManager([tmp_path], {}, budget=DescriptorBudget(1024, 8, 100), recovery_threads=3)
    reloaded.load_logs()
    logs = reloaded.logs.values()
    # the checkpoints answer for a clean shutdown: no file opened
    assert all(log.log_end_offset == 40 and log.log_start_offset == 0 for log in logs)
    assert reloaded.caches.files.opened == 0 and not any(log.loaded for log in logs)
    assert all(len(log.segments) > 2 for log in logs)  # first use opens
    assert reloaded.caches.files.opened == 50  # each active segment's tail, nothing else
    assert all(not s.offset_index.loaded for log in logs for s in log.segments[:-1])
    assert all(log.log_end_offset == 40 for log in logs)


def test_raising_the_open_files_limit(tmp_path: Path) -> None:
    """In a child with a soft limit of 64: raised to the hard limit, and logged."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    script = textwrap.dedent(
        """
        import logging, resource, sys
        logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
        from moldau.storage.resources import raise_open_files_limit
        print(raise_open_files_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        """
    )

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))

    out = subprocess.run(
        [sys.executable, "-c", script],
        preexec_fn=low_limit,
        capture_output=True,
        text=True,
        check=True,
        env=os.environ,
    ).stdout.splitlines()
    assert out[0] == f"raised the open-files limit (RLIMIT_NOFILE) from 64 to {hard}"
    assert out[1] == f"{hard} {hard}"
