"""Partition replication state, step by step: the high watermark, the ISR, epochs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.metadata.image import PartitionImage
from moldau.protocol.errors import ErrorCode
from moldau.replication.partition import Partition, Role

LAG = 30_000
T0 = 1_700_000_000_000  # wall-clock ms, as the broker's clock gives


def reg(replicas=(1, 2, 3), isr=None, leader=1, epoch=0, partition_epoch=0) -> PartitionImage:
    return PartitionImage(
        0, tuple(replicas), tuple(isr or replicas), leader, epoch, partition_epoch
    )


def leader(replicas=(1, 2, 3), isr=None, leo=0, now=T0) -> Partition:
    p = Partition("t", 0, local_id=1, replica_lag_time_max_ms=LAG)
    p.make_leader(reg(replicas, isr), leo, now)
    return p


def test_single_replica_hw_follows_the_leader():
    p = leader(replicas=(1,))
    assert p.high_watermark == 0
    assert p.maybe_increment_high_watermark(5, 0)
    assert p.high_watermark == 5
    assert not p.maybe_increment_high_watermark(5, 0)


def test_hw_waits_for_every_isr_member():
    p = leader()
    assert not p.maybe_increment_high_watermark(10, T0)  # followers' LEOs are unknown
    assert not p.update_follower_fetch(2, 10, 0, 10, T0 + 1)
    assert p.high_watermark == 0
    assert p.update_follower_fetch(3, 7, 0, 10, T0 + 2)
    assert p.high_watermark == 7
    assert p.update_follower_fetch(3, 10, 0, 10, T0 + 3)
    assert p.high_watermark == 10


def test_hw_never_moves_backwards():
    p = leader()
    p.update_follower_fetch(2, 8, 0, 10, T0 + 1)
    p.update_follower_fetch(3, 8, 0, 10, T0 + 1)
    assert p.high_watermark == 8
    assert not p.update_follower_fetch(3, 4, 0, 10, T0 + 2)  # a truncated follower
    assert p.high_watermark == 8


def test_out_of_sync_replica_does_not_hold_back_the_hw_but_a_caught_up_one_does():
    p = leader(isr=(1, 2))
    p.update_follower_fetch(2, 10, 0, 10, T0 + 1)
    assert p.high_watermark == 10  # replica 3 never caught up: it does not count
    p.update_follower_fetch(3, 12, 0, 12, T0 + 2)  # now it is caught up (not yet in ISR)
    p.update_follower_fetch(2, 12, 0, 14, T0 + 3)
    assert p.high_watermark == 12
    p.update_follower_fetch(3, 12, 0, 14, T0 + 4)
    p.update_follower_fetch(2, 14, 0, 14, T0 + 5)
    assert p.high_watermark == 12  # 3 is about to join the ISR: the HW waits for it


def test_isr_shrinks_after_replica_lag_time_max():
    p = leader(now=T0)
    p.update_follower_fetch(2, 0, 0, 0, T0)
    p.update_follower_fetch(3, 0, 0, 0, T0)
    # Replica 3 fetches but never reaches the leader's end.
    p.update_follower_fetch(2, 50, 0, 50, T0 + LAG)
    p.update_follower_fetch(3, 10, 0, 50, T0 + LAG)
    assert p.isr_shrink(50, T0 + LAG) is None  # caught up 30 s ago: still in
    proposal = p.isr_shrink(50, T0 + LAG + 1)
    assert proposal is not None and proposal.new_isr == (1, 2)
    assert proposal.partition_epoch == 0
    assert p.isr_shrink(50, T0 + LAG + 2) is None  # one proposal in flight at a time
    p.make_leader(reg(isr=(1, 2), partition_epoch=1), 50, T0 + LAG + 3)
    assert p.isr == (1, 2) and p.pending is None


def test_a_replica_the_controller_took_out_of_the_isr_stops_holding_back_the_hw():
    """A follower whose log dir failed leaves the ISR by its own AlterPartition and never
    fetches the partition again: once the new ISR is applied the HW must not wait for it
    as a replica "about to join" for replica.lag.time.max.ms (Kafka's leader completes
    the delayed produces at once)."""
    p = leader(now=T0)
    p.update_follower_fetch(2, 10, 0, 10, T0 + 1)
    p.update_follower_fetch(3, 10, 0, 10, T0 + 1)
    assert p.high_watermark == 10
    p.update_follower_fetch(2, 20, 0, 20, T0 + 2)  # replica 3 stopped fetching at 10
    assert p.high_watermark == 10
    assert p.make_leader(reg(isr=(1, 2), partition_epoch=1), 20, T0 + 3) is False
    assert p.high_watermark == 20
    # A later fetch at the leader's end makes it caught up again (it may rejoin).
    p.update_follower_fetch(3, 20, 0, 20, T0 + 4)
    p.update_follower_fetch(2, 30, 0, 30, T0 + 5)
    assert p.high_watermark == 20  # 3 is caught up as of its fetch at T0 + 4: waits


def test_caught_up_as_of_the_previous_fetch_counts():
    """Kafka's rule: a fetch at the LEO the leader had at the previous fetch means the
    follower was caught up at the previous fetch's time."""
    p = leader()
    p.update_follower_fetch(2, 0, 0, 100, T0 + 1_000)
    p.update_follower_fetch(2, 100, 0, 200, T0 + 5_000)
    assert p.remote[2].last_caught_up_time_ms == T0 + 1_000


