"""Shared produce / consume / compare helpers for the broker's end-to-end tests.

Every client gets the same shape: ``produce_<client>(bootstrap, topic, records, codec)``
sends :class:`Rec`s and returns what the broker acknowledged, ``consume_<client>(bootstrap,
topic)`` reads every partition from its log start to its high watermark (no group) and
returns :class:`Got`s per partition. :func:`assert_log_matches` then checks the whole
contract: everything came back, same bytes, in order per partition, nothing extra, offsets
contiguous. :class:`RawClient` speaks the wire protocol with our generated codecs, for
what no client lets us do (replayed idempotent batches, corrupt CRCs, garbage frames).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import struct
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages import RESPONSES
from moldau.protocol.messages.init_producer_id_request import InitProducerIdRequest
from moldau.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from moldau.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from moldau.protocol.messages.request_header import RequestHeader
from moldau.protocol.messages.response_header import ResponseHeader
from moldau.records.record import build_batch
from moldau.server.dispatch import is_flexible
from moldau.testing import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
DEADLINE_S = 60.0  # generous: a slow CI box must not turn a correct broker red
# Versions our raw requests use (the broker implements more).
PRODUCE_VERSION = 9
METADATA_VERSION = 12
INIT_PRODUCER_ID_VERSION = 4

FreshBroker = Callable[..., BrokerProcess]  # the `fresh_broker` fixture


@dataclass(frozen=True)
class Rec:
    """A record as produced. ``value`` is unique per test run: it identifies the record."""

    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int | None = None
    partition: int | None = None  # None: the client's partitioner chooses by key


@dataclass(frozen=True)
class Got:
    """A record as consumed."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None


# value -> (partition, offset) the broker acknowledged (offset None: acknowledged without one)
Acked = dict[bytes, tuple[int, int | None]]
Consumed = dict[int, list[Got]]


# --- records -------------------------------------------------------------------------------


