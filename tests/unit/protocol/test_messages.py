"""Generated codecs: round trips, hand-checked wire bytes, and malformed input."""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import moldau.protocol.messages as messages
from moldau.protocol.messages import REQUESTS, RESPONSES
from moldau.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from moldau.protocol.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from moldau.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from moldau.protocol.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from moldau.protocol.messages.request_header import RequestHeader
from moldau.protocol.primitives import ProtocolDecodeError, RecordsSpill


def all_message_classes():
    for info in pkgutil.iter_modules(messages.__path__):
        mod = importlib.import_module(f"{messages.__name__}.{info.name}")
        for obj in vars(mod).values():
            if (
                isinstance(obj, type)
                and obj.__module__ == mod.__name__
                and hasattr(obj, "MIN_VERSION")
            ):
                yield obj


def joined(parts) -> bytes:
    return b"".join(bytes(p) for p in parts)


@pytest.mark.parametrize("cls", list(all_message_classes()), ids=lambda c: c.__name__)
def test_default_message_round_trips_in_every_version(cls):
    for version in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
        data = joined(cls().encode(version))
        decoded, end = cls.decode(memoryview(data), version)
        assert end == len(data)
        assert decoded == cls()


def test_index_covers_every_api_both_ways():
    assert set(REQUESTS) == set(RESPONSES)
    assert (
        REQUESTS[0].__name__ == "ProduceRequest" and REQUESTS[18].__name__ == "ApiVersionsRequest"
    )


def test_metadata_request_v1_wire_bytes():
    req = MetadataRequest(topics=[MetadataRequestTopic(name="ab")])
    assert joined(req.encode(1)) == struct.pack(">ih", 1, 2) + b"ab"


def test_metadata_request_v9_is_compact_with_tagged_fields():
    req = MetadataRequest(topics=[MetadataRequestTopic(name="ab")], allow_auto_topic_creation=False)
    data = joined(req.encode(9))
    # topics: compact len 2, topic: compact string "ab" + no tags; then 3 bools; no tags.
    assert data == b"\x02" + b"\x03ab" + b"\x00" + b"\x00\x00\x00" + b"\x00"
    decoded, _ = MetadataRequest.decode(memoryview(data), 9)
    assert decoded.topics[0].name == "ab" and decoded.allow_auto_topic_creation is False


def test_request_header_v2_keeps_old_style_client_id():
    data = joined(
        RequestHeader(
            request_api_key=3, request_api_version=12, correlation_id=7, client_id="c"
        ).encode(2)
    )
    assert data == struct.pack(">hhih", 3, 12, 7, 1) + b"c" + b"\x00"


def produce_response(partition: PartitionProduceResponse) -> ProduceResponse:
    return ProduceResponse(
        responses=[TopicProduceResponse(name="t", partition_responses=[partition])]
    )


def test_default_tagged_fields_are_not_written():
    # librdkafka 2.0.2 misreads tagged fields at their defaults, so none may be written.
    data = joined(produce_response(PartitionProduceResponse()).encode(10))
    without = joined(produce_response(PartitionProduceResponse(current_leader=None)).encode(10))
    assert data == without


def test_non_default_tagged_field_round_trips():
    partition = PartitionProduceResponse(index=1)
    partition.current_leader.leader_id = 3
    data = joined(produce_response(partition).encode(10))
    assert len(data) > len(joined(produce_response(PartitionProduceResponse(index=1)).encode(10)))
    decoded, _ = ProduceResponse.decode(memoryview(data), 10)
    assert decoded.responses[0].partition_responses[0].current_leader.leader_id == 3


def test_unknown_tagged_fields_are_skipped():
    req = MetadataRequest(topics=None)
    data = bytearray(joined(req.encode(9)))
    assert data[-1] == 0
    data[-1:] = b"\x01" + b"\x63" + b"\x02" + b"zz"  # one unknown tag 99 of 2 bytes
    decoded, end = MetadataRequest.decode(memoryview(bytes(data)), 9)
    assert decoded.topics is None and end == len(data)


def test_api_versions_response_v3():
    resp = ApiVersionsResponse(api_keys=[ApiVersion(api_key=18, min_version=0, max_version=4)])
    data = joined(resp.encode(3))
    assert (
        data
        == b"\x00\x00"
        + b"\x02"
        + struct.pack(">hhh", 18, 0, 4)
        + b"\x00"
        + b"\x00\x00\x00\x00"
        + b"\x00"
    )


class FakeRecords(RecordsSpill):
    @property
    def size(self) -> int:
        return 5


def test_records_objects_split_the_encoding_for_sendfile():
    spill = FakeRecords()
    resp = FetchResponse(
        responses=[FetchableTopicResponse(topic="t", partitions=[PartitionData(records=spill)])]
    )
    parts = resp.encode(12)
    assert parts[1] is spill
    assert len(parts) == 3
    # the bytes before the spill end with the compact length of 5 records bytes
    assert bytes(parts[0]).endswith(b"\x06")


@given(st.binary(max_size=200), st.sampled_from(sorted(REQUESTS)))
@settings(max_examples=300, deadline=None)
def test_random_bytes_never_raise_anything_but_decode_errors(data, api_key):
    cls = REQUESTS[api_key]
    for version in (cls.MIN_VERSION, cls.MAX_VERSION):
        with contextlib.suppress(ProtocolDecodeError):
            cls.decode(memoryview(data), version)


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_mutated_valid_requests_never_raise_anything_but_decode_errors(data):
    req = MetadataRequest(
        topics=[MetadataRequestTopic(name="topic-a"), MetadataRequestTopic(name="b")]
    )
    version = data.draw(st.integers(0, 13))
    raw = bytearray(joined(req.encode(version)))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with contextlib.suppress(ProtocolDecodeError):
        MetadataRequest.decode(memoryview(bytes(raw[:cut])), version)


def test_generated_code_is_up_to_date(tmp_path):
    pytest.importorskip("kafka.protocol.schemas")
    from moldau.protocol import codegen

    codegen.generate(tmp_path)
    for path in tmp_path.glob("*.py"):
        committed = (codegen.OUT_DIR / path.name).read_text()
        assert path.read_text() == committed, (
            f"{path.name} differs: rerun python -m moldau.protocol.codegen"
        )
