"""Bad input never takes the broker down: it answers with an error code or closes that one
connection, and everyone else (a fresh confluent-kafka client) keeps producing and
consuming.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.api_versions_request import ApiVersionsRequest
from moldau.protocol.messages.api_versions_response import ApiVersionsResponse
from moldau.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from moldau.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from moldau.protocol.messages.request_header import RequestHeader
from moldau.protocol.messages.response_header import ResponseHeader
from moldau.records.batch import RECORDS_OFFSET
from moldau.records.compression import Compression
from moldau.records.record import build_batch
from moldau.testing import BrokerProcess
from tests.integration.helpers import (
    METADATA_VERSION,
    PRODUCE_VERSION,
    FreshBroker,
    RawClient,
    assert_log_matches,
    batch_of,
    consume_confluent,
    create_topic,
    decode_response,
    encode_request,
    framed,
    joined,
    make_records,
    metadata_request,
    partition_results,
    produce_request,
    roundtrip_ok,
)

FUZZ_TOPIC = "fuzz-target"


def metadata_answers(bootstrap: str, topic: str, partitions: int) -> None:
    """A normal Metadata request on a new connection gets a correct answer."""
    with RawClient(bootstrap) as raw:
        response = raw.request(metadata_request([topic]), METADATA_VERSION)
    (t,) = response.topics
    assert (t.name, t.error_code, len(t.partitions)) == (topic, 0, partitions)


def broker_lines(b: BrokerProcess) -> list[str]:
    return [line for line in b.output if not line.startswith("%")]


# --- fuzzing -------------------------------------------------------------------------------


def valid_requests() -> list[bytes]:
    """Well-formed request payloads (header + body) across APIs and versions."""
    batch = build_batch([(b"k", b"v" * 50, [("h", b"x")])] * 3, compression=Compression.GZIP)
    fetch = FetchRequest(
        max_wait_ms=50,
        min_bytes=1,
        topics=[
            FetchTopic(
                topic=FUZZ_TOPIC,
                partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=65536)],
            )
        ],
    )
    earliest = ListOffsetsPartition(partition_index=0, timestamp=-2)
    list_offsets = ListOffsetsRequest(
        replica_id=-1, topics=[ListOffsetsTopic(name=FUZZ_TOPIC, partitions=[earliest])]
    )
    messages = [
        (metadata_request([FUZZ_TOPIC]), (0, 4, 9, 12)),
        (metadata_request(None), (1, 12)),
        (produce_request(FUZZ_TOPIC, {0: batch, 1: batch}), (3, 7, 9)),
        (fetch, (4, 11, 12)),
        (list_offsets, (1, 5, 6)),
        (ApiVersionsRequest("fuzz", "1"), (0, 3)),
    ]
    return [encode_request(m, v, 7) for m, versions in messages for v in versions]


VALID = valid_requests()


@st.composite
def mutated_request(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(0, 6))):
        i = draw(st.integers(0, len(data) - 1))
        data[i] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data[at:at] = draw(st.binary(max_size=16))
    return bytes(data)


frames = st.one_of(
    st.binary(max_size=200),  # garbage
    st.binary(min_size=8, max_size=64).map(  # garbage behind a known API key and version
        lambda b: bytes([0, b[0] % 70, 0, b[1] % 16]) + b[2:]
    ),
    mutated_request(),
)


def throw(bootstrap: str, payload: bytes) -> None:
    """Send one frame with a correct size prefix and read whatever comes back."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=2) as sock:
        sock.sendall(framed(payload))
        sock.settimeout(0.3)
        try:
            while sock.recv(65536):
                pass
        except (TimeoutError, ConnectionError):
            pass


@pytest.fixture(scope="module")
def fuzz_topic(broker: BrokerProcess) -> Iterator[str]:
    create_topic(broker.bootstrap, FUZZ_TOPIC, 2)
    yield FUZZ_TOPIC