def make_records(
    n: int,
    *,
    seed: int,
    text: bool = False,
    headers: bool = True,
    keys: int = 40,
    timestamp: int | None = None,
) -> list[Rec]:
    """``n`` keyed records with unique values.

    Binary mode puts every byte value (NUL, newline, 0xff ...) in keys, values and header
    values; ``text`` mode keeps them printable and free of ``:`` and newlines, for kcat.
    """
    rnd = random.Random(seed)

    def blob(lo: int, hi: int) -> bytes:
        size = rnd.randint(lo, hi)
        if text:
            return rnd.randbytes(size // 2 + 1).hex().encode()[:size]
        return rnd.randbytes(size)

    key_pool = [b"k%02d-" % i + blob(0, 12) for i in range(keys)]
    records = []
    for i in range(n):
        value = (b"v%07d-" % i) + blob(0, 300)
        hdrs: tuple[tuple[str, bytes], ...] = ()
        if headers:
            hdrs = (("seq", str(i).encode()), ("blob", blob(0, 20)))
        records.append(
            Rec(
                key=rnd.choice(key_pool),
                value=value,
                headers=hdrs,
                timestamp=None if timestamp is None else timestamp + i,
            )
        )
    return records


def batch_of(records: Sequence[Rec], **kwargs: Any) -> bytes:
    """A v2 record batch of ``records`` (build_batch options pass through)."""
    return build_batch([(r.key, r.value, list(r.headers)) for r in records], **kwargs)


def chunks(seq: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


# --- comparing -----------------------------------------------------------------------------


def flatten(consumed: Consumed) -> list[Got]:
    return [g for p in sorted(consumed) for g in consumed[p]]


def assert_log_matches(
    expected: Sequence[Rec],
    consumed: Consumed,
    *,
    acked: Acked | None = None,
    start_offsets: dict[int, int] | None = None,
    check_headers: bool = True,
    check_timestamps: bool = False,
) -> None:
    """The consumed log is exactly ``expected``: nothing lost, nothing extra, same bytes,
    produce order kept within each partition, offsets contiguous from the log start,
    equal keys in one partition, and (given ``acked``) each record at its acked offset.
    """
    index = {r.value: i for i, r in enumerate(expected)}
    assert len(index) == len(expected), "test bug: expected values must be unique"
    seen: set[bytes] = set()
    partition_of_key: dict[bytes | None, int] = {}
    for partition, gots in consumed.items():
        start = (start_offsets or {}).get(partition, 0)
        offsets = [g.offset for g in gots]
        assert offsets == list(range(start, start + len(gots))), (
            f"partition {partition}: offsets not contiguous from {start}: "
            f"{_excerpt_gaps(offsets, start)}"
        )
        last = -1
        for g in gots:
            assert g.value in index, f"p{partition}@{g.offset}: unexpected record {g.value[:40]!r}"
            assert g.value not in seen, f"p{partition}@{g.offset}: duplicate {g.value[:40]!r}"
            seen.add(g.value)
            i = index[g.value]
            want = expected[i]
            assert i > last, f"p{partition}@{g.offset}: {g.value[:20]!r} came back out of order"
            last = i
            assert g.key == want.key, f"p{partition}@{g.offset}: key {g.key!r} != {want.key!r}"
            if check_headers:
                assert g.headers == want.headers, (
                    f"p{partition}@{g.offset}: headers {g.headers!r} != {want.headers!r}"
                )
            if check_timestamps and want.timestamp is not None:
                assert g.timestamp == want.timestamp, f"p{partition}@{g.offset}: timestamp"
            if want.partition is not None:
                assert partition == want.partition, f"{g.value[:20]!r} in wrong partition"
            if g.key is not None:
                assert partition_of_key.setdefault(g.key, partition) == partition, (
                    f"key {g.key!r} spread over partitions"
                )
            if acked is not None:
                # (partition, None): librdkafka's implicit ack, a timed-out request of an
                # idempotent producer that a later request proved written (no offset known)
                assert acked[g.value] in ((partition, g.offset), (partition, None)), (
                    f"{g.value[:20]!r} acked at {acked[g.value]}, found at {(partition, g.offset)}"
                )
    missing = [r.value[:20] for r in expected if r.value not in seen]
    assert not missing, f"{len(missing)} of {len(expected)} records lost, e.g. {missing[:5]}"


def assert_acked_survived(
    acked_records: dict[bytes, Rec], acked: Acked, consumed: Consumed
) -> None:
    """After a crash: every acknowledged record is at its acked offset with the same
    content; unacknowledged ones may or may not be there; offsets stay contiguous."""
    by_position = {(g.partition, g.offset): g for g in flatten(consumed)}
    for partition, gots in consumed.items():
        offsets = [g.offset for g in gots]
        start = offsets[0] if offsets else 0
        assert offsets == list(range(start, start + len(gots))), (
            f"partition {partition}: offsets not contiguous: {_excerpt_gaps(offsets, start)}"
        )
    lost = []
    for value, position in acked.items():
        got = by_position.get(position)
        if got is None or got.value != value:
            lost.append((position, value[:20], None if got is None else got.value[:20]))
            continue
        want = acked_records[value]
        assert (got.key, got.headers) == (want.key, want.headers), f"{position}: content differs"
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost, e.g. {lost[:5]}"


def _excerpt_gaps(offsets: list[int], start: int) -> str:
    for i, offset in enumerate(offsets):
        if offset != start + i:
            return f"expected {start + i} at index {i}, got {offsets[i : i + 5]}"
    return f"{len(offsets)} offsets from {start}"


# --- admin (confluent-kafka AdminClient) -----------------------------------------------------


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(
    bootstrap: str, name: str, partitions: int = 6, config: dict[str, str] | None = None
) -> None:
    client = admin(bootstrap)  # must outlive its futures
    futures = client.create_topics(
        [NewTopic(name, partitions, 1, config=config or {})], operation_timeout=30
    )
    futures[name].result(timeout=30)
    wait_for_topic(bootstrap, name, partitions)


def delete_topic(bootstrap: str, name: str) -> None:
    client = admin(bootstrap)  # must outlive its futures
    client.delete_topics([name], operation_timeout=30)[name].result(timeout=30)


def alter_topic_config(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET of each key."""
    alter_config(bootstrap, ConfigResource.Type.TOPIC, topic, config)


def alter_group_config(bootstrap: str, group: str, config: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET of each key on a GROUP resource (type 32 on the wire)."""
    alter_config(bootstrap, ConfigResource.Type.GROUP, group, config)


def alter_config(bootstrap: str, kind: Any, name: str, config: dict[str, str]) -> None:
    resource = ConfigResource(
        kind,
        name,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in config.items()
        ],
    )
    client = admin(bootstrap)  # must outlive its futures
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def topic_partitions(bootstrap: str, name: str) -> int | None:
    """Partition count from a fresh metadata request, None if the topic does not exist."""
    topics = admin(bootstrap).list_topics(timeout=10).topics
    topic = topics.get(name)
    if topic is None or topic.error is not None:
        return None
    return len(topic.partitions)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    """Poll ``condition``; fail naming ``what`` if it is still false after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def wait_for_topic(bootstrap: str, name: str, partitions: int) -> None:
    wait_until(
        lambda: topic_partitions(bootstrap, name) == partitions,
        f"topic {name} with {partitions} partitions",
    )


def watermarks(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (log start offset, high watermark)."""
    n = topic_partitions(bootstrap, topic)
    assert n is not None, f"topic {topic} does not exist"
    consumer = confluent_consumer(bootstrap)
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in range(n)
        }
    finally:
        consumer.close()


# --- confluent-kafka (librdkafka) -------------------------------------------------------------


def confluent_producer(bootstrap: str, **config: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})


