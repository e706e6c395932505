"""Leader-epoch cache: Kafka's LeaderEpochFileCache semantics and checkpoint format."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.protocol.errors import StorageError
from moldau.storage.epoch_cache import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochFileCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


@pytest.fixture
def cache(tmp_path: Path) -> LeaderEpochFileCache:
    return LeaderEpochFileCache(tmp_path / LEADER_EPOCH_CHECKPOINT)


def assign_all(cache: LeaderEpochFileCache, *entries: tuple[int, int]) -> None:
    for epoch, offset in entries:
        cache.assign(epoch, offset)


# -- assign ------------------------------------------------------------------------------
def test_first_assignment_and_latest_epoch(cache: LeaderEpochFileCache) -> None:
    assert cache.latest_epoch is None
    assert cache.assign(2, 10)
    assert cache.latest_epoch == 2 and cache.entries == [(2, 10)]
    assert cache.end_offset_for(2, 25) == (2, 25)  # the latest epoch ends at the LEO


def test_same_epoch_at_a_later_offset_changes_nothing(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 6)
    assert not cache.assign(2, 7)
    assert not cache.assign(2, 100)
    assert cache.entries == [(2, 6)]


def test_same_epoch_at_an_earlier_offset_moves_its_start(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 10)
    assert cache.assign(2, 9)
    assert cache.entries == [(2, 9)]


def test_newer_epoch_at_the_same_offset_replaces_the_older(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 9)
    cache.assign(3, 9)
    assert cache.entries == [(3, 9)]


def test_newer_epoch_at_an_earlier_offset_drops_the_conflict(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 6)
    cache.assign(3, 5)  # the last assignment wins
    assert cache.entries == [(3, 5)]


def test_older_epoch_after_newer_truncates_the_newer(cache: LeaderEpochFileCache) -> None:
    cache.assign(1, 5)
    cache.assign(2, 6)
    cache.assign(1, 7)  # a conflicting history: everything from epoch 1 on is replaced
    assert cache.entries == [(1, 7)]
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == UNDEFINED


def test_invalid_entries_are_refused(cache: LeaderEpochFileCache) -> None:
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(0, -1)


# -- end_offset_for ----------------------------------------------------------------------
def test_undefined_epoch_gives_undefined(cache: LeaderEpochFileCache) -> None:
    assign_all(cache, (2, 11), (3, 12))
    assert cache.end_offset_for(UNDEFINED_EPOCH, 0) == UNDEFINED
    assert cache.end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED


def test_empty_cache_gives_undefined(cache: LeaderEpochFileCache) -> None:
    assert cache.end_offset_for(0, 0) == UNDEFINED
    assert cache.end_offset_for(7, 0) == UNDEFINED


def test_epoch_below_every_cached_one_ends_where_the_first_starts(
    cache: LeaderEpochFileCache,
) -> None:
    assign_all(cache, (5, 11), (6, 12), (7, 13))
    assert cache.end_offset_for(4, 0) == (4, 11)


def test_unknown_epoch_between_cached_ones_answers_the_floor_epoch(
    cache: LeaderEpochFileCache,
) -> None:
    assign_all(cache, (0, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(1, 0) == (0, 13)
    assert cache.end_offset_for(2, 0) == (2, 17)
    assert cache.end_offset_for(3, 0) == (2, 17)
    assert cache.end_offset_for(4, 30) == (4, 30)


def test_epoch_above_the_latest_gives_undefined(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 100)
    assert cache.end_offset_for(3, 100) == UNDEFINED


def test_repeated_assignments_keep_the_first_offset_of_each_epoch(
    cache: LeaderEpochFileCache,
) -> None:
    assign_all(cache, (1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16))
    assert cache.end_offset_for(2, 17) == (2, 15)
    assert cache.end_offset_for(1, 17) == (1, 13)


def test_epoch_replaced_in_the_middle(cache: LeaderEpochFileCache) -> None:
    assign_all(cache, (5, 11), (6, 12), (7, 13))
    cache.assign(7, 12)  # epoch 7 really started at 12: epoch 6 never wrote anything
    assert cache.entries == [(5, 11), (7, 12)]
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)


def test_leaders_changing_many_times(cache: LeaderEpochFileCache) -> None:
    cache.assign(0, 0)
    cache.assign(1, 0)  # epoch 0 wrote nothing
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 0) == (1, 0)
    assert cache.end_offset_for(0, 0) == (0, 0)
    assert cache.end_offset_for(1, 5) == (1, 5)
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


# -- epoch_for_offset / previous_epoch ---------------------------------------------------
def test_epoch_for_offset(cache: LeaderEpochFileCache) -> None:
    assign_all(cache, (0, 10), (1, 20), (5, 30))
    assert cache.epoch_for_offset(25) == 1
    assert cache.epoch_for_offset(20) == 1
    assert cache.epoch_for_offset(30) == 5
    assert cache.epoch_for_offset(50) == 5
    assert cache.epoch_for_offset(5) is None


def test_previous_epoch(cache: LeaderEpochFileCache) -> None:
    assert cache.previous_epoch(2) is None
    assign_all(cache, (2, 10), (4, 15), (10, 20))
    assert cache.previous_epoch(2) is None
    assert cache.previous_epoch(4) == 2
    assert cache.previous_epoch(10) == 4
    cache.truncate_from_end(18)
    assert cache.previous_epoch(cache.latest_epoch) == 2


# -- truncation --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("end", "left"),
    [
        (8, [(2, 6)]),
        (9, [(2, 6), (3, 8)]),
        (11, [(2, 6), (3, 8)]),
        (12, [(2, 6), (3, 8), (4, 11)]),
        (6, []),
        (UNDEFINED_EPOCH_OFFSET, [(2, 6), (3, 8), (4, 11)]),
    ],
)
def test_truncate_from_end(cache: LeaderEpochFileCache, end: int, left: list) -> None:
    assign_all(cache, (2, 6), (3, 8), (4, 11))
    cache.truncate_from_end(end)
    assert cache.entries == left


@pytest.mark.parametrize(
    ("start", "left"),
    [
        (8, [(3, 8), (4, 11)]),
        (9, [(3, 9), (4, 11)]),
        (1, [(2, 6), (3, 8), (4, 11)]),
        (6, [(2, 6), (3, 8), (4, 11)]),
        (11, [(4, 11)]),
        (15, [(4, 15)]),
        (UNDEFINED_EPOCH_OFFSET, [(2, 6), (3, 8), (4, 11)]),
    ],
)
def test_truncate_from_start(cache: LeaderEpochFileCache, start: int, left: list) -> None:
    assign_all(cache, (2, 6), (3, 8), (4, 11))
    cache.truncate_from_start(start)
    assert cache.entries == left


def test_truncate_from_start_keeps_the_epoch_holding_the_new_start(
    cache: LeaderEpochFileCache,
) -> None:
    assign_all(cache, (0, 0), (1, 7), (2, 10))
    cache.truncate_from_start(5)
    assert cache.entries == [(0, 5), (1, 7), (2, 10)]


def test_truncating_an_empty_cache_does_nothing(cache: LeaderEpochFileCache) -> None:
    cache.truncate_from_start(7)
    cache.truncate_from_end(7)
    assert cache.entries == [] and not cache.dirty


def test_clear(cache: LeaderEpochFileCache) -> None:
    assign_all(cache, (2, 6), (3, 8))
    cache.clear()
    assert cache.entries == [] and cache.latest_epoch is None


# -- checkpoint file ---------------------------------------------------------------------
def test_checkpoint_is_kafkas_text_format_and_round_trips(
    cache: LeaderEpochFileCache, tmp_path: Path
) -> None:
    assign_all(cache, (2, 6), (3, 8), (4, 11))
    cache.truncate_from_end(11)
    cache.truncate_from_start(8)
    assert cache.dirty
    cache.write()
    assert not cache.dirty
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    assert path.read_text() == "0\n1\n3 8\n"
    loaded = LeaderEpochFileCache.load(path)
    assert loaded is not None and loaded.entries == [(3, 8)] and not loaded.dirty
    assert not list(tmp_path.glob("*.tmp"))


def test_missing_checkpoint_loads_as_none(tmp_path: Path) -> None:
    assert LeaderEpochFileCache.load(tmp_path / LEADER_EPOCH_CHECKPOINT) is None


@pytest.mark.parametrize("text", ["", "1\n0\n", "0\n2\n1 5\n", "0\n1\nx 5\n", "0\n1\n1\n"])
def test_malformed_checkpoint_is_a_storage_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text(text)
    with pytest.raises(StorageError):
        LeaderEpochFileCache.load(path)


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 200)), max_size=40))
def test_entries_stay_strictly_increasing(assignments: list[tuple[int, int]]) -> None:
    cache = LeaderEpochFileCache(Path("unused"))
    for epoch, offset in assignments:
        cache.assign(epoch, offset)
        entries = cache.entries
        assert entries[-1][0] == epoch
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:], strict=False))
