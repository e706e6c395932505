"""LogManager: loading log dirs, checkpoints, clean shutdown, deletion and retention."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from storage_helpers import FakeClock, append, batch

from moldau.config.topic import LogConfig
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage import log_manager as log_manager_module
from moldau.storage.checkpoint import read_checkpoint
from moldau.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LogManager,
    parse_log_dir_name,
)
from moldau.storage.partition_metadata import PARTITION_METADATA, read_topic_id

PROPS = {"log.segment.bytes": "4096", "log.segment.delete.delay.ms": "0"}


def fill(log, count: int) -> list[bytes]:
    out = []
    for i in range(count):
        data = batch(2, value_size=40, tag=i, timestamp=1_000 + i)
        append(log, data)
        out.append(bytes(data))
    return out


def hws(manager: LogManager) -> dict:
    """A single replica's high watermarks: every log end offset."""
    return {tp: log.log_end_offset for tp, log in manager.logs.items()}


def test_parse_log_dir_name_splits_on_last_dash() -> None:
    assert parse_log_dir_name("my-topic-with-dashes-12") == ("my-topic-with-dashes", 12)
    assert parse_log_dir_name("orders-0") == ("orders", 0)
    assert parse_log_dir_name("orders-0.abc123-delete") is None
    assert parse_log_dir_name("orders") is None
    assert parse_log_dir_name("-3") is None


def test_clean_shutdown_round_trip(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, PROPS)
    config = manager.config_for({})
    assert config.segment_bytes == 4096
    stored = {}
    for tp in [("my-dashed-topic", 0), ("my-dashed-topic", 1), ("plain", 3)]:
        log = manager.get_or_create_log(*tp, config)
        assert manager.get_or_create_log(*tp, config) is log
        stored[tp] = fill(log, 80)
    assert {d for d in dirs if any(d.iterdir())} == set(dirs)  # spread over log dirs
    manager.get_log("plain", 3).delete_records_before(61, 160)
    manager.shutdown()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
    recovery = read_checkpoint(dirs[0] / "recovery-point-offset-checkpoint")
    recovery.update(read_checkpoint(dirs[1] / "recovery-point-offset-checkpoint"))
    assert recovery == {tp: 160 for tp in stored}

    reloaded = LogManager(dirs, PROPS)
    reloaded.load_logs(lambda topic: {"retention.ms": "5"} if topic == "plain" else {})
    assert set(reloaded.logs) == set(stored)
    for tp, batches in stored.items():
        log = reloaded.get_log(*tp)
        assert log.recovery_point == 160  # clean: nothing recovered
        assert log.read_bytes(log.log_start_offset, 1 << 30).endswith(batches[-1])
    assert reloaded.get_log("plain", 3).log_start_offset == 61
    assert reloaded.get_log("plain", 3).config.retention_ms == 5
    assert reloaded.get_log("my-dashed-topic", 0).read_bytes(0, 1 << 30) == b"".join(
        stored[("my-dashed-topic", 0)]
    )
    assert not (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()  # a crash from now on recovers
    reloaded.shutdown()


def test_after_shutdown_no_log_is_created_and_no_checkpoint_written(tmp_path: Path) -> None:
    """What a stop leaves stays: a partition hosted after the shutdown (an image committed
    during the stop) must not take its own log dir for a leftover and remove it, nor a
    late periodic checkpoint overwrite the shutdown's (the next start trusts them)."""
    manager = LogManager([tmp_path], PROPS)
    config = manager.config_for({})
    stored = fill(manager.get_or_create_log("t", 0, config), 10)
    manager.shutdown()
    checkpoints = {
        name: (tmp_path / name).read_bytes()
        for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint")
    }
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("t", 0): 20}

    with pytest.raises(KafkaError) as raised:
        manager.get_or_create_log("t", 0, config)
    assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    manager.checkpoint()  # the periodic passes, late
    manager.write_replication_checkpoint({("t", 0): 20})
    for name, data in checkpoints.items():
        assert (tmp_path / name).read_bytes() == data
    assert not (tmp_path / "replication-offset-checkpoint").exists()

    reloaded = LogManager([tmp_path], PROPS)
    reloaded.load_logs()
    assert reloaded.get_log("t", 0).read_bytes(0, 1 << 30) == b"".join(stored)
    reloaded.shutdown()


def test_crash_recovers_from_checkpoint(tmp_path: Path) -> None:
    manager = LogManager([tmp_path / "live"], PROPS)
    log = manager.get_or_create_log("t", 0, manager.config_for({}))
    stored = fill(log, 50)
    log.flush(40)
    manager.checkpoint()
    stored += fill(log, 30)
    shutil.copytree(tmp_path / "live", tmp_path / "crash")  # no shutdown
    crashed = LogManager([tmp_path / "crash"], PROPS)
    crashed.load_logs()
    recovered = crashed.get_log("t", 0)
    assert recovered.read_bytes(0, 1 << 30) == b"".join(stored)
    assert recovered.recovery_point == 40
    crashed.shutdown()
    manager.shutdown()


