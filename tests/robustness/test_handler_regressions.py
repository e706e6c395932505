"""Crashes the mutated replay found in request handlers, each pinned by a direct request.

A handler that raises does not take the broker down (the connection is closed), but it
is a bug all the same: the broker must answer with an error code or refuse a malformed
request, never log a traceback.
"""

from __future__ import annotations

from confluent_kafka.admin import NewTopic

from moldau.protocol.messages.list_groups_request import ListGroupsRequest
from tests.integration.helpers import (
    RawClient,
    admin,
    create_topic,
    delete_topic,
    encode_request,
    framed,
    roundtrip_ok,
    topic_partitions,
    wait_until,
)
from tests.robustness.conftest import Start


def test_list_groups_with_a_null_state_filter_entry(start_broker: Start) -> None:
    """Found by replay seed 15: a null in ListGroups v4's states filter (non-nullable
    strings) raised AttributeError in the coordinator. Such a request is malformed: like
    Kafka, the broker drops that connection and keeps serving everyone else."""
    b = start_broker()
    with RawClient(b.bootstrap) as raw:
        payload = encode_request(ListGroupsRequest(states_filter=[None]), 4, 1)  # type: ignore[list-item]
        raw.send_bytes(framed(payload))
        assert raw.is_closed_by_peer(), "a malformed request was answered"
    with RawClient(b.bootstrap) as raw:
        assert raw.request(ListGroupsRequest(states_filter=["Stable"]), 4).error_code == 0
    assert not b.tracebacks(), b.tracebacks()[0]


def test_topic_with_a_249_character_name_can_be_deleted(start_broker: Start, topic: str) -> None:
    """Found by replay seeds 101-103: deleting a topic whose name has Kafka's maximum
    length renamed its directory to a name longer than 255 bytes (ENAMETOOLONG)."""
    b = start_broker()
    longest = "x" * 249
    create_topic(b.bootstrap, longest, 2)
    roundtrip_ok(b.bootstrap, longest, seed=7)
    delete_topic(b.bootstrap, longest)
    wait_until(lambda: topic_partitions(b.bootstrap, longest) is None, "the topic to go")
    assert not b.tracebacks(), b.tracebacks()[0]
    assert not [p for p in b.data_dir.iterdir() if p.name.startswith(longest)], "dir left"
    client = admin(b.bootstrap)  # the name is free again
    client.create_topics([NewTopic(longest, 1, 1)])[longest].result(timeout=30)
    b.restart()
    assert topic_partitions(b.bootstrap, longest) == 1
    create_topic(b.bootstrap, topic, 1)
    roundtrip_ok(b.bootstrap, topic, seed=8)
