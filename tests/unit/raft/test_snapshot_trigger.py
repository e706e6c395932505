"""SnapshotTrigger, driven step by step by a virtual clock: Kafka's two snapshot triggers
(committed bytes since the last snapshot; time since it, with new records)."""

from __future__ import annotations

from moldau.clock import ManualClock
from moldau.raft.snapshot_trigger import SnapshotTrigger

HOUR_MS = 3_600_000


def test_the_time_trigger_fires_an_interval_after_the_last_snapshot_given_new_records() -> None:
    clock = ManualClock(1_000)
    trigger = SnapshotTrigger(max_bytes=1 << 20, max_interval_ms=HOUR_MS, now_ms=clock.now_ms())
    clock.advance(2 * HOUR_MS)
    assert trigger.due(clock.now_ms()) is None, "nothing new committed: no snapshot"
    assert trigger.deadline_ms() is None
    trigger.published(100)
    assert trigger.deadline_ms() == 1_000 + HOUR_MS, "counted from the start"
    assert trigger.due(clock.now_ms()) == "time"
    trigger.reset(clock.now_ms())
    assert trigger.due(clock.now_ms()) is None
    trigger.published(100)
    clock.advance(HOUR_MS - 1)
    assert trigger.due(clock.now_ms()) is None
    clock.advance(1)
    assert trigger.due(clock.now_ms()) == "time"


def test_the_bytes_trigger_fires_before_the_interval() -> None:
    clock = ManualClock()
    trigger = SnapshotTrigger(max_bytes=1000, max_interval_ms=HOUR_MS, now_ms=clock.now_ms())
    trigger.published(999)
    assert trigger.due(clock.now_ms()) is None
    trigger.published(1)
    assert trigger.due(clock.now_ms()) == "bytes"


def test_an_interval_of_zero_turns_the_time_trigger_off() -> None:
    clock = ManualClock()
    trigger = SnapshotTrigger(max_bytes=1000, max_interval_ms=0, now_ms=clock.now_ms())
    trigger.published(10)
    clock.advance(100 * HOUR_MS)
    assert trigger.deadline_ms() is None
    assert trigger.due(clock.now_ms()) is None


def test_a_loaded_snapshot_restarts_both_counts() -> None:
    clock = ManualClock()
    trigger = SnapshotTrigger(max_bytes=1000, max_interval_ms=HOUR_MS, now_ms=clock.now_ms())
    trigger.published(900)
    clock.advance(HOUR_MS // 2)
    trigger.reset(clock.now_ms())
    trigger.published(900)
    clock.advance(HOUR_MS // 2)
    assert trigger.due(clock.now_ms()) is None
    assert trigger.deadline_ms() == HOUR_MS // 2 + HOUR_MS
