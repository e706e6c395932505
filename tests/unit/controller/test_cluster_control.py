"""Brokers and partitions under the controller, step by step with a fake clock: registration,
fencing on missed heartbeats, controlled shutdown, elections (WE-06, WE-24), ISR changes,
reassignment."""

from __future__ import annotations

from moldau.controller.cluster_control import ClusterControl, Registration
from moldau.controller.replication_control import PREFERRED, ReplicationControl
from moldau.metadata.image import NO_LEADER, MetadataImage
from moldau.metadata.records import PartitionRecord, TopicRecord
from moldau.protocol.errors import ErrorCode

T = b"t" * 16
SESSION = 9_000


class Cluster:
    def __init__(self, brokers=(0, 1, 2)) -> None:
        self.now = 1_000_000
        self.replication = ReplicationControl()
        self.control = ClusterControl("c", self.replication, SESSION)
        self.image = MetadataImage()
        self.epochs: dict[int, int] = {}
        for b in brokers:
            self.register(b)
            self.heartbeat(b)  # caught up: unfenced

    def apply(self, records) -> None:
        self.image = self.image.apply(records, self.image.offset + len(records))

    def register(self, broker: int, incarnation: bytes | None = None) -> ErrorCode:
        reg = Registration(
            broker,
            incarnation or bytes([broker]) * 16,
            "c",
            (("PLAINTEXT", "h", 9000 + broker, 0),),
            None,
        )
        epoch = self.image.offset + 1
        error, _, records = self.control.register(self.image, reg, epoch, self.now)
        if error == ErrorCode.NONE:
            self.epochs[broker] = epoch
            self.apply(records)
        return error

    def heartbeat(self, broker: int, *, shut_down: bool = False):
        result = self.control.heartbeat(
            self.image, broker, self.epochs[broker], self.image.offset, False, shut_down, self.now
        )
        self.apply(result.records)
        return result

    def topic(self, assignment: dict[int, list[int]]) -> None:
        records = [TopicRecord(name="t", topic_id=T)]
        records += [
            PartitionRecord(
                partition_id=p,
                topic_id=T,
                replicas=r,
                isr=r,
                leader=r[0],
                leader_epoch=0,
                partition_epoch=0,
            )
            for p, r in assignment.items()
        ]
        self.apply(records)

    def part(self, p: int):
        return self.image.topics["t"].partitions[p]


def test_registration_fences_until_caught_up() -> None:
    c = Cluster(brokers=())
    c.register(1)
    assert c.image.brokers[1].fenced
    result = c.control.heartbeat(c.image, 1, c.epochs[1], -1, False, False, c.now)
    assert result.is_fenced and not result.is_caught_up and not result.records
    assert not c.heartbeat(1).is_fenced
    assert not c.image.brokers[1].fenced


def test_duplicate_registration_is_refused_while_the_other_lives() -> None:
    c = Cluster(brokers=(1,))
    assert c.register(1, incarnation=b"x" * 16) == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    c.now += SESSION + 1
    c.apply(c.control.expire_sessions(c.image, c.now))
    assert c.register(1, incarnation=b"x" * 16) == ErrorCode.NONE


def test_a_new_controller_refuses_duplicates_only_of_brokers_it_has_heard_from() -> None:
    """The sessions a controller grants at activation protect brokers from fencing, not
    from their next incarnation: a node that restarted after kill -9 and is its own new
    controller registers at once. Once a broker heartbeats, a duplicate is refused again."""
    c = Cluster(brokers=(1, 2))
    c.control = ClusterControl("c", c.replication, SESSION)  # a new incarnation's controller
    c.control.activate(c.image, c.now)
    assert c.register(1, incarnation=b"n" * 16) == ErrorCode.NONE
    assert c.image.brokers[1].fenced  # until it catches up, as any registration
    c.heartbeat(2)
    assert c.register(2, incarnation=b"x" * 16) == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert c.register(1, incarnation=b"y" * 16) == ErrorCode.NONE  # 1 is fenced: no session
    c.now += SESSION // 2
    assert not c.control.expire_sessions(c.image, c.now)  # the grace still keeps 2 unfenced


def test_stale_epoch_and_unknown_broker() -> None:
    c = Cluster(brokers=(1,))
    wrong = c.control.heartbeat(c.image, 1, c.epochs[1] - 1, 0, False, False, c.now)
    assert wrong.error == ErrorCode.STALE_BROKER_EPOCH
    assert c.control.heartbeat(c.image, 7, 0, 0, False, False, c.now).error == (
        ErrorCode.BROKER_ID_NOT_REGISTERED
    )


