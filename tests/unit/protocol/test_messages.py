"""Generated codecs: round trips, hand-checked wire bytes, and malformed input."""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import struct
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import moldau.protocol.coordinator_records as coordinator_records
import moldau.protocol.messages as messages
import moldau.protocol.metadata_records as metadata_records
import moldau.protocol.remote_log_metadata_records as remote_log_metadata_records
from moldau.protocol import codegen
from moldau.protocol.api_keys import ApiKey
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
from moldau.protocol.primitives import (
    ProtocolDecodeError,
    RecordsSpill,
    read_array_len,
    read_compact_array_len,
)

from .schema_strategies import full_message, joined, message_strategy, models

PACKAGES = (messages, metadata_records, coordinator_records, remote_log_metadata_records)


def all_message_classes():
    for package in PACKAGES:
        for info in pkgutil.iter_modules(package.__path__):
            mod = importlib.import_module(f"{package.__name__}.{info.name}")
            for obj in vars(mod).values():
                if (
                    isinstance(obj, type)
                    and obj.__module__ == mod.__name__
                    and hasattr(obj, "MIN_VERSION")
                ):
                    yield obj


ALL_CLASSES = sorted(all_message_classes(), key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
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
    version = data.draw(st.integers(0, MetadataRequest.MAX_VERSION))
    raw = bytearray(joined(req.encode(version)))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with contextlib.suppress(ProtocolDecodeError):
        MetadataRequest.decode(memoryview(bytes(raw[:cut])), version)


def test_generated_code_is_up_to_date(tmp_path):
    codegen.generate(tmp_path)
    for package in codegen.TARGETS:
        fresh = {p.name: p.read_text() for p in (tmp_path / package).glob("*.py")}
        committed = {p.name: p.read_text() for p in (codegen.PACKAGE_DIR / package).glob("*.py")}
        assert sorted(fresh) == sorted(committed), (
            f"rerun python -m moldau.protocol.codegen ({package})"
        )
        for name, text in fresh.items():
            assert text == committed[name], f"{package}/{name} differs: rerun the generator"


def test_schemas_are_vendored_in_the_package_with_kafkas_license():
    schemas = codegen.SCHEMA_DIR
    assert schemas.resolve().is_relative_to(Path(codegen.__file__).parent.resolve())
    assert "Apache License" in (schemas / "LICENSE").read_text()
    assert "Apache Kafka" in (schemas / "NOTICE").read_text()
    folders = {p.name for p in schemas.iterdir() if p.is_dir()}
    assert folders == {
        "clients",
        "metadata",
        "group-coordinator",
        "transaction-coordinator",
        "share-coordinator",
        "raft",
        "storage",
    }
    # every generated module names the vendored schema it came from
    for package in PACKAGES:
        for info in pkgutil.iter_modules(package.__path__):
            doc = importlib.import_module(f"{package.__name__}.{info.name}").__doc__ or ""
            source = doc.removeprefix("Generated by moldau.protocol.codegen from Kafka's ")
            assert (schemas / source.removesuffix(". Do not edit.")).is_file(), doc


def test_api_keys_name_every_rpc_as_kafka_does():
    assert len(ApiKey) == len(REQUESTS)
    for key, cls in REQUESTS.items():
        assert ApiKey(key).name == codegen.snake(cls.__name__.removesuffix("Request")).upper()
    assert ApiKey.VOTE == 52 and ApiKey.BROKER_HEARTBEAT == 63 and ApiKey.ENVELOPE == 58


@pytest.mark.parametrize("name", sorted(c.__name__ for c in ALL_CLASSES))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_populated_messages_round_trip_byte_for_byte(name, data):
    cls = next(c for c in ALL_CLASSES if c.__name__ == name)
    version = data.draw(st.integers(cls.MIN_VERSION, cls.MAX_VERSION), label="version")
    message = data.draw(message_strategy(name, version), label="message")
    wire = joined(message.encode(version))
    decoded, end = cls.decode(memoryview(wire), version)
    assert end == len(wire)
    assert joined(decoded.encode(version)) == wire


def records_paths(msg: codegen.Message, struct: str, path: tuple = ()) -> list[tuple]:
    """Paths of attributes from the top struct down to each records field."""
    out = []
    for f in msg.structs[struct].fields:
        step = (*path, f)
        if f.type == "records":
            out.append(step)
        elif f.struct:
            out += records_paths(msg, f.struct, step)
    return out


RESPONSES_WITH_RECORDS = sorted(
    (name, path)
    for name, (_, msg) in models().items()
    if msg.kind == "response"
    for path in records_paths(msg, name)
)


def test_every_response_with_records_is_checked():
    names = {name for name, _ in RESPONSES_WITH_RECORDS}
    assert {"FetchResponse", "FetchSnapshotResponse", "ShareFetchResponse"} <= names


@pytest.mark.parametrize(
    ("name", "path"), RESPONSES_WITH_RECORDS, ids=[n for n, _ in RESPONSES_WITH_RECORDS]
)
def test_responses_never_carry_null_records(name, path):
    # librdkafka 2.0.2 fails on MessageSetSize -1; Kafka always writes an empty record set.
    module, _ = models()[name]
    cls = getattr(module, name)
    versions = [v for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1) if v in path[-1].versions]
    assert versions
    for version in versions:
        top = cls()
        node = top
        for f in path[:-1]:
            child = getattr(module, f.struct)()
            setattr(node, f.attr, [child] if f.type == "array" else child)
            node = child
        setattr(node, path[-1].attr, None)
        wire = joined(top.encode(version))
        decoded, _ = cls.decode(memoryview(wire), version)
        node = decoded
        for f in path[:-1]:
            node = getattr(node, f.attr)
            node = node[0] if f.type == "array" else node
        assert getattr(node, path[-1].attr) is not None
        assert bytes(getattr(node, path[-1].attr)) == b""


