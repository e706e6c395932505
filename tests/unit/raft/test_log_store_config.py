"""The in-memory RaftLog, offset/epoch validation, the quorum-state file and the configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moldau.raft import (
    ElectionState,
    FileQuorumStateStore,
    LeaderChange,
    OffsetAndEpoch,
    QuorumConfig,
    QuorumConfigError,
    VoterAddress,
    parse_voters,
)
from moldau.raft.log import ValidKind, truncation_offset, validate_offset_and_epoch
from moldau.raft.memory_log import MemoryRaftLog
from moldau.raft.store import QuorumStateFileError


def log_with(*epochs: int) -> MemoryRaftLog:
    """One record per given epoch, in order (offsets 0, 1, ...)."""
    log = MemoryRaftLog()
    for epoch in epochs:
        log.append_as_leader([f"e{epoch}".encode()], epoch)
    return log


def test_offset_and_epoch_order_by_epoch_first() -> None:
    assert OffsetAndEpoch(100, 1) < OffsetAndEpoch(1, 2)
    assert OffsetAndEpoch(1, 2) < OffsetAndEpoch(2, 2)
    assert OffsetAndEpoch(5, 3) >= OffsetAndEpoch(5, 3)


def test_end_offset_for_epoch_uses_the_epoch_cache() -> None:
    log = log_with(1, 1, 3, 3, 3, 5)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1), "largest epoch <= 2 is 1"
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(6, 5)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(6, 5)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    assert log.last_fetched_epoch == 5


def test_truncation_forgets_epochs_and_refuses_the_snapshotted_prefix() -> None:
    log = log_with(1, 2, 2, 3)
    log.truncate_to(2)
    assert log.log_end_offset == 2 and log.last_fetched_epoch == 2
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(2, 2)
    log.truncate_to(10)
    assert log.log_end_offset == 2
    writer = log.create_new_snapshot(OffsetAndEpoch(1, 1))
    assert writer is not None
    writer.append(b"image")
    writer.freeze()
    log.delete_before_snapshot(OffsetAndEpoch(1, 1))
    with pytest.raises(ValueError):
        log.truncate_to(0)


def test_snapshot_becomes_the_log_base() -> None:
    log = log_with(1, 1, 2, 2)
    snapshot_id = OffsetAndEpoch(3, 2)
    writer = log.create_new_snapshot(snapshot_id)
    assert writer is not None and log.create_new_snapshot(snapshot_id) is not None
    writer.append(b"ab")
    writer.append(b"c")
    writer.freeze()
    assert log.create_new_snapshot(snapshot_id) is None
    log.delete_before_snapshot(snapshot_id)
    assert (log.log_start_offset, log.log_end_offset) == (3, 4)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(4, 2)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(3, -1)
    snapshot = log.read_snapshot(snapshot_id)
    assert snapshot is not None and snapshot.slice(1, 5) == b"bc" and snapshot.size == 3
    with pytest.raises(ValueError):
        log.read(2, 100)


def test_truncate_to_latest_snapshot_only_when_it_is_ahead() -> None:
    log = log_with(1, 1)
    behind = log.create_new_snapshot(OffsetAndEpoch(1, 1))
    assert behind is not None
    behind.append(b"x")
    behind.freeze()
    assert not log.truncate_to_latest_snapshot()
    ahead = log.create_new_snapshot(OffsetAndEpoch(10, 4))
    assert ahead is not None
    ahead.append(b"y")
    ahead.freeze()
    assert log.truncate_to_latest_snapshot()
    assert (log.log_start_offset, log.log_end_offset, log.last_fetched_epoch) == (10, 10, 4)
    assert log.read_snapshot(OffsetAndEpoch(1, 1)) is None


def test_read_respects_max_bytes_and_max_offset_but_returns_one_record() -> None:
    log = MemoryRaftLog()
    log.append_as_leader([b"x" * 100, b"y" * 100, b"z"], 1)
    assert [e.offset for e in log.read(0, 10)] == [0]  # type: ignore[attr-defined]
    assert [e.offset for e in log.read(0, 1000)] == [0, 1, 2]  # type: ignore[attr-defined]
    assert [e.offset for e in log.read(0, 1000, max_offset=2)] == [0, 1]  # type: ignore[attr-defined]
    assert log.read(3, 1000) == ()
    info = log.append_leader_change(LeaderChange(1, (1,), (1,)), 2)
    assert (info.first_offset, info.last_offset) == (3, 3)
    with pytest.raises(ValueError):
        log.append_as_leader([b"old epoch"], 1)


@pytest.mark.parametrize(
    ("offset", "epoch", "kind", "position"),
    [
        (0, 0, ValidKind.VALID, OffsetAndEpoch(0, 0)),
        (3, 2, ValidKind.VALID, OffsetAndEpoch(3, 2)),
        (5, 2, ValidKind.DIVERGING, OffsetAndEpoch(3, 2)),  # our epoch 2 ends at 3
        (4, 3, ValidKind.DIVERGING, OffsetAndEpoch(3, 2)),  # we never had epoch 3
        (2, 1, ValidKind.DIVERGING, OffsetAndEpoch(1, 1)),
        (6, 4, ValidKind.VALID, OffsetAndEpoch(6, 4)),
    ],
)
def test_validate_offset_and_epoch(
    offset: int, epoch: int, kind: ValidKind, position: OffsetAndEpoch
) -> None:
    log = log_with(1, 2, 2, 4, 4, 4)
    valid = validate_offset_and_epoch(log, offset, epoch)
    assert (valid.kind, valid.offset_and_epoch) == (kind, position)


def test_validate_sends_a_snapshot_behind_the_log_start() -> None:
    log = log_with(1, 1, 2, 2)
    writer = log.create_new_snapshot(OffsetAndEpoch(2, 1))
    assert writer is not None
    writer.append(b"s")
    writer.freeze()
    log.delete_before_snapshot(OffsetAndEpoch(2, 1))
    for offset, epoch in [(1, 1), (2, 0), (3, 0), (0, 0)]:
        valid = validate_offset_and_epoch(log, offset, epoch)
        assert valid.kind is ValidKind.SNAPSHOT and valid.offset_and_epoch == OffsetAndEpoch(2, 1)
    assert validate_offset_and_epoch(log, 2, 1).kind is ValidKind.VALID


def test_truncation_offset_follows_kafka() -> None:
    follower = log_with(1, 1, 2, 2, 2)
    assert truncation_offset(follower, OffsetAndEpoch(3, 2)) == 3
    assert truncation_offset(follower, OffsetAndEpoch(9, 2)) == 5
    assert truncation_offset(follower, OffsetAndEpoch(4, 1)) == 2
    assert truncation_offset(follower, OffsetAndEpoch(7, 0)) == 5
    assert truncation_offset(log_with(1, 3), OffsetAndEpoch(6, 2)) == 1


def test_quorum_state_file_uses_kafkas_format_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    store = FileQuorumStateStore(path, frozenset({1, 2, 3}))
    assert store.read() is None
    store.write(ElectionState(7, 2, None))
    data = json.loads(path.read_text())
    assert data == {
        "clusterId": "",
        "leaderId": 2,
        "leaderEpoch": 7,
        "votedId": -1,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
        "data_version": 0,
    }
    assert store.read() == ElectionState(7, 2, None)
    store.write(ElectionState(8, None, 3))
    assert FileQuorumStateStore(path, frozenset({1, 2, 3})).read() == ElectionState(8, None, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quorum-state"]


def test_quorum_state_file_reads_kafka_version_1(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    path.write_text(
        '{"leaderId":-1,"leaderEpoch":3,"votedId":2,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    )
    assert FileQuorumStateStore(path, frozenset({1, 2})).read() == ElectionState(3, None, 2)


@pytest.mark.parametrize(
    "content", ["", "not json", '{"leaderEpoch":1}', '{"data_version":9,"leaderId":1}']
)
def test_corrupt_quorum_state_file_is_a_clear_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "quorum-state"
    path.write_text(content)
    with pytest.raises(QuorumStateFileError, match="quorum-state"):
        FileQuorumStateStore(path, frozenset({1})).read()


def test_quorum_config_has_kafkas_names_and_defaults() -> None:
    config = QuorumConfig.from_props({"controller.quorum.voters": "1@127.0.0.1:9093,2@[::1]:9094"})
    assert config.voters == {1: VoterAddress("127.0.0.1", 9093), 2: VoterAddress("::1", 9094)}
    assert (
        config.election_timeout_ms,
        config.fetch_timeout_ms,
        config.election_backoff_max_ms,
        config.request_timeout_ms,
        config.retry_backoff_ms,
    ) == (1000, 2000, 1000, 2000, 20)
    tuned = QuorumConfig.from_props(
        {
            "controller.quorum.voters": "1@h:1",
            "controller.quorum.election.timeout.ms": "500",
            "controller.quorum.fetch.timeout.ms": "900",
            "controller.quorum.election.backoff.max.ms": "300",
            "controller.quorum.request.timeout.ms": "700",
            "controller.quorum.retry.backoff.ms": "5",
        }
    )
    assert (tuned.election_timeout_ms, tuned.fetch_timeout_ms, tuned.election_backoff_max_ms) == (
        500,
        900,
        300,
    )
    assert (tuned.request_timeout_ms, tuned.retry_backoff_ms) == (700, 5)


@pytest.mark.parametrize("voters", ["1@host", "x@h:1", "1@h:99999", "1@h:1,1@h:2", "@h:1", "1@:9"])
def test_bad_voters_are_refused(voters: str) -> None:
    with pytest.raises(QuorumConfigError, match="controller.quorum.voters"):
        parse_voters(voters)


def test_bad_timeouts_are_refused() -> None:
    with pytest.raises(QuorumConfigError):
        QuorumConfig.from_props({"controller.quorum.election.timeout.ms": "soon"})
    with pytest.raises(QuorumConfigError):
        QuorumConfig(election_timeout_ms=0)


def test_downloaded_snapshot_replaces_a_diverged_log_with_a_higher_epoch() -> None:
    """A replica holding an uncommitted record of a later epoch than the snapshot's last one
    (Raft's figure 8) still restarts its log at the snapshot."""
    log = log_with(1, 7)
    writer = log.create_new_snapshot(OffsetAndEpoch(5, 3))
    assert writer is not None
    writer.append(b"image")
    writer.freeze()
    assert log.truncate_to_latest_snapshot()
    assert (log.log_start_offset, log.log_end_offset, log.last_fetched_epoch) == (5, 5, 3)
