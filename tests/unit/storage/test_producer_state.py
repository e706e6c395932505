import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.protocol.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from moldau.records.batch import BatchInfo, scan_batches
from moldau.records.record import build_batch
from moldau.storage.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    CorruptSnapshotError,
    DuplicateBatch,
    ProducerStateManager,
    list_snapshots,
    snapshot_path,
)

INT32_MAX = 2**31 - 1


def batch(pid: int, epoch: int, seq: int, count: int = 1, *, control: bool = False) -> BatchInfo:
    (info,) = scan_batches(
        build_batch(
            [(b"k", b"v")] * count,
            base_timestamp=1_000,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=-1 if control else seq,
            is_control=control,
        ),
        strict=False,
    )
    return info


class Log:
    """Drives the manager like Log.append does: check, assign offsets, update."""

    def __init__(self) -> None:
        self.state = ProducerStateManager()
        self.end = 0
        self.appended: list[BatchInfo] = []

    def append(self, info: BatchInfo) -> DuplicateBatch | BatchInfo:
        duplicate = self.state.check(info)
        if duplicate is not None:
            return duplicate
        info.base_offset = self.end
        self.state.update(info, self.end, 10_000 + self.end)
        self.end = info.next_offset
        self.appended.append(info)
        return info


def test_non_idempotent_batches_are_not_tracked():
    log = Log()
    log.append(batch(-1, -1, -1, 3))
    assert log.state.check(batch(-1, -1, -1, 3)) is None
    assert log.state.producers == {}


def test_unknown_producer_may_start_anywhere():
    log = Log()
    assert log.state.check(batch(7, 0, 42)) is None


def test_in_sequence_batches_are_accepted():
    log = Log()
    for seq in (0, 2, 5):
        log.append(batch(7, 0, seq, count=3 if seq == 2 else 2))
    entry = log.state.producers[7]
    assert entry.last_seq == 6 and entry.last_offset == log.end - 1 == 6
    assert entry.last_timestamp == 10_005


def test_duplicates_of_the_last_five_batches_are_detected():
    log = Log()
    originals = [log.append(batch(7, 0, 2 * i, 2)) for i in range(NUM_BATCHES_TO_RETAIN + 1)]
    for original in originals[1:]:
        duplicate = log.state.check(batch(7, 0, original.base_sequence, 2))
        assert duplicate == DuplicateBatch(
            original.base_offset, original.last_offset, 10_000 + original.base_offset
        )
    assert log.end == 2 * len(originals)  # nothing was appended
    with pytest.raises(OutOfOrderSequenceError):  # sixth-newest is forgotten
        log.state.check(batch(7, 0, 0, 2))


def test_partial_overlap_is_not_a_duplicate():
    log = Log()
    log.append(batch(7, 0, 0, 3))
    with pytest.raises(OutOfOrderSequenceError):
        log.state.check(batch(7, 0, 0, 2))


@pytest.mark.parametrize(("seq", "count"), [(3, 1), (5, 1), (0, 2), (1, 3)])
def test_gaps_and_rewinds_raise(seq, count):
    log = Log()
    log.append(batch(7, 0, 0, 1))
    log.append(batch(7, 0, 1, 1))
    with pytest.raises(OutOfOrderSequenceError):
        log.state.check(batch(7, 0, seq, count))


def test_sequence_wraps_after_int32_max():
    log = Log()
    log.append(batch(7, 0, INT32_MAX - 1, 2))
    assert log.state.producers[7].last_seq == INT32_MAX
    assert log.state.check(batch(7, 0, 0)) is None
    log.append(batch(7, 0, 0))
    log.append(batch(7, 0, 1))


def test_epoch_rules():
    log = Log()
    log.append(batch(7, 3, 0, 2))
    with pytest.raises(InvalidProducerEpochError):
        log.state.check(batch(7, 2, 2))
    with pytest.raises(OutOfOrderSequenceError):
        log.state.check(batch(7, 4, 5))  # a new epoch starts at sequence 0
    log.append(batch(7, 4, 0))
    assert log.state.producers[7].producer_epoch == 4
    assert len(log.state.producers[7].batches) == 1
    with pytest.raises(InvalidProducerEpochError):  # retry from the fenced epoch
        log.state.check(batch(7, 3, 0, 2))


def test_control_batches_bump_epoch_without_sequences():
    log = Log()
    log.append(batch(7, 2, 0, 2))
    with pytest.raises(InvalidProducerEpochError):
        log.state.check(batch(7, 1, -1, control=True))
    assert log.state.check(batch(7, 2, -1, control=True)) is None
    log.append(batch(7, 3, -1, control=True))
    entry = log.state.producers[7]
    assert entry.producer_epoch == 3 and not entry.batches and entry.last_offset == 2
    assert log.state.check(batch(7, 3, 0)) is None
    with pytest.raises(OutOfOrderSequenceError):
        log.state.check(batch(7, 3, 3))


