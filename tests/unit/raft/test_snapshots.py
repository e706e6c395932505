"""Snapshots (KIP-630): creation, log cleaning, FetchSnapshot in chunks, and WE-25."""

from __future__ import annotations

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.raft import LoadSnapshot, MemoryQuorumStateStore, OffsetAndEpoch
from moldau.raft.memory_log import LogEntry, MemoryRaftLog
from moldau.raft.messages import FetchSnapshotRequest, FetchSnapshotResponse
from moldau.raft.state import Follower
from tests.unit.raft.quorum import Quorum


def write(q: Quorum, leader: int, count: int, prefix: str) -> None:
    for i in range(count):
        q.append(leader, f"{prefix}{i}".encode())
    q.replicate()


def test_snapshot_keeps_the_log_since_the_previous_snapshot() -> None:
    q = Quorum(3)
    q.elect(1)
    write(q, 1, 3, "a")
    first = q.snapshot(1)
    log = q[1].log
    assert first == OffsetAndEpoch(4, 1)
    assert log.latest_snapshot_id() == first and log.log_start_offset == 0
    write(q, 1, 3, "b")
    second = q.snapshot(1)
    assert log.latest_snapshot_id() == second
    assert log.log_start_offset == first.offset, "the log is cut at the previous snapshot"
    assert log.earliest_snapshot_id() == first


def test_snapshot_must_be_committed_and_applied() -> None:
    q = Quorum(3)
    q.elect(1)
    q.replicate()
    q.drop_all()
    q.append(1, b"uncommitted")
    with pytest.raises(ValueError):
        q[1].client.create_snapshot(OffsetAndEpoch(2, 1), b"x", q.now)
    with pytest.raises(ValueError):
        q[1].client.create_snapshot(OffsetAndEpoch(1, 7), b"x", q.now)


def chunks_to(q: Quorum, node_id: int) -> list[FetchSnapshotResponse]:
    return [
        m.out.message
        for m in q.delivered
        if m.destination == node_id and isinstance(m.out.message, FetchSnapshotResponse)
    ]


