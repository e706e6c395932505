"""OffsetForLeaderEpoch served to clients (KIP-320), over the wire: where an epoch ends,
the current-leader-epoch fencing, unknown partitions, every version clients use."""

from __future__ import annotations

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from moldau.testing import BrokerProcess
from tests.integration.helpers import RawClient

CONSUMER = -1  # replica_id of a client


def ask(broker: BrokerProcess, topic: str, version: int, **partition: int) -> tuple[int, int, int]:
    request = OffsetForLeaderEpochRequest(
        replica_id=CONSUMER,
        topics=[
            OffsetForLeaderTopic(topic=topic, partitions=[OffsetForLeaderPartition(**partition)])
        ],
    )
    with RawClient(broker.bootstrap) as client:
        response = client.request(request, version)
    (result,) = response.topics[0].partitions
    return result.error_code, result.leader_epoch, result.end_offset


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_end_of_the_current_epoch_is_the_log_end(
    broker: BrokerProcess, topic: str, version: int
) -> None:
    broker.create_topic(topic, 1)
    broker.produce(topic, *(b"r%d" % i for i in range(25)))
    error, epoch, end = ask(broker, topic, version, partition=0, leader_epoch=0)
    assert (error, end) == (ErrorCode.NONE, 25)
    assert epoch == (0 if version >= 1 else -1)  # v0 has no epoch in its answer


def test_fencing_and_unknown_epochs(broker: BrokerProcess, topic: str) -> None:
    broker.create_topic(topic, 1)
    broker.produce(topic, b"a", b"b")
    assert ask(broker, topic, 4, partition=0, leader_epoch=0, current_leader_epoch=0) == (0, 0, 2)
    error, _, _ = ask(broker, topic, 4, partition=0, leader_epoch=0, current_leader_epoch=3)
    assert error == ErrorCode.UNKNOWN_LEADER_EPOCH
    # An epoch above every epoch of the log: undefined (Kafka's -1, -1).
    assert ask(broker, topic, 4, partition=0, leader_epoch=7) == (0, -1, -1)
    error, _, _ = ask(broker, topic, 4, partition=5, leader_epoch=0)
    assert error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    error, _, _ = ask(broker, f"{topic}-nope", 4, partition=0, leader_epoch=0)
    assert error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