def test_delete_log_renames_then_removes_after_delay(tmp_path: Path) -> None:
    clock = FakeClock(0)
    manager = LogManager([tmp_path], {"log.segment.delete.delay.ms": "1000"}, clock=clock)
    log = manager.get_or_create_log("doomed-topic", 0, manager.config_for({}))
    fill(log, 10)
    reader = log.read(0, 1 << 30)
    manager.delete_log("doomed-topic", 0)
    assert manager.get_log("doomed-topic", 0) is None
    (renamed,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert renamed.name.startswith("doomed-topic-0.") and renamed.name.endswith("-delete")
    assert reader.to_bytes()  # in-flight reads still work
    manager.run_retention({}, 999)
    assert renamed.exists()
    manager.run_retention({}, 1000)
    assert not renamed.exists()
    manager.shutdown()


def test_leftover_delete_dirs_are_removed_and_metadata_log_skipped(tmp_path: Path) -> None:
    (tmp_path / "t-0.0123abc-delete").mkdir()
    (tmp_path / "__cluster_metadata-0").mkdir()
    manager = LogManager([tmp_path], PROPS)
    manager.load_logs()
    assert not (tmp_path / "t-0.0123abc-delete").exists()
    assert manager.logs == {}
    assert not any((tmp_path / "__cluster_metadata-0").iterdir())


def test_run_retention_and_flush_due(tmp_path: Path) -> None:
    props = {**PROPS, "log.retention.bytes": "5000", "log.flush.interval.ms": "10"}
    manager = LogManager([tmp_path], props)
    log = manager.get_or_create_log("t", 0, manager.config_for({}))
    fill(log, 100)
    assert manager.run_retention(hws(manager), 10**12) > 0
    start = log.log_start_offset
    assert start > 0
    assert read_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("t", 0): start}
    manager.flush_due(10**15)
    assert log.recovery_point == log.log_end_offset
    manager.update_config("t", LogConfig(retention_bytes=-1))
    assert log.config.retention_bytes == -1
    manager.shutdown()


def test_logs_are_matched_to_their_topic_by_id(tmp_path: Path) -> None:
    """partition.metadata tells a topic's log from the log of an earlier or later topic of
    the same name: only the right topic id hosts or deletes it."""
    old, new = b"\x01" * 16, b"\x02" * 16
    manager = LogManager([tmp_path], PROPS)
    config = manager.config_for({})
    log = manager.get_or_create_log("t", 0, config, new)
    fill(log, 3)
    assert (log.dir / PARTITION_METADATA).read_text() == (
        "version: 0\ntopic_id: AgICAgICAgICAgICAgICAg\n"
    )
    manager.shutdown()

    manager = LogManager([tmp_path], PROPS)
    manager.load_logs()
    with pytest.raises(KafkaError) as refused:
        manager.get_or_create_log("t", 0, config, old)
    assert refused.value.code == ErrorCode.INCONSISTENT_TOPIC_ID
    manager.delete_log("t", 0, old)
    kept = manager.get_log("t", 0)
    assert kept is not None and kept.log_end_offset == 6
    assert read_topic_id(kept.dir) == new
    manager.delete_log("t", 0, new)
    assert manager.get_log("t", 0) is None
    manager.shutdown()


def test_a_log_without_a_topic_id_adopts_the_first_one(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], PROPS)
    log = manager.get_or_create_log("t", 0, manager.config_for({}))
    assert read_topic_id(log.dir) is None
    assert manager.get_or_create_log("t", 0, manager.config_for({}), b"\x03" * 16) is log
    assert read_topic_id(log.dir) == b"\x03" * 16
    manager.shutdown()


def test_topic_ids_are_fsynced_off_the_request_path(tmp_path: Path, monkeypatch) -> None:
    manager = LogManager([tmp_path], PROPS)
    synced: list[Path] = []
    monkeypatch.setattr(log_manager_module, "sync_topic_id", synced.append)
    log = manager.get_or_create_log("t", 0, manager.config_for({}), b"\x01" * 16)
    assert read_topic_id(log.dir) == b"\x01" * 16 and synced == []
    manager.sync_topic_ids()  # what the broker runs in a worker thread
    assert synced == [log.dir]
    manager.sync_topic_ids()
    assert synced == [log.dir]  # once
    manager.shutdown()


@pytest.mark.parametrize("text", ["", "version: 0\ntopic_id: AQEBAQEBAQ", "topic_id: %%%"])
def test_a_partition_metadata_cut_short_holds_no_topic_id(tmp_path: Path, text: str) -> None:
    """What a machine crash before the fsync may leave: the log adopts the id again."""
    (tmp_path / PARTITION_METADATA).write_text(text)
    assert read_topic_id(tmp_path) is None