@pytest.mark.slow
def test_random_and_mutated_frames(broker: BrokerProcess, fuzz_topic: str) -> None:
    """200 garbage or mutated frames, one connection each: the broker never dies, never
    logs an unhandled exception, and still serves a normal client afterwards."""
    tracebacks: list[str] = []

    @settings(
        max_examples=200,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(frames)
    def survive(payload: bytes) -> None:
        throw(broker.bootstrap, payload)
        assert broker.proc is not None and broker.proc.poll() is None, f"broker died on {payload!r}"
        lines = broker_lines(broker)
        for i, line in enumerate(lines):
            if "Traceback" in line:
                tracebacks.append("\n".join([repr(payload)[:300], *lines[max(0, i - 2) : i + 25]]))
        broker.output.clear()

    survive()
    metadata_answers(broker.bootstrap, fuzz_topic, 2)
    roundtrip_ok(broker.bootstrap, fuzz_topic, seed=1)
    assert not tracebacks, f"{len(tracebacks)} unhandled exceptions, first:\n{tracebacks[0]}"


# --- framing -------------------------------------------------------------------------------


def test_oversized_frame_closes_only_that_connection(fresh_broker: FreshBroker, topic: str) -> None:
    b = fresh_broker({"socket.request.max.bytes": str(1 << 20)})
    create_topic(b.bootstrap, topic, 1)
    with RawClient(b.bootstrap) as bystander, RawClient(b.bootstrap) as abuser:
        bystander.request(metadata_request([topic]), METADATA_VERSION)
        abuser.send_bytes((2 << 20).to_bytes(4, "big") + b"\x00" * 1000)
        assert abuser.is_closed_by_peer(), "a 2 MiB frame over a 1 MiB limit was accepted"
        response = bystander.request(metadata_request([topic]), METADATA_VERSION)
        assert [t.name for t in response.topics] == [topic]
    roundtrip_ok(b.bootstrap, topic, seed=2)


def test_stalled_partial_frame_does_not_block_others(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 1)
    with RawClient(broker.bootstrap) as stalled:
        stalled.send_bytes((1000).to_bytes(4, "big") + b"\x00\x03")  # and then nothing
        metadata_answers(broker.bootstrap, topic, 1)
        roundtrip_ok(broker.bootstrap, topic, seed=6)


def test_request_trickled_byte_by_byte(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 3)
    payload = framed(encode_request(metadata_request([topic]), METADATA_VERSION, 77))
    with RawClient(broker.bootstrap) as raw:
        raw.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(payload)):
            raw.send_bytes(payload[i : i + 1])
        frame = raw.recv_frame()
    assert frame is not None
    (t,) = decode_response(ApiKey.METADATA, METADATA_VERSION, frame, 77).topics
    assert (t.name, len(t.partitions)) == (topic, 3)


def test_pipelined_requests_are_answered_in_order(broker: BrokerProcess, topic: str) -> None:
    """300 requests in one write (more than the broker queues before it stops reading):
    300 answers, in request order."""
    create_topic(broker.bootstrap, topic, 2)
    n = 300
    requests = b"".join(
        framed(encode_request(metadata_request([topic]), METADATA_VERSION, cid))
        for cid in range(1, n + 1)
    )
    with RawClient(broker.bootstrap) as raw:
        raw.send_bytes(requests)
        frames = [raw.recv_frame() for _ in range(n)]
    assert all(f is not None for f in frames), "connection closed mid-pipeline"
    for cid, frame in enumerate(frames, 1):
        assert frame is not None
        (t,) = decode_response(ApiKey.METADATA, METADATA_VERSION, frame, cid).topics
        assert (t.name, len(t.partitions)) == (topic, 2)


def test_negative_frame_size_closes_connection(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 1)
    with RawClient(broker.bootstrap) as abuser:
        abuser.send_bytes(b"\xff\xff\xff\xf0" + b"\x00" * 16)
        assert abuser.is_closed_by_peer()
    roundtrip_ok(broker.bootstrap, topic, seed=3)


def test_unknown_api_key(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 1)
    with RawClient(broker.bootstrap) as raw:
        header = RequestHeader(9999, 0, 5, "x")
        raw.send_bytes(framed(joined(header.encode(1)) + b"\x00" * 8))
        frame = raw.recv_frame()
        # Either closed, or an answer for correlation id 5 (an error): never a hang or crash.
        if frame is not None:
            assert frame[:4] == (5).to_bytes(4, "big")
    roundtrip_ok(broker.bootstrap, topic, seed=4)