def test_isr_expands_when_a_follower_reaches_the_hw():
    p = leader(isr=(1, 2))
    p.update_follower_fetch(2, 10, 0, 10, T0 + 1)
    assert p.high_watermark == 10
    p.update_follower_fetch(3, 5, 0, 10, T0 + 1)
    assert p.isr_expansion(3) is None
    p.update_follower_fetch(3, 10, 0, 10, T0 + 2)
    proposal = p.isr_expansion(3)
    assert proposal is not None and proposal.new_isr == (1, 2, 3)
    assert p.maximal_isr == (1, 2, 3)  # counted for the HW while in flight
    p.isr_change_failed()
    assert p.maximal_isr == (1, 2)


def test_follower_must_reach_this_epochs_start_to_join():
    p = Partition("t", 0, local_id=1, replica_lag_time_max_ms=LAG, high_watermark=10)
    p.make_leader(reg(isr=(1, 3)), 20, T0)  # 3's position unknown: the HW stays at 10
    assert p.leader_epoch_start_offset == 20 and p.high_watermark == 10
    p.update_follower_fetch(2, 15, 0, 20, T0 + 1)
    assert p.isr_expansion(2) is None
    p.update_follower_fetch(2, 20, 0, 20, T0 + 2)
    assert p.isr_expansion(2) is not None


def test_new_leader_epoch_forgets_followers():
    p = leader()
    p.update_follower_fetch(2, 10, 0, 10, T0 + 1)
    assert p.make_leader(reg(epoch=1), 10, T0 + 2)
    assert p.remote[2].log_end_offset == -1
    assert not p.make_leader(reg(epoch=1), 10, T0 + 3)  # same epoch: nothing new


def test_min_isr():
    p = leader(isr=(1, 2))
    assert p.check_min_isr(2) is None
    assert p.check_min_isr(3) == ErrorCode.NOT_ENOUGH_REPLICAS


def test_follower_takes_the_leaders_hw_capped_by_its_log():
    p = Partition("t", 0, local_id=2)
    assert p.make_follower(reg(), 5)
    assert p.role is Role.FOLLOWER and p.leader == 1
    assert p.follower_update_high_watermark(10, 5)
    assert p.high_watermark == 5
    assert not p.make_follower(reg(), 5)
    assert p.make_follower(reg(epoch=1), 5)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([2, 3]), st.integers(0, 30), st.integers(0, 5)),
        max_size=40,
    )
)
def test_hw_is_monotonic_and_never_passes_an_isr_member(fetches):
    p = leader()
    leo, now = 0, T0
    previous = 0
    for replica, advance, dt in fetches:
        leo += advance
        now += dt
        fetch_offset = min(leo, p.remote[replica].log_end_offset + advance + 1)
        p.update_follower_fetch(replica, max(fetch_offset, 0), 0, leo, now)
        assert p.high_watermark >= previous
        assert p.high_watermark <= leo
        for r in p.isr:
            if r != 1:
                assert p.high_watermark <= max(p.remote[r].log_end_offset, previous)
        previous = p.high_watermark


def test_truncation_bounds_the_hw_by_the_log():
    p = Partition("t", 0, local_id=2, high_watermark=8)
    p.make_follower(reg(), 10)
    p.truncated(0, 6)  # a diverged tail cut: the HW moves back with it
    assert p.high_watermark == 6
    p.truncated(6, 6)
    assert p.high_watermark == 6
    p.truncated(40, 40)  # restarted at the leader's log start: the HW moves up to it
    assert p.high_watermark == 40


def test_fields_are_read_only_from_outside():
    p = leader()
    with pytest.raises(AttributeError):
        p.high_watermark = 10  # type: ignore[misc]


def test_a_follower_shutting_down_does_not_hold_back_the_hw_nor_rejoin():
    """A broker in controlled shutdown leaves every ISR, and may fetch at the leader's end
    once more after that: caught up, it must not count as "about to join" for
    replica.lag.time.max.ms (acks=all would wait that long), nor be proposed back."""
    p = leader(now=T0)
    for r in (2, 3):
        p.update_follower_fetch(r, 10, 0, 10, T0 + 1)
    p.make_leader(reg(isr=(1, 2), partition_epoch=1), 10, T0 + 2)  # 3 is shutting down
    p.update_follower_fetch(3, 10, 0, 10, T0 + 3)  # its last fetch
    assert p.set_ineligible(frozenset({3}), 20, T0 + 4) is False
    p.update_follower_fetch(2, 20, 0, 20, T0 + 5)
    assert p.high_watermark == 20  # 3 is not waited for
    assert p.isr_expansion(3) is None
    # Unfenced again and caught up: it rejoins (and is waited for meanwhile).
    p.set_ineligible(frozenset(), 20, T0 + 6)
    p.update_follower_fetch(3, 20, 0, 20, T0 + 7)
    proposal = p.isr_expansion(3)
    assert proposal is not None and proposal.new_isr == (1, 2, 3)


def test_a_follower_found_ineligible_releases_the_hw_at_once():
    p = leader(isr=(1, 2), now=T0)
    p.update_follower_fetch(2, 10, 0, 10, T0 + 1)
    p.update_follower_fetch(3, 10, 0, 10, T0 + 1)  # caught up, about to join
    p.update_follower_fetch(2, 20, 0, 20, T0 + 2)
    assert p.high_watermark == 10
    assert p.set_ineligible(frozenset({3}), 20, T0 + 3) is True
    assert p.high_watermark == 20