def confluent_consumer(bootstrap: str, **config: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "moldau-tests-unused",  # required by the client; we only assign()
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",  # never skip silently past a missing offset
            **config,
        }
    )


def produce_confluent(
    bootstrap: str,
    topic: str,
    records: Sequence[Rec],
    codec: str = "none",
    **config: Any,
) -> Acked:
    """Produce in several batches (flush between chunks); every record must be acked."""
    producer = confluent_producer(
        bootstrap, **{"compression.type": codec, "batch.num.messages": 250, **config}
    )
    acked: Acked = {}
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    for chunk in chunks(records, 500):
        for r in chunk:
            kwargs: dict[str, Any] = {"key": r.key, "value": r.value, "on_delivery": on_delivery}
            if r.headers:
                kwargs["headers"] = list(r.headers)
            if r.timestamp is not None:
                kwargs["timestamp"] = r.timestamp
            if r.partition is not None:
                kwargs["partition"] = r.partition
            producer.produce(topic, **kwargs)
            producer.poll(0)
        assert producer.flush(DEADLINE_S) == 0, "confluent-kafka: records left unflushed"
    assert not errors, f"confluent-kafka delivery errors: {errors[:5]}"
    assert len(acked) == len(records)
    return acked


def consume_confluent(
    bootstrap: str, topic: str, ends: dict[int, tuple[int, int]] | None = None, **config: Any
) -> Consumed:
    ends = ends or watermarks(bootstrap, topic)
    consumer = confluent_consumer(bootstrap, **config)
    out: Consumed = {p: [] for p in ends}
    try:
        consumer.assign([TopicPartition(topic, p, lo) for p, (lo, _) in ends.items()])
        deadline = time.monotonic() + DEADLINE_S
        while not _reached(out, ends):
            assert time.monotonic() < deadline, f"confluent-kafka: stuck at {_positions(out)}"
            for msg in consumer.consume(1000, timeout=0.5):
                assert msg.error() is None, f"confluent-kafka consume error: {msg.error()}"
                out[msg.partition()].append(
                    Got(
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        tuple(msg.headers() or ()),
                        msg.timestamp()[1],
                    )
                )
    finally:
        consumer.close()
    return out


def _reached(out: Consumed, ends: dict[int, tuple[int, int]]) -> bool:
    return all((out[p][-1].offset + 1 if out[p] else lo) >= hi for p, (lo, hi) in ends.items())


def _positions(out: Consumed) -> dict[int, int]:
    return {p: (gots[-1].offset + 1 if gots else -1) for p, gots in out.items()}


# --- kafka-python --------------------------------------------------------------------------


def _kp_codec(codec: str) -> str | None:
    return None if codec == "none" else codec


def produce_kafka_python(
    bootstrap: str, topic: str, records: Sequence[Rec], codec: str = "none", **config: Any
) -> Acked:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=_kp_codec(codec),
        linger_ms=5,
        batch_size=16384,
        **config,
    )
    acked: Acked = {}
    try:
        for chunk in chunks(records, 500):
            futures = [
                (
                    r,
                    producer.send(
                        topic,
                        key=r.key,
                        value=r.value,
                        headers=list(r.headers),
                        partition=r.partition,
                        timestamp_ms=r.timestamp,
                    ),
                )
                for r in chunk
            ]
            producer.flush(DEADLINE_S)
            for r, future in futures:
                meta = future.get(timeout=DEADLINE_S)
                acked[r.value] = (meta.partition, meta.offset)
    finally:
        producer.close(timeout=10)
    return acked


def consume_kafka_python(
    bootstrap: str, topic: str, ends: dict[int, tuple[int, int]] | None = None, **config: Any
) -> Consumed:
    ends = ends or watermarks(bootstrap, topic)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **config
    )
    out: Consumed = {p: [] for p in ends}
    try:
        tps = {p: KpTopicPartition(topic, p) for p in ends}
        consumer.assign(list(tps.values()))
        for p, (lo, _) in ends.items():
            consumer.seek(tps[p], lo)
        deadline = time.monotonic() + DEADLINE_S
        while not _reached(out, ends):
            assert time.monotonic() < deadline, f"kafka-python: stuck at {_positions(out)}"
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                out[tp.partition] += [_got_python_client(m) for m in msgs]
    finally:
        consumer.close()
    return out