def test_remove_before_drops_producers_below_log_start():
    log = Log()
    log.append(batch(1, 0, 0, 3))
    log.append(batch(2, 0, 0, 3))
    log.state.remove_before(3)
    assert set(log.state.producers) == {2}
    log.state.remove_before(0)
    assert set(log.state.producers) == {2}


def test_remove_expired_drops_idle_producers():
    log = Log()
    log.append(batch(1, 0, 0, 3))  # last timestamp 10_000
    log.append(batch(2, 0, 0, 3))  # last timestamp 10_003
    log.state.remove_expired(now_ms=10_010, expiration_ms=8)
    assert set(log.state.producers) == {2}


def populated() -> Log:
    log = Log()
    for i in range(8):
        log.append(batch(1, 0, i, 1))
    log.append(batch(2, 5, 0, 4))
    log.append(batch(3, 0, 0, 1, control=True))
    return log


def test_snapshot_round_trip(tmp_path):
    log = populated()
    path = log.state.write_snapshot(tmp_path, log.end)
    assert path == snapshot_path(tmp_path, log.end)
    assert path.name == f"{log.end:020d}.snapshot"
    assert list_snapshots(tmp_path) == [(log.end, path)]
    loaded = ProducerStateManager()
    assert loaded.load_snapshot(path) == log.end
    assert loaded.producers == log.state.producers
    assert len(loaded.producers[1].batches) == NUM_BATCHES_TO_RETAIN


def test_list_snapshots_sorted_and_ignores_strays(tmp_path):
    state = ProducerStateManager()
    for offset in (30, 5, 100):
        state.write_snapshot(tmp_path, offset)
    (tmp_path / "junk.snapshot").write_bytes(b"")
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    assert [offset for offset, _ in list_snapshots(tmp_path)] == [5, 30, 100]


@pytest.mark.parametrize("damage", ["flip", "truncate", "version", "empty"])
def test_corrupt_snapshot_is_rejected(tmp_path, damage):
    log = populated()
    path = log.state.write_snapshot(tmp_path, log.end)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-3] ^= 0x40
    elif damage == "truncate":
        del data[-5:]
    elif damage == "version":
        data[1] = 9
    else:
        data.clear()
    path.write_bytes(data)
    state = ProducerStateManager()
    with pytest.raises(CorruptSnapshotError):
        state.load_snapshot(path)
    assert state.producers == {}


def test_replay_rebuilds_the_same_state(tmp_path):
    log = populated()
    rebuilt = ProducerStateManager()
    rebuilt.replay(log.appended)
    assert rebuilt.producers.keys() == log.state.producers.keys()
    for pid, entry in rebuilt.producers.items():
        live = log.state.producers[pid]
        assert (entry.producer_epoch, entry.last_offset) == (live.producer_epoch, live.last_offset)
        assert [
            (b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batches
        ] == [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in live.batches]


def test_snapshot_then_replay_tail(tmp_path):
    log = Log()
    for i in range(4):
        log.append(batch(1, 0, i))
    path = log.state.write_snapshot(tmp_path, log.end)
    for i in range(4, 9):
        log.append(batch(1, 0, i))
    recovered = ProducerStateManager()
    end = recovered.load_snapshot(path)
    recovered.replay(info for info in log.appended if info.base_offset >= end)
    assert recovered.check(batch(1, 0, 9)) is None
    assert recovered.check(batch(1, 0, 8)) == DuplicateBatch(8, 8, log.appended[8].max_timestamp)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5)), min_size=1, max_size=60))
def test_any_history_detects_exactly_the_recent_retries(appends):
    log = Log()
    history: dict[int, list[BatchInfo]] = {}
    next_seq: dict[int, int] = {}
    for pid, count in appends:
        info = log.append(batch(pid, 0, next_seq.get(pid, 0), count))
        next_seq[pid] = info.last_sequence + 1
        history.setdefault(pid, []).append(info)
    for pid, infos in history.items():
        for age, info in enumerate(reversed(infos)):
            retry = batch(pid, 0, info.base_sequence, info.record_count)
            if age < NUM_BATCHES_TO_RETAIN:
                found = log.state.check(retry)
                assert found == DuplicateBatch(
                    info.base_offset, info.last_offset, 10_000 + info.base_offset
                )
            else:
                with pytest.raises(OutOfOrderSequenceError):
                    log.state.check(retry)
        assert log.state.check(batch(pid, 0, next_seq[pid])) is None


@given(
    st.lists(
        st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1), st.integers(1, 9)),
        max_size=20,
        unique_by=lambda t: t[0],
    )
)
def test_snapshot_round_trip_any_state(tmp_path_factory, producers):
    log = Log()
    for pid, epoch, count in producers:
        log.append(batch(pid, epoch, 0, count))
    directory = tmp_path_factory.mktemp("snap")
    loaded = ProducerStateManager()
    assert loaded.load_snapshot(log.state.write_snapshot(directory, log.end)) == log.end
    assert loaded.producers == log.state.producers
