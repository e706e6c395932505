"""The file-backed RaftLog: the same answers as the in-memory log the core was proven on,
Kafka's files on disk, and what it finds when it opens again (reopen, crash leftovers,
a quorum-of-one log of earlier releases)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from moldau.config.topic import LogConfig
from moldau.metadata.records import MetadataRecord, TopicRecord, decode_record, encode_record
from moldau.raft import LeaderChange, OffsetAndEpoch, QuorumConfigError
from moldau.raft.config import MetadataLogConfig
from moldau.raft.file_log import (
    FileRaftLog,
    InconsistentLogError,
    parse_snapshot_name,
    snapshot_file_stem,
)
from moldau.raft.log import ValidKind, truncation_offset, validate_offset_and_epoch
from moldau.raft.memory_log import MemoryRaftLog
from moldau.raft.records import Batches, ControlRecordType, control_type, decode_leader_change
from moldau.records.batch import scan_batches
from moldau.records.record import build_batch, decode_all
from moldau.storage.unified_log import UnifiedLog

SMALL = MetadataLogConfig(segment_bytes=1024)
AnyLog = MemoryRaftLog | FileRaftLog


@pytest.fixture(params=["memory", "file"])
def new_log(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], AnyLog]:
    """Both RaftLogs, to check the file log answers as the in-memory one does."""

    def make() -> AnyLog:
        if request.param == "memory":
            return MemoryRaftLog()
        return FileRaftLog.open(tmp_path / "__cluster_metadata-0", SMALL)

    return make


def fill(log: AnyLog, *epochs: int) -> AnyLog:
    """One record per given epoch, in order (offsets 0, 1, ...)."""
    for epoch in epochs:
        log.append_as_leader([f"e{epoch}".encode()], epoch)
    return log


def snapshot(log: AnyLog, snapshot_id: OffsetAndEpoch, data: bytes = b"image") -> None:
    writer = log.create_new_snapshot(snapshot_id)
    assert writer is not None
    writer.append(data)
    writer.freeze()


def offsets(records: object) -> list[int]:
    if isinstance(records, Batches):
        return [o for info in records.infos for o in range(info.base_offset, info.next_offset)]
    assert isinstance(records, tuple)
    return [entry.offset for entry in records]


# ---------------------------------------------------------------------- same as the memory log


def test_end_offset_for_epoch(new_log: Callable[[], AnyLog]) -> None:
    log = fill(new_log(), 1, 1, 3, 3, 3, 5)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(6, 5)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(6, 5)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    assert log.last_fetched_epoch == 5


def test_truncation_forgets_epochs_and_refuses_the_snapshotted_prefix(
    new_log: Callable[[], AnyLog],
) -> None:
    log = fill(new_log(), 1, 2, 2, 3)
    log.truncate_to(2)
    assert log.log_end_offset == 2 and log.last_fetched_epoch == 2
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(2, 2)
    log.truncate_to(10)
    assert log.log_end_offset == 2
    snapshot(log, OffsetAndEpoch(1, 1))
    log.delete_before_snapshot(OffsetAndEpoch(1, 1))
    with pytest.raises(ValueError):
        log.truncate_to(0)
    with pytest.raises(ValueError):
        log.append_as_leader([b"old"], 1)


def test_snapshot_becomes_the_log_base(new_log: Callable[[], AnyLog]) -> None:
    log = fill(new_log(), 1, 1, 2, 2)
    snapshot_id = OffsetAndEpoch(3, 2)
    writer = log.create_new_snapshot(snapshot_id)
    assert writer is not None
    writer.append(b"ab")
    writer.append(b"c")
    writer.freeze()
    assert log.create_new_snapshot(snapshot_id) is None
    log.delete_before_snapshot(snapshot_id)
    assert (log.log_start_offset, log.log_end_offset) == (3, 4)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(4, 2)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(3, -1)
    stored = log.read_snapshot(snapshot_id)
    assert stored is not None and stored.slice(1, 5) == b"bc" and stored.size == 3
    with pytest.raises(ValueError):
        log.read(2, 100)
    assert offsets(log.read(3, 100)) == [3]


def test_truncate_to_latest_snapshot_only_when_it_is_ahead(new_log: Callable[[], AnyLog]) -> None:
    log = fill(new_log(), 1, 1)
    snapshot(log, OffsetAndEpoch(1, 1), b"x")
    assert not log.truncate_to_latest_snapshot()
    snapshot(log, OffsetAndEpoch(10, 4), b"y")
    assert log.truncate_to_latest_snapshot()
    assert (log.log_start_offset, log.log_end_offset, log.last_fetched_epoch) == (10, 10, 4)
    assert log.read_snapshot(OffsetAndEpoch(1, 1)) is None
    log.append_as_leader([b"next"], 5)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(10, 4)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(11, 5)


def test_a_downloaded_snapshot_replaces_a_diverged_log_of_a_later_epoch(
    new_log: Callable[[], AnyLog],
) -> None:
    log = fill(new_log(), 1, 7)
    snapshot(log, OffsetAndEpoch(5, 3))
    assert log.truncate_to_latest_snapshot()
    assert (log.log_start_offset, log.log_end_offset, log.last_fetched_epoch) == (5, 5, 3)


def test_read_bounds_but_returns_at_least_one_batch(new_log: Callable[[], AnyLog]) -> None:
    log = new_log()
    log.append_as_leader([b"x" * 100], 1)
    log.append_as_leader([b"y" * 100], 1)
    log.append_as_leader([b"z"], 1)
    assert offsets(log.read(0, 10)) == [0]
    assert offsets(log.read(0, 1000)) == [0, 1, 2]
    assert offsets(log.read(0, 1000, max_offset=2)) == [0, 1]
    assert offsets(log.read(3, 1000)) == []
    info = log.append_leader_change(LeaderChange(1, (1,), (1,)), 2)
    assert (info.first_offset, info.last_offset) == (3, 3)


@pytest.mark.parametrize(
    ("offset", "epoch", "kind", "position"),
    [
        (0, 0, ValidKind.VALID, OffsetAndEpoch(0, 0)),
        (3, 2, ValidKind.VALID, OffsetAndEpoch(3, 2)),
        (5, 2, ValidKind.DIVERGING, OffsetAndEpoch(3, 2)),
        (4, 3, ValidKind.DIVERGING, OffsetAndEpoch(3, 2)),
        (2, 1, ValidKind.DIVERGING, OffsetAndEpoch(1, 1)),
        (6, 4, ValidKind.VALID, OffsetAndEpoch(6, 4)),
    ],
)
def test_validate_offset_and_epoch(
    new_log: Callable[[], AnyLog],
    offset: int,
    epoch: int,
    kind: ValidKind,
    position: OffsetAndEpoch,
) -> None:
    log = fill(new_log(), 1, 2, 2, 4, 4, 4)
    valid = validate_offset_and_epoch(log, offset, epoch)
    assert (valid.kind, valid.offset_and_epoch) == (kind, position)


def test_truncation_offset_and_snapshot_answers(new_log: Callable[[], AnyLog]) -> None:
    follower = fill(new_log(), 1, 1, 2, 2, 2)
    assert truncation_offset(follower, OffsetAndEpoch(3, 2)) == 3
    assert truncation_offset(follower, OffsetAndEpoch(9, 2)) == 5
    assert truncation_offset(follower, OffsetAndEpoch(4, 1)) == 2
    assert truncation_offset(follower, OffsetAndEpoch(7, 0)) == 5
    snapshot(follower, OffsetAndEpoch(2, 1))
    follower.delete_before_snapshot(OffsetAndEpoch(2, 1))
    for offset, epoch in [(1, 1), (2, 0), (0, 0)]:
        valid = validate_offset_and_epoch(follower, offset, epoch)
        assert valid.kind is ValidKind.SNAPSHOT and valid.offset_and_epoch == OffsetAndEpoch(2, 1)
    assert validate_offset_and_epoch(follower, 2, 1).kind is ValidKind.VALID


# ---------------------------------------------------------------------- the file log's own


def metadata_dir(tmp_path: Path) -> Path:
    return tmp_path / "__cluster_metadata-0"


def test_batches_carry_the_leader_epoch_and_leader_change_is_a_control_record(
    tmp_path: Path,
) -> None:
    log = FileRaftLog.open(metadata_dir(tmp_path), SMALL)
    log.append_leader_change(LeaderChange(2, (1, 2, 3), (2, 3)), 4)
    log.append_as_leader([b"a", b"b"], 4)
    data = log.read(0, 1 << 20)
    decoded = decode_all(data.data)
    (change_info, (change,)), (info, records) = decoded
    assert change_info.is_control and change_info.partition_leader_epoch == 4
    assert control_type(change) == ControlRecordType.LEADER_CHANGE
    assert decode_leader_change(change) == LeaderChange(2, (1, 2, 3), (2, 3))
    assert not info.is_control and info.partition_leader_epoch == 4
    assert [(r.offset, r.key, r.value) for r in records] == [(1, None, b"a"), (2, None, b"b")]


def test_a_follower_copy_is_byte_for_byte_the_leaders(tmp_path: Path) -> None:
    leader = FileRaftLog.open(tmp_path / "a" / "__cluster_metadata-0", SMALL)
    follower = FileRaftLog.open(tmp_path / "b" / "__cluster_metadata-0", SMALL)
    leader.append_leader_change(LeaderChange(1, (1, 2), (1, 2)), 1)
    leader.append_as_leader([b"x"] * 3, 1)
    fetched = leader.read(0, 1 << 20)
    info = follower.append_as_follower(bytes(fetched.data))  # as it arrives off the wire
    assert info is not None and (info.first_offset, info.last_offset) == (0, 3)
    assert follower.read(0, 1 << 20).data == fetched.data
    assert follower.end_offset_for_epoch(1) == OffsetAndEpoch(4, 1)
    assert follower.append_as_follower(b"") is None
    with pytest.raises(ValueError):
        follower.append_as_follower(fetched)  # not at the log end
    damaged = bytearray(fetched.data)
    damaged[-1] ^= 0xFF
    with pytest.raises(Exception, match="CRC"):
        FileRaftLog.open(tmp_path / "c" / "__cluster_metadata-0").append_as_follower(damaged)


def test_snapshot_files_use_kafkas_names_and_are_renamed_when_frozen(tmp_path: Path) -> None:
    directory = metadata_dir(tmp_path)
    log = fill(FileRaftLog.open(directory, SMALL), 1, 1, 1)
    snapshot_id = OffsetAndEpoch(3, 1)
    writer = log.create_new_snapshot(snapshot_id)
    assert writer is not None
    writer.append(b"12345")
    assert sorted(p.name for p in directory.glob("*.checkpoint*")) == [
        "00000000000000000003-0000000001.checkpoint.part"
    ]
    assert log.latest_snapshot_id() is None, "invisible until frozen"
    writer.freeze()
    assert sorted(p.name for p in directory.glob("*.checkpoint*")) == [
        "00000000000000000003-0000000001.checkpoint"
    ]
    assert log.latest_snapshot_id() == snapshot_id
    assert (directory / "00000000000000000003-0000000001.checkpoint").read_bytes() == b"12345"
    assert snapshot_file_stem(OffsetAndEpoch(12, 345)) == "00000000000000000012-0000000345"
    assert parse_snapshot_name("00000000000000000012-0000000345.checkpoint.part") == (
        OffsetAndEpoch(12, 345),
        ".checkpoint.part",
    )
    assert parse_snapshot_name("00000000000000000012.log") is None
    assert parse_snapshot_name("0000000000000000001x-0000000345.checkpoint") is None


def test_reopen_keeps_records_epochs_and_snapshots(tmp_path: Path) -> None:
    directory = metadata_dir(tmp_path)
    log = fill(FileRaftLog.open(directory, SMALL), 1, 1, 2, 2, 3)
    snapshot(log, OffsetAndEpoch(3, 2), b"s3")
    before = log.read(0, 1 << 20).data
    log.close()
    again = FileRaftLog.open(directory, SMALL)
    assert (again.log_start_offset, again.log_end_offset) == (3, 5), (
        "the log restarts at its earliest snapshot"
    )
    assert again.last_fetched_epoch == 3
    assert again.end_offset_for_epoch(2) == OffsetAndEpoch(4, 2)
    assert again.end_offset_for_epoch(1) == OffsetAndEpoch(3, -1)
    assert again.read(3, 1 << 20).data == before[-len(again.read(3, 1 << 20).data) :]
    stored = again.read_snapshot(OffsetAndEpoch(3, 2))
    assert stored is not None and stored.slice(0, 10) == b"s3"


def test_cutting_the_log_deletes_old_segments_and_snapshots(tmp_path: Path) -> None:
    directory = metadata_dir(tmp_path)
    log = FileRaftLog.open(directory, SMALL)
    for i in range(40):
        log.append_as_leader([b"v" * 100], 1 + i // 20)
    segments_before = sorted(directory.glob("*.log"))
    assert len(segments_before) > 3
    first, second = OffsetAndEpoch(15, 1), OffsetAndEpoch(30, 2)
    snapshot(log, first)
    snapshot(log, second)
    log.delete_before_snapshot(first)
    assert log.log_start_offset == 15
    log.delete_before_snapshot(second)
    assert log.log_start_offset == 30 and log.earliest_snapshot_id() == second
    assert not (directory / (snapshot_file_stem(first) + ".checkpoint")).exists()
    remaining = sorted(directory.glob("*.log"))
    assert len(remaining) < len(segments_before)
    assert int(remaining[0].name.split(".")[0]) <= 30, "the segment holding the start stays"
    assert offsets(log.read(30, 1 << 20)) == list(range(30, 40))
    log.close()
    again = FileRaftLog.open(directory, SMALL)
    assert (again.log_start_offset, again.log_end_offset, again.last_fetched_epoch) == (30, 40, 2)


def test_crash_leftovers_are_cleaned_on_open(tmp_path: Path) -> None:
    directory = metadata_dir(tmp_path)
    log = fill(FileRaftLog.open(directory, SMALL), 1, 1, 1)
    snapshot(log, OffsetAndEpoch(2, 1))
    log.close()
    (directory / "00000000000000000003-0000000001.checkpoint.part").write_bytes(b"half")
    (directory / "00000000000000000001-0000000001.checkpoint.deleted").write_bytes(b"old")
    segment = sorted(directory.glob("*.log"))[-1]
    with open(segment, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x01")  # a torn batch header
    again = FileRaftLog.open(directory, SMALL)
    assert sorted(p.name for p in directory.glob("*.checkpoint*")) == [
        "00000000000000000002-0000000001.checkpoint"
    ]
    assert again.log_end_offset == 3, "the torn tail is cut, whole batches stay"
    again.append_as_leader([b"after"], 1)
    assert offsets(again.read(2, 1 << 20)) == [2, 3]


def test_a_snapshot_downloaded_before_a_crash_replaces_the_log_on_open(tmp_path: Path) -> None:
    """The follower froze the leader's snapshot but crashed before truncating its log."""
    directory = metadata_dir(tmp_path)
    log = fill(FileRaftLog.open(directory, SMALL), 1, 1)
    snapshot(log, OffsetAndEpoch(50, 3))
    log.close()
    again = FileRaftLog.open(directory, SMALL)
    assert (again.log_start_offset, again.log_end_offset, again.last_fetched_epoch) == (50, 50, 3)
    assert again.latest_snapshot_id() == OffsetAndEpoch(50, 3)