def _got_python_client(m: Any) -> Got:
    """kafka-python's and aiokafka's ConsumerRecord share these attribute names."""
    return Got(m.partition, m.offset, m.key, m.value, tuple(m.headers or ()), m.timestamp)


# --- aiokafka ------------------------------------------------------------------------------


def produce_aiokafka(
    bootstrap: str, topic: str, records: Sequence[Rec], codec: str = "none", **config: Any
) -> Acked:
    async def run() -> Acked:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=_kp_codec(codec),
            linger_ms=5,
            max_batch_size=16384,
            **config,
        )
        await producer.start()
        acked: Acked = {}
        try:
            for chunk in chunks(records, 500):
                futures = [
                    (
                        r,
                        await producer.send(
                            topic,
                            key=r.key,
                            value=r.value,
                            headers=list(r.headers),
                            partition=r.partition,
                            timestamp_ms=r.timestamp,
                        ),
                    )
                    for r in chunk
                ]
                for r, future in futures:
                    meta = await asyncio.wait_for(future, DEADLINE_S)
                    acked[r.value] = (meta.partition, meta.offset)
        finally:
            await producer.stop()
        return acked

    return asyncio.run(run())


def consume_aiokafka(
    bootstrap: str, topic: str, ends: dict[int, tuple[int, int]] | None = None, **config: Any
) -> Consumed:
    ends = ends or watermarks(bootstrap, topic)

    async def run() -> Consumed:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **config
        )
        await consumer.start()
        out: Consumed = {p: [] for p in ends}
        try:
            tps = {p: AioTopicPartition(topic, p) for p in ends}
            consumer.assign(list(tps.values()))
            for p, (lo, _) in ends.items():
                consumer.seek(tps[p], lo)
            deadline = time.monotonic() + DEADLINE_S
            while not _reached(out, ends):
                assert time.monotonic() < deadline, f"aiokafka: stuck at {_positions(out)}"
                batches = await consumer.getmany(timeout_ms=500)
                for tp, msgs in batches.items():
                    out[tp.partition] += [_got_python_client(m) for m in msgs]
        finally:
            # aiokafka's stop() can re-raise the cancellation of its own background task
            # (NoGroupCoordinator._reset_committed_routine): a client shutdown artifact.
            with contextlib.suppress(asyncio.CancelledError):
                await consumer.stop()
        return out

    return asyncio.run(run())


# --- kcat (librdkafka 2.0 from Debian) -------------------------------------------------------

KCAT_HEADER = ("via", b"kcat")


def produce_kcat(
    bootstrap: str, topic: str, records: Sequence[Rec], codec: str = "none", **props: str
) -> None:
    """``kcat -P -K:`` from stdin: text records (see ``make_records(text=True)``), each
    with the one header kcat can add, ``KCAT_HEADER``. kcat reports no offsets. ``props``
    are librdkafka properties (``-X``), e.g. security settings."""
    for r in records:
        assert r.key is not None and b":" not in r.key and b"\n" not in r.value + r.key
        assert r.headers == (KCAT_HEADER,), "kcat adds the same header to every record"
    name, value = KCAT_HEADER
    stdin = b"".join(r.key + b":" + r.value + b"\n" for r in records)  # type: ignore[operator]
    cmd = [
        "kcat",
        "-P",
        "-b",
        bootstrap,
        "-t",
        topic,
        "-K:",
        "-z",
        codec,
        "-H",
        f"{name}={value.decode()}",
        "-X",
        "linger.ms=5",
        "-X",
        "batch.num.messages=250",
        *_kcat_props(props),
    ]
    result = subprocess.run(cmd, input=stdin, capture_output=True, timeout=DEADLINE_S)
    assert result.returncode == 0, f"kcat -P failed: {result.stderr.decode()}"


def _kcat_props(props: dict[str, str]) -> list[str]:
    return [arg for k, v in props.items() for arg in ("-X", f"{k}={v}")]