def test_fetch_response_error_partition_has_an_empty_record_set_on_the_wire():
    partition = PartitionData(partition_index=0, error_code=1, records=None)
    resp = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[partition])])
    v11 = joined(resp.encode(11))
    assert v11.endswith(struct.pack(">i", 0)) and not v11.endswith(struct.pack(">i", -1))
    v12 = joined(resp.encode(12))  # compact: length + 1 = 1 (empty), then tags
    assert v12.endswith(b"\x01" + b"\x00" + b"\x00" + b"\x00")


def test_produce_v0_is_still_parsed_so_it_can_be_answered():
    # v0-2 are advertised (librdkafka keeps compression on) and parsed; the handler refuses.
    wire = (
        struct.pack(">hi", 1, 1000)
        + struct.pack(">ih", 1, 1)
        + b"t"
        + struct.pack(">ii", 1, 0)
        + struct.pack(">i", 3)
        + b"abc"
    )
    request, end = REQUESTS[ApiKey.PRODUCE].decode(memoryview(wire), 0)
    assert end == len(wire) and REQUESTS[ApiKey.PRODUCE].MIN_VERSION == 0
    assert request.acks == 1 and request.timeout_ms == 1000
    assert request.topic_data[0].name == "t"
    assert bytes(request.topic_data[0].partition_data[0].records) == b"abc"


def test_null_where_the_schema_forbids_it_is_refused():
    v1 = struct.pack(">ih", 1, -1)  # one topic whose (non-nullable before v10) name is null
    with pytest.raises(ProtocolDecodeError):
        MetadataRequest.decode(memoryview(v1), 1)
    v0 = struct.pack(">i", -1)  # topics became nullable in v1
    with pytest.raises(ProtocolDecodeError, match="Topics"):
        MetadataRequest.decode(memoryview(v0), 0)
    assert MetadataRequest.decode(memoryview(v0), 1)[0].topics is None
    v10 = b"\x02" + bytes(16) + b"\x00" + b"\x00" + b"\x01\x00\x00" + b"\x00"
    assert MetadataRequest.decode(memoryview(v10), 10)[0].topics[0].name is None


def test_tagged_field_running_past_the_frame_is_refused():
    wire = joined(MetadataRequest(topics=None).encode(9))[:-1] + b"\x01\x05\x7f"
    with pytest.raises(ProtocolDecodeError, match="tagged"):
        MetadataRequest.decode(memoryview(wire), 9)