def test_we06_a_stopped_leader_is_replaced_by_the_first_isr_replica() -> None:
    c = Cluster()
    c.topic({0: [0, 1], 1: [1, 0], 2: [2, 0], 3: [0, 2]})
    c.now += 5_000
    for b in (0, 2):
        c.heartbeat(b)
    c.now += 5_000  # broker 1 has been silent for 10 s
    c.apply(c.control.expire_sessions(c.image, c.now))
    assert c.image.brokers[1].fenced
    assert (c.part(1).leader, c.part(1).isr, c.part(1).leader_epoch) == (0, (0,), 1)
    assert c.part(0).isr == (0,) and c.part(0).leader == 0
    assert c.part(2).isr == (2, 0)  # untouched


def test_we24_the_preferred_leader_comes_back() -> None:
    c = Cluster(brokers=(1, 2))
    c.topic({0: [1, 2]})
    c.now += SESSION + 1
    c.heartbeat(2)
    c.apply(c.control.expire_sessions(c.image, c.now))
    assert c.part(0).leader == 2
    c.register(1, incarnation=b"n" * 16)
    c.heartbeat(1)
    assert c.part(0).leader == 2  # back, but not yet in sync: B keeps leading
    error, after, records = c.replication.alter_partition(
        c.image, 2, "t", 0, c.part(0).leader_epoch, c.part(0).partition_epoch, [2, 1]
    )
    assert error == ErrorCode.NONE
    c.apply(records)
    assert c.replication.imbalanced_partitions(c.image, 10) == [("t", 0)]
    error, _, record = c.replication.elect(c.image, "t", 0, PREFERRED)
    c.apply([record])
    assert c.part(0).leader == 1
    assert c.replication.elect(c.image, "t", 0, PREFERRED)[0] == ErrorCode.ELECTION_NOT_NEEDED


def test_controlled_shutdown_moves_leadership_first() -> None:
    c = Cluster()
    c.topic({0: [1, 0], 1: [1, 2]})
    result = c.heartbeat(1, shut_down=True)
    assert result.should_shut_down
    assert c.part(0).leader == 0 and c.part(1).leader == 2
    assert 1 not in c.part(0).isr and c.image.brokers[1].in_controlled_shutdown


def test_a_broker_that_may_shut_down_is_fenced_and_its_next_incarnation_registers() -> None:
    """Kafka's SHUTDOWN_NOW: the session ends with the controlled shutdown, so a restarted
    broker is not refused as a duplicate for a session timeout; a live one still is."""
    c = Cluster()
    c.topic({0: [1, 0]})
    assert c.register(2, incarnation=b"x" * 16) == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    result = c.heartbeat(1, shut_down=True)
    assert result.should_shut_down and result.is_fenced
    assert c.image.brokers[1].fenced and c.part(0).isr == (0,)
    assert c.register(1, incarnation=b"n" * 16) == ErrorCode.NONE


def test_last_isr_member_stays_and_unclean_election_is_opt_in() -> None:
    c = Cluster(brokers=(1, 2))
    c.topic({0: [1, 2]})
    c.apply(c.replication.alter_partition(c.image, 1, "t", 0, 0, 0, [1])[2])
    c.now += SESSION + 1
    c.heartbeat(2)
    c.apply(c.control.expire_sessions(c.image, c.now))
    assert (c.part(0).leader, c.part(0).isr) == (NO_LEADER, (1,))
    # Clean election only: replica 2 is not in the ISR, so it may not lead.
    error, _, _ = c.replication.elect(c.image, "t", 0, PREFERRED)
    assert error == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    error, _, record = c.replication.elect(c.image, "t", 0, 1)
    c.apply([record])
    assert (c.part(0).leader, c.part(0).isr) == (2, (2,))