def test_a_log_cut_without_a_snapshot_is_refused(tmp_path: Path) -> None:
    directory = metadata_dir(tmp_path)
    log = FileRaftLog.open(directory, SMALL)
    for _ in range(40):
        log.append_as_leader([b"v" * 100], 1)
    snapshot(log, OffsetAndEpoch(30, 1))
    log.delete_before_snapshot(OffsetAndEpoch(30, 1))
    log.close()
    assert not (directory / "00000000000000000000.log").exists()
    for path in directory.glob("*.checkpoint"):
        path.unlink()
    with pytest.raises(InconsistentLogError, match="no snapshot covers"):
        FileRaftLog.open(directory, SMALL)


def write_quorum_of_one_log(
    directory: Path, batches: Sequence[Sequence[MetadataRecord | tuple[bytes | None, bytes]]]
) -> None:
    """The `__cluster_metadata-0` of a single node of earlier releases (their local
    metadata log): one epoch-0 batch per append, and no leader-epoch-checkpoint file.
    Records are given as metadata records or as raw (key, value) pairs."""
    log = UnifiedLog.open(directory, LogConfig(retention_ms=-1, retention_bytes=-1))
    for records in batches:
        batch = bytearray(
            build_batch([r if isinstance(r, tuple) else encode_record(r) for r in records])
        )
        log.append_as_leader(batch, scan_batches(batch, strict=False), leader_epoch=0)
    log.close()
    (directory / "leader-epoch-checkpoint").unlink(missing_ok=True)


