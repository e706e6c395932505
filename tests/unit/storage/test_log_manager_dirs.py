"""JBOD: placement over several log dirs, DescribeLogDirs' view, and moving a replica
between dirs through a future log (AlterReplicaLogDirs), including a restart mid-move."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import append, batch

from moldau.config.topic import LogConfig
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.alter_log_dirs import catch_up, parse_future_dir_name
from moldau.storage.log_manager import LogManager
from moldau.storage.unified_log import UnifiedLog

CONFIG = LogConfig(segment_bytes=4096)


def manager(root: Path) -> LogManager:
    return LogManager([root / "d1", root / "d2"], {})


def dirs_of(m: LogManager) -> dict[tuple[str, int], tuple[str, bool]]:
    return {
        r.topic_partition: (d.path.name, r.is_future) for d in m.describe_dirs() for r in d.replicas
    }


def content(log: UnifiedLog) -> bytes:
    return log.read_bytes(log.log_start_offset, 1 << 30)


def test_new_partitions_go_to_the_dir_with_the_fewest(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.create_logs([("a", p, CONFIG) for p in range(3)])
    m.create_logs([("b", p, CONFIG) for p in range(3)])
    placed = [d for d, _ in dirs_of(m).values()]
    assert sorted(placed) == ["d1", "d1", "d1", "d2", "d2", "d2"]
    described = {d.path.name: d for d in m.describe_dirs()}
    assert all(d.error is None and d.total_bytes >= d.usable_bytes > 0 for d in described.values())


def test_future_dir_names_are_kafkas() -> None:
    assert parse_future_dir_name("my-topic-3.0123abcd-future") == "my-topic-3"
    assert parse_future_dir_name("my-topic-3") is None
    assert parse_future_dir_name("my-topic-3.0123-delete") is None


def test_move_copies_follows_appends_and_swaps(tmp_path: Path) -> None:
    m = manager(tmp_path)
    (log,) = m.create_logs([("t", 0, CONFIG)])
    source = dirs_of(m)[("t", 0)][0]
    target = "d2" if source == "d1" else "d1"
    for i in range(40):
        append(log, batch(3, tag=i), leader_epoch=i // 10)
    m.alter_log_dir("t", 0, m.log_dir(str(tmp_path / target)))
    described = [
        (r.topic_partition, d.path.name, r.is_future) for d in m.describe_dirs() for r in d.replicas
    ]
    assert (("t", 0), target, True) in described and (("t", 0), source, False) in described
    assert m.copy_future_logs()[0] == [("t", 0)]
    for i in range(40, 45):  # appends after the copy step: the swap copies them first
        append(log, batch(2, tag=i), leader_epoch=5)
    expected = content(log)
    assert m.replace_current_with_future(("t", 0))
    moved = m.get_log("t", 0)
    assert moved is not None and moved is not log
    assert dirs_of(m) == {("t", 0): (target, False)}
    assert content(moved) == expected
    assert moved.epoch_cache.entries == log.epoch_cache.entries
    assert not (tmp_path / source / "t-0").exists()
    append(moved, batch(1, tag=99), leader_epoch=6)
    m.shutdown()
    again = manager(tmp_path)
    again.load_logs()
    assert dirs_of(again) == {("t", 0): (target, False)}
    reopened = again.get_log("t", 0)
    assert reopened is not None and reopened.log_end_offset == 40 * 3 + 5 * 2 + 1


def test_restart_resumes_a_move_and_promotes_an_orphaned_future(tmp_path: Path) -> None:
    m = manager(tmp_path)
    logs = m.create_logs([("t", 0, CONFIG), ("t", 1, CONFIG)])
    for log in logs:
        for i in range(10):
            append(log, batch(2, tag=i))
    for p in (0, 1):
        target = "d2" if dirs_of(m)[("t", p)][0] == "d1" else "d1"
        m.alter_log_dir("t", p, m.log_dir(str(tmp_path / target)))
    m.copy_future_logs()
    expected = {p: content(log) for p, log in enumerate(logs)}
    m.shutdown()
    # A crash in the middle of t-1's swap: its current dir already renamed away.
    current = next(d for d in (tmp_path / "d1", tmp_path / "d2") if (d / "t-1").exists())
    (current / "t-1").rename(current / "t-1.0000-delete")
    again = manager(tmp_path)
    again.load_logs()
    assert again.moving == {("t", 0)}
    promoted = again.get_log("t", 1)
    assert promoted is not None and content(promoted) == expected[1]
    assert again.copy_future_logs()[0] == [("t", 0)]
    assert again.replace_current_with_future(("t", 0))
    moved = again.get_log("t", 0)
    assert moved is not None and content(moved) == expected[0]


def test_catch_up_follows_truncation_and_log_start(tmp_path: Path) -> None:
    current = UnifiedLog.open(tmp_path / "c", CONFIG)
    future = UnifiedLog.open(tmp_path / "f", CONFIG)
    for i in range(10):
        append(current, batch(2, tag=i), leader_epoch=1)
    assert catch_up(current, future)
    current.truncate_to(8)  # a follower that diverged from a new leader
    for i in range(3):
        append(current, batch(2, tag=50 + i), leader_epoch=2)
    while not catch_up(current, future):
        pass
    assert content(future) == content(current)
    current.truncate_fully_and_start_at(100)  # fell behind the leader's log start
    append(current, batch(2, tag=70), leader_epoch=3)
    while not catch_up(current, future):
        pass
    assert future.log_start_offset == 100 and content(future) == content(current)


def test_alter_errors(tmp_path: Path) -> None:
    m = manager(tmp_path)
    with pytest.raises(KafkaError) as raised:
        m.log_dir(str(tmp_path / "elsewhere"))
    assert raised.value.code == ErrorCode.LOG_DIR_NOT_FOUND
    with pytest.raises(KafkaError) as raised:
        m.alter_log_dir("later", 0, tmp_path / "d1")
    assert raised.value.code == ErrorCode.REPLICA_NOT_AVAILABLE
    # ... and the replica is created in the asked dir when it comes (d1 holds more).
    m.create_logs([("filler", 0, CONFIG)])
    assert dirs_of(m)[("filler", 0)] == ("d1", False)
    m.get_or_create_log("later", 0, CONFIG)
    assert dirs_of(m)[("later", 0)] == ("d1", False)


def test_a_dir_failing_a_checkpoint_goes_offline_and_the_other_serves(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.create_logs([("t", p, CONFIG) for p in range(4)])
    lost_dir = tmp_path / "d2"
    lost_dir.rename(tmp_path / "d2.gone")
    lost_dir.write_bytes(b"a file now")  # the dir is gone: writing there fails
    m.checkpoint()
    ((failed, reason),) = m.failures.take()
    assert failed == lost_dir and "Not a directory" in reason
    assert m.failures.take() == []  # reported once
    lost = m.fail_dir(failed, reason)
    assert sorted(lost) == [("t", 1), ("t", 3)]
    assert all(m.get_log(*tp) is None for tp in lost) and set(m.offline) == set(lost)
    described = {d.path.name: d for d in m.describe_dirs()}
    assert described["d2"].error == reason and described["d2"].replicas == []
    assert described["d1"].error is None and len(described["d1"].replicas) == 2
    (new,) = m.create_logs([("u", 0, CONFIG)])  # only the online dir takes partitions
    assert new.dir.parent == tmp_path / "d1"
    with pytest.raises(KafkaError) as raised:
        m.alter_log_dir("t", 0, lost_dir)
    assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    m.checkpoint()  # the healthy dir goes on
    assert m.failures.take() == []
    m.shutdown()
    again = manager(tmp_path)  # the dir is still a file at the restart: offline again
    again.load_logs()
    assert lost_dir in again.offline_dirs and sorted(again.logs) == [("t", 0), ("t", 2), ("u", 0)]


def test_a_future_log_is_not_promoted_while_a_dir_is_offline(tmp_path: Path) -> None:
    m = manager(tmp_path)
    (log,) = m.create_logs([("t", 0, CONFIG)])
    append(log, batch(2))
    source = log.dir.parent
    target = tmp_path / ("d2" if source.name == "d1" else "d1")
    m.alter_log_dir("t", 0, target)
    m.shutdown()
    source.rename(source.with_name(source.name + ".gone"))
    source.write_bytes(b"a file now")
    again = manager(tmp_path)
    again.load_logs()
    assert source in again.offline_dirs and again.logs == {} and again.moving == set()
    assert [p.name.endswith("-future") for p in target.iterdir() if p.is_dir()] == [True]