def test_alter_partition_is_fenced_by_epochs() -> None:
    c = Cluster()
    c.topic({0: [0, 1, 2]})
    rc = c.replication
    assert (
        rc.alter_partition(c.image, 1, "t", 0, 0, 0, [0, 1])[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    )
    assert rc.alter_partition(c.image, 0, "t", 0, 9, 0, [0, 1])[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert (
        rc.alter_partition(c.image, 0, "t", 0, 0, 7, [0, 1])[0] == ErrorCode.INVALID_UPDATE_VERSION
    )
    assert rc.alter_partition(c.image, 0, "t", 0, 0, 0, [0, 5])[0] == ErrorCode.INELIGIBLE_REPLICA
    error, after, records = rc.alter_partition(c.image, 0, "t", 0, 0, 0, [0, 1])
    assert error == ErrorCode.NONE and after.isr == (0, 1) and after.partition_epoch == 1
    c.apply(records)
    # The same proposal again is stale now.
    assert (
        rc.alter_partition(c.image, 0, "t", 0, 0, 0, [0, 1])[0] == ErrorCode.INVALID_UPDATE_VERSION
    )


def test_reassignment_adds_then_removes() -> None:
    c = Cluster(brokers=(0, 1, 2, 3))
    c.topic({0: [0, 1]})
    rc = c.replication
    error, _, records = rc.reassign(c.image, "t", 0, [2, 3])
    assert error == ErrorCode.NONE
    c.apply(records)
    p = c.part(0)
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader) == (
        (2, 3, 0, 1),
        (2, 3),
        (0, 1),
        0,
    )
    assert [t for t, _ in rc.reassignments(c.image, None)] == ["t"]
    # The new replicas catch up and join the ISR: the old ones leave, a new one leads.
    c.apply(
        rc.alter_partition(c.image, 0, "t", 0, p.leader_epoch, p.partition_epoch, [0, 1, 2, 3])[2]
    )
    p = c.part(0)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas, p.leader) == (
        (2, 3),
        (2, 3),
        (),
        (),
        2,
    )
    assert rc.reassign(c.image, "t", 0, None)[0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_a_controller_that_stalled_does_not_fence_for_the_silence_it_caused() -> None:
    c = Cluster(brokers=(1, 2))
    c.control.activate(c.image, c.now)
    c.now += SESSION + 1  # nothing ran: not the brokers' fault
    assert c.control.expire_sessions(c.image, c.now) == []
    c.now += 1_000
    c.heartbeat(2)  # broker 1 stays silent from here on
    for _ in range(SESSION // 1_000):  # checked every second, as the controller does
        c.now += 1_000
        c.apply(c.control.expire_sessions(c.image, c.now))
    assert c.image.brokers[1].fenced and not c.image.brokers[2].fenced


def test_a_leader_leaving_the_isr_resigns_to_the_next_isr_replica() -> None:
    """A leader whose log dir failed proposes the ISR without itself (KIP-858's effect)."""
    c = Cluster()
    c.topic({0: [0, 1, 2]})
    rc = c.replication
    assert rc.alter_partition(c.image, 0, "t", 0, 0, 0, [])[0] == ErrorCode.INELIGIBLE_REPLICA
    error, after, records = rc.alter_partition(c.image, 0, "t", 0, 0, 0, [1, 2])
    assert error == ErrorCode.NONE and after is not None
    assert after.leader in (1, 2) and after.isr == (1, 2)
    c.apply(records)
    assert c.part(0).leader in (1, 2) and 0 not in c.part(0).isr


def test_a_follower_may_only_take_itself_out_of_the_isr() -> None:
    c = Cluster()
    c.topic({0: [0, 1, 2]})
    rc = c.replication
    assert (
        rc.alter_partition(c.image, 1, "t", 0, 0, 0, [0, 1])[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    )
    assert rc.alter_partition(c.image, 1, "t", 0, 0, 0, [0])[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    error, after, records = rc.alter_partition(c.image, 1, "t", 0, 0, 0, [0, 2])
    assert error == ErrorCode.NONE and after is not None and after.isr == (0, 2)
    c.apply(records)
    assert (c.part(0).leader, c.part(0).isr) == (0, (0, 2))


def test_a_new_controller_fences_its_silent_predecessor_one_session_after_its_death() -> None:
    """The previous quorum leader (a combined node killed with -9) gets no fresh session
    from its successor: its silence counts from its last Raft answer, so the election time
    is not added to the session timeout. The other brokers keep the full grace."""
    c = Cluster(brokers=(1, 2, 3))
    died_at = c.now
    c.now += 3_000  # fetch timeout and election
    c.control = ClusterControl("c", c.replication, SESSION)
    c.control.activate(c.image, c.now, {1: died_at})
    for _ in range((SESSION - 3_000) // 1_000):  # checked every second
        c.now += 1_000
        c.apply(c.control.expire_sessions(c.image, c.now))
    assert not c.image.brokers[1].fenced
    c.now += 1_000
    c.apply(c.control.expire_sessions(c.image, c.now))
    assert c.image.brokers[1].fenced
    assert not c.image.brokers[2].fenced and not c.image.brokers[3].fenced


def test_a_predecessor_heard_after_activation_keeps_a_full_session() -> None:
    c = Cluster(brokers=(1, 2))
    c.control = ClusterControl("c", c.replication, SESSION)
    c.control.activate(c.image, c.now, {1: c.now + 5_000, 7: c.now})  # 7: not a broker
    c.now += SESSION
    assert not c.control.expire_sessions(c.image, c.now)