def test_a_quorum_of_one_log_of_earlier_releases_opens_as_it_is(tmp_path: Path) -> None:
    topics = [TopicRecord(name=f"t{i}", topic_id=bytes([i]) * 16) for i in range(3)]
    write_quorum_of_one_log(metadata_dir(tmp_path), [topics[:2], topics[2:]])
    log = FileRaftLog.open(metadata_dir(tmp_path))
    assert (log.log_start_offset, log.log_end_offset, log.last_fetched_epoch) == (0, 3, 0)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(3, 0)
    assert validate_offset_and_epoch(log, 3, 0).kind is ValidKind.VALID
    data = log.read(0, 1 << 20)
    assert [decode_record(r.key, r.value) for _, rs in decode_all(data.data) for r in rs] == topics
    log.append_leader_change(LeaderChange(1, (1,), (1,)), 1)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(3, 0)
    assert log.last_fetched_epoch == 1


def test_metadata_log_config_has_kafkas_names_and_defaults() -> None:
    assert MetadataLogConfig.from_props({}) == MetadataLogConfig(1 << 30, 20 << 20)
    config = MetadataLogConfig.from_props(
        {
            "metadata.log.segment.bytes": "8388608",
            "metadata.log.max.record.bytes.between.snapshots": "1024",
        }
    )
    assert (config.segment_bytes, config.max_record_bytes_between_snapshots) == (8 << 20, 1024)
    with pytest.raises(QuorumConfigError, match="metadata.log.segment.bytes"):
        MetadataLogConfig.from_props({"metadata.log.segment.bytes": "big"})
    with pytest.raises(QuorumConfigError):
        MetadataLogConfig(segment_bytes=0)