def test_api_versions_from_the_future(broker: BrokerProcess) -> None:
    """KIP-511: a request version we don't know gets a v0 response with
    UNSUPPORTED_VERSION and our version table, so the client can downgrade."""
    with RawClient(broker.bootstrap) as raw:
        header = RequestHeader(ApiKey.API_VERSIONS, 99, 42, "future-client")
        body = joined(ApiVersionsRequest("future", "9.9").encode(3))
        raw.send_bytes(framed(joined(header.encode(2)) + body))
        frame = raw.recv_frame()
    assert frame is not None, "connection closed instead of an UNSUPPORTED_VERSION answer"
    buf = memoryview(frame)
    head, pos = ResponseHeader.decode(buf, 0)
    response, _ = ApiVersionsResponse.decode(buf, 0, pos)
    assert head.correlation_id == 42
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    keys = {v.api_key: (v.min_version, v.max_version) for v in response.api_keys}
    assert ApiKey.API_VERSIONS in keys and ApiKey.PRODUCE in keys and ApiKey.FETCH in keys


# --- produce validation --------------------------------------------------------------------


def test_bad_batches_fail_only_their_partition(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 3, {"max.message.bytes": "10000"})
    good_records = make_records(20, seed=80)
    good = batch_of(good_records)
    corrupt = bytearray(build_batch([(b"key", b"value" * 20)]))
    corrupt[RECORDS_OFFSET + 5] ^= 0x40  # inside the CRC-covered records
    huge = build_batch([(b"key", random.Random(8).randbytes(20_000))])
    with RawClient(broker.bootstrap) as raw:
        response = raw.request(
            produce_request(topic, {0: good, 1: bytes(corrupt), 2: huge}), PRODUCE_VERSION
        )
    results = {p: (r.error_code, r.base_offset) for p, r in partition_results(response).items()}
    assert results[0] == (0, 0)
    assert results[1][0] == ErrorCode.CORRUPT_MESSAGE
    assert results[2][0] == ErrorCode.MESSAGE_TOO_LARGE
    consumed = consume_confluent(broker.bootstrap, topic)
    assert consumed[1] == consumed[2] == []
    assert_log_matches(good_records, consumed)
    roundtrip_ok(broker.bootstrap, topic, seed=5)


def test_zstd_needs_produce_v7(broker: BrokerProcess, topic: str) -> None:
    """KIP-110: zstd batches in a produce older than v7 get UNSUPPORTED_COMPRESSION_TYPE."""
    create_topic(broker.bootstrap, topic, 1)
    batch = build_batch([(b"k", b"zstd" * 10)], compression=Compression.ZSTD)
    with RawClient(broker.bootstrap) as raw:
        response = raw.request(produce_request(topic, {0: batch}), 3)
        assert partition_results(response)[0].error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        response = raw.request(produce_request(topic, {0: batch}), 7)
        result = partition_results(response)[0]
        assert (result.error_code, result.base_offset) == (0, 0)
    gots = consume_confluent(broker.bootstrap, topic)[0]
    assert [(g.offset, g.key, g.value) for g in gots] == [(0, b"k", b"zstd" * 10)]


def test_acks_0_produce_gets_no_response(broker: BrokerProcess, topic: str) -> None:
    """acks=0 sends nothing back: the next response on the connection answers the next
    request (RawClient checks correlation ids)."""
    create_topic(broker.bootstrap, topic, 1)
    records = make_records(5, seed=82)
    batch = batch_of(records)
    with RawClient(broker.bootstrap) as raw:
        raw.send_bytes(
            framed(encode_request(produce_request(topic, {0: batch}, acks=0), PRODUCE_VERSION, 999))
        )
        response = raw.request(metadata_request([topic]), METADATA_VERSION)
        assert [t.name for t in response.topics] == [topic]
    assert_log_matches(records, consume_confluent(broker.bootstrap, topic))


def test_trailing_bytes_after_a_request_are_ignored(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 2)
    records = make_records(10, seed=81)
    batch = batch_of(records)
    with RawClient(broker.bootstrap) as raw:
        response = raw.request(
            metadata_request([topic]), METADATA_VERSION, trailing=b"\x00\x01junk" * 3
        )
        (t,) = response.topics
        assert (t.name, t.error_code, len(t.partitions)) == (topic, 0, 2)
        response = raw.request(
            produce_request(topic, {1: batch}), PRODUCE_VERSION, trailing=b"\xff" * 9
        )
        assert {
            p: (r.error_code, r.base_offset) for p, r in partition_results(response).items()
        } == {1: (0, 0)}
    consumed = consume_confluent(broker.bootstrap, topic)
    assert consumed[0] == []
    assert_log_matches(records, consumed)