def consume_kcat(bootstrap: str, topic: str, **props: str) -> Consumed:
    """``kcat -C -e -o beginning -J``: every partition to its end, as JSON lines."""
    cmd = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-o", "beginning", "-J", "-q"]
    cmd += _kcat_props(props)
    result = subprocess.run(cmd, capture_output=True, timeout=DEADLINE_S)
    assert result.returncode == 0, f"kcat -C failed: {result.stderr.decode()}"
    out: Consumed = defaultdict(list)
    for line in result.stdout.decode().splitlines():
        m = json.loads(line)
        flat = m.get("headers") or []
        headers = tuple(
            (flat[i], None if flat[i + 1] is None else flat[i + 1].encode())
            for i in range(0, len(flat), 2)
        )
        out[m["partition"]].append(
            Got(
                m["partition"],
                m["offset"],
                None if m["key"] is None else m["key"].encode(),
                None if m["payload"] is None else m["payload"].encode(),
                headers,
                m.get("ts"),
            )
        )
    return dict(out)


PRODUCERS = {
    "confluent": produce_confluent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
    "kcat": produce_kcat,
}
CONSUMERS = {
    "confluent": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
    "kcat": consume_kcat,
}


def roundtrip_ok(bootstrap: str, topic: str, n: int = 50, *, seed: int = 0) -> None:
    """A fresh confluent-kafka producer and consumer still work: the broker is healthy.
    Reads back only the new records (from the old high watermarks on): retention may be
    moving the log start meanwhile."""
    records = make_records(n, seed=seed)
    before = watermarks(bootstrap, topic) if topic_partitions(bootstrap, topic) else {}
    acked = produce_confluent(bootstrap, topic, records)
    after = watermarks(bootstrap, topic)
    olds = {p: before.get(p, (0, 0))[1] for p in after}
    ends = {p: (olds[p], hi) for p, (_, hi) in after.items()}
    consumed = consume_confluent(bootstrap, topic, ends)
    assert_log_matches(records, consumed, acked=acked, start_offsets=olds)


# --- raw wire protocol ----------------------------------------------------------------------

_SIZE = struct.Struct(">i")


def joined(parts: list[Any]) -> bytes:
    """The bytes of a generated codec's ``encode()`` parts."""
    return b"".join(bytes(p) for p in parts)


def encode_request(message: Any, version: int, correlation_id: int = 1) -> bytes:
    """Header (v1, or v2 for flexible versions) + body, without the size prefix."""
    api_key = message.API_KEY
    header = RequestHeader(api_key, version, correlation_id, "moldau-raw")
    header_version = 2 if is_flexible(type(message), version) else 1
    return joined(header.encode(header_version)) + joined(message.encode(version))


def framed(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


class RawClient:
    """One TCP connection speaking Kafka frames, with our generated codecs."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes | None:
        """The next response frame's payload, or None when the broker closed the socket."""
        head = self._recv_exact(4)
        if head is None:
            return None
        (size,) = _SIZE.unpack(head)
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def request(self, message: Any, version: int, *, trailing: bytes = b"") -> Any:
        """Send one request, return its decoded response (asserting the correlation id)."""
        self._correlation += 1
        payload = encode_request(message, version, self._correlation) + trailing
        self.send_bytes(framed(payload))
        frame = self.recv_frame()
        assert frame is not None, f"broker closed the connection on {type(message).__name__}"
        return decode_response(message.API_KEY, version, frame, self._correlation)

    def is_closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True once the broker closed this connection (EOF/reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def decode_response(api_key: int, version: int, frame: bytes, correlation_id: int) -> Any:
    cls = RESPONSES[api_key]
    flexible = is_flexible(cls, version) and api_key != ApiKey.API_VERSIONS
    buf = memoryview(frame)
    header, pos = ResponseHeader.decode(buf, 1 if flexible else 0)
    assert header.correlation_id == correlation_id
    response, _ = cls.decode(buf, version, pos)
    return response


def metadata_request(topics: list[str] | None = None) -> MetadataRequest:
    return MetadataRequest(
        topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False,
    )


def init_producer_id(raw: RawClient) -> tuple[int, int]:
    """A new idempotent producer id and epoch."""
    response = raw.request(
        InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
        INIT_PRODUCER_ID_VERSION,
    )
    assert response.error_code == 0, f"InitProducerId failed: error {response.error_code}"
    assert response.producer_id >= 0
    return response.producer_id, response.producer_epoch


def produce_request(topic: str, batches: dict[int, bytes], acks: int = -1) -> ProduceRequest:
    """One ProduceRequest carrying ``batches`` (partition -> record batch bytes)."""
    return ProduceRequest(
        acks=acks,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(
                name=topic,
                partition_data=[
                    PartitionProduceData(index=p, records=records) for p, records in batches.items()
                ],
            )
        ],
    )


def partition_results(response: Any) -> dict[int, Any]:
    """partition index -> PartitionProduceResponse of a single-topic ProduceResponse."""
    (topic,) = response.responses
    return {p.index: p for p in topic.partition_responses}