def test_fetch_below_the_log_start_gets_the_snapshot_id_and_loads_it_in_chunks() -> None:
    q = Quorum(3, fetch_max_bytes=8)
    q.elect(1)
    write(q, 1, 1, "a")
    q.stop(3)
    write(q, 1, 2, "b")
    q.snapshot(1)
    write(q, 1, 2, "c")
    snapshot_id = q.snapshot(1)
    leader_log = q[1].log
    assert leader_log.log_start_offset > q.stopped[3].log.log_end_offset
    snapshot = leader_log.read_snapshot(snapshot_id)
    assert snapshot is not None and snapshot.size > 8

    follower = q.restart(3)
    q.run_for(2000)
    chunks = chunks_to(q, 3)
    assert len(chunks) == -(-snapshot.size // 8)
    assert [c.position for c in chunks] == list(range(0, snapshot.size, 8))
    assert follower.log.read_snapshot(snapshot_id) == snapshot
    assert LoadSnapshot(snapshot_id) in follower.applied
    assert follower.log.log_start_offset == snapshot_id.offset
    assert follower.client.high_watermark == q[1].client.high_watermark
    write(q, 1, 1, "d")
    assert follower.data_values()[-1] == b"d0"


def test_fetch_snapshot_errors() -> None:
    q = Quorum(3)
    q.elect(1)
    write(q, 1, 2, "a")
    snapshot_id = q.snapshot(1)
    q.drop_all()

    def ask(snapshot: OffsetAndEpoch, position: int, epoch: int = 1) -> FetchSnapshotResponse:
        request = FetchSnapshotRequest("test", 2, 1 << 20, epoch, snapshot, position)
        reply = q[1].client.handle_request(2, 1, request, q.now).outbound[0].message
        assert isinstance(reply, FetchSnapshotResponse)
        return reply

    assert ask(OffsetAndEpoch(1, 1), 0).error_code == ErrorCode.SNAPSHOT_NOT_FOUND
    assert ask(snapshot_id, 10_000).error_code == ErrorCode.POSITION_OUT_OF_RANGE
    assert ask(snapshot_id, 0, epoch=0).error_code == ErrorCode.FENCED_LEADER_EPOCH
    whole = ask(snapshot_id, 0)
    assert whole.error_code == ErrorCode.NONE and whole.position == 0
    assert whole.unaligned_records == b"a0\na1" and whole.size == 5


def test_follower_restarts_the_download_when_the_snapshot_is_gone() -> None:
    q = Quorum(3, fetch_max_bytes=2)
    q.elect(1)
    write(q, 1, 2, "a")
    q.stop(3)
    q.snapshot(1)
    q.start(3, MemoryRaftLog(), MemoryQuorumStateStore())  # a brand-new replica
    while not chunks_to(q, 3):  # one message at a time, up to the first chunk
        if q.network:
            q.deliver(q.network.pop(0))
        else:
            q.advance(q.now + 5)
    state = q[3].client.state
    assert isinstance(state, Follower) and state.fetching_snapshot is not None
    # The leader replaces its snapshots before the replica's next chunk request arrives.
    held = q.take(lambda m: 3 in (m.source, m.destination))
    for prefix in ("b", "c"):
        q.append(1, f"{prefix}0".encode())
        q.run_for(600, lambda m: 3 not in (m.source, m.destination))
        q.snapshot(1)
    assert q[1].log.read_snapshot(state.fetching_snapshot.snapshot_id) is None
    q.network.extend(held)
    q.run_for(3000)
    assert any(c.error_code == ErrorCode.SNAPSHOT_NOT_FOUND for c in chunks_to(q, 3))
    assert q[3].log.latest_snapshot_id() == q[1].log.latest_snapshot_id()
    assert q[3].client.high_watermark == q[1].client.high_watermark


def test_we25_restarting_broker_with_a_recent_local_snapshot_continues_from_it() -> None:
    """WE-25, steps 1-2: the local snapshot X is still covered by the leader's log."""
    q = Quorum(3, observers=1)
    q.elect(1)
    q.run_for(1500)
    write(q, 1, 3, "a")
    q.run_for(1500)
    x = q.snapshot(4)
    q.nodes[4].applied.clear()
    broker = q.restart(4)
    write(q, 1, 2, "b")
    q.run_for(2000)
    assert broker.applied[0] == LoadSnapshot(x)
    entries = [e for e in broker.applied[1:] if isinstance(e, LogEntry)]
    assert entries[0].offset == x.offset
    assert [e.value for e in entries if isinstance(e.value, bytes)] == [b"b0", b"b1"]
    assert broker.log.read_snapshot(x) is not None and broker.log.latest_snapshot_id() == x


def test_we25_broker_behind_the_leaders_log_start_fetches_the_latest_snapshot() -> None:
    """WE-25, steps 3-5: X is below the leader's earliest offset, so it gets the snapshot id."""
    q = Quorum(3, observers=1, fetch_max_bytes=4)
    q.elect(1)
    q.run_for(1500)
    write(q, 1, 2, "a")
    q.run_for(1500)
    x = q.snapshot(4)
    q.stop(4)
    write(q, 1, 3, "b")
    q.snapshot(1)
    write(q, 1, 3, "c")
    latest = q.snapshot(1)
    assert q[1].log.log_start_offset > x.offset
    broker = q.restart(4)
    q.run_for(3000)
    assert LoadSnapshot(latest) in broker.applied
    assert LoadSnapshot(x) not in broker.applied
    assert broker.log.log_start_offset == latest.offset
    assert broker.client.high_watermark == q[1].client.high_watermark
    tail = broker.applied[broker.applied.index(LoadSnapshot(latest)) + 1 :]
    assert all(isinstance(e, LogEntry) and e.offset >= latest.offset for e in tail)


def test_we25_brand_new_broker_takes_the_snapshot_branch() -> None:
    """A new broker starts at offset 0, so it (nearly) always loads a snapshot first."""
    q = Quorum(3, observers=1)
    q.stop(4)
    q.elect(1)
    write(q, 1, 2, "a")
    snapshot_id = q.snapshot(1)
    assert q[1].log.log_start_offset == 0, "the log still starts at 0, yet a snapshot is sent"
    broker = q.start(4, MemoryRaftLog(), MemoryQuorumStateStore())
    q.run_for(3000)
    assert broker.applied[0] == LoadSnapshot(snapshot_id)
    snapshot = broker.log.read_snapshot(snapshot_id)
    assert snapshot is not None and snapshot.data == b"a0\na1"
    assert chunks_to(q, 4)