def test_varints_longer_than_five_bytes_are_refused():
    with pytest.raises(ProtocolDecodeError, match="varint"):
        MetadataRequest.decode(memoryview(b"\xff\xff\xff\xff\xff\x01"), 9)


# -- lying lengths (issue 15): checked against the bytes present before allocating ------

LIES = (
    b"\x7f\xff\xff\xff",  # int32 array count / bytes length
    b"\x7f\xff",  # int16 string length
    b"\xff\xff\xff\xff\x0f",  # uvarint 2^32-1: compact count / length
)
MEMORY_BOUND = 256 * 1024


def decode_bounded(cls, wire: bytes, version: int) -> None:
    """Decode; only ProtocolDecodeError may escape, in bounded time and memory (the caller
    runs tracemalloc)."""
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    with contextlib.suppress(ProtocolDecodeError):
        cls.decode(memoryview(wire), version)
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] - before
    assert elapsed < 1.0, f"{cls.__name__} v{version} took {elapsed:.2f}s on {len(wire)} bytes"
    assert peak < MEMORY_BOUND + 64 * len(wire), f"{cls.__name__} v{version} allocated {peak}"


@pytest.fixture
def traced():
    tracemalloc.start()
    yield
    tracemalloc.stop()


def test_array_count_of_2_31_in_a_30_byte_frame_fails_at_once():
    wire = struct.pack(">i", 2**31 - 1) + bytes(26)
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolDecodeError, match="exceeds"):
            MetadataRequest.decode(memoryview(wire), 4)
        assert tracemalloc.get_traced_memory()[1] < 64 * 1024
    finally:
        tracemalloc.stop()
    compact = b"\xff\xff\xff\xff\x07" + bytes(25)
    with pytest.raises(ProtocolDecodeError, match="exceeds"):
        MetadataRequest.decode(memoryview(compact), 9)


def test_counts_must_fit_their_elements_minimum_size():
    # 8 int32s claimed, 7 present: refused before any is read; 7 fit.
    wire = memoryview(struct.pack(">i", 8) + bytes(28))
    with pytest.raises(ProtocolDecodeError, match="exceeds"):
        read_array_len(wire, 0, 4)
    assert read_array_len(memoryview(struct.pack(">i", 7) + bytes(28)), 0, 4) == (7, 4)
    assert read_compact_array_len(memoryview(b"\x08" + bytes(28)), 0, 4) == (7, 1)
    with pytest.raises(ProtocolDecodeError, match="exceeds"):
        read_compact_array_len(memoryview(b"\x09" + bytes(28)), 0, 4)


@pytest.mark.parametrize("cls", [REQUESTS[k] for k in sorted(REQUESTS)], ids=lambda c: c.__name__)
def test_every_lie_at_every_offset_of_every_request_version(cls, traced):
    for version in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
        wire = joined(full_message(cls.__name__, version).encode(version))
        for lie in LIES:
            for pos in range(len(wire)):
                decode_bounded(cls, wire[:pos] + lie + wire[pos + len(lie) :], version)


@given(st.data())
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_lying_lengths_in_populated_requests_fail_fast(data):
    tracemalloc.start()
    try:
        lie_in_a_populated_request(data)
    finally:
        tracemalloc.stop()


def lie_in_a_populated_request(data):
    cls = data.draw(st.sampled_from([REQUESTS[k] for k in sorted(REQUESTS)]), label="api")
    version = data.draw(st.integers(cls.MIN_VERSION, cls.MAX_VERSION), label="version")
    wire = joined(data.draw(message_strategy(cls.__name__, version)).encode(version))
    lie = data.draw(st.sampled_from(LIES) | st.binary(min_size=1, max_size=5), label="lie")
    pos = data.draw(st.integers(0, len(wire)), label="pos")
    cut = data.draw(st.integers(pos, len(wire)), label="cut")
    decode_bounded(cls, wire[:pos] + lie + wire[pos + len(lie) : max(cut, pos + len(lie))], version)
