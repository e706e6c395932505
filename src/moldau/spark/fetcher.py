"""A task's own Fetch loop: raw record batches from the partition leader into Arrow.

librdkafka hands records over one Python object at a time, which caps a task far below
what the broker serves. Over a plaintext listener the task therefore sends Kafka Fetch
requests itself (the project's protocol codecs on a blocking socket) and decodes whole
answers with `columnar`. The next Fetch is sent before the current answer is decoded, so
the broker reads ahead while the task decodes. Leaders and watermarks still come from the
librdkafka consumer the caller owns.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, TopicPartition

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.framing import decode_response, encode_request, response_correlation_id
from moldau.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from moldau.protocol.messages.fetch_response import FetchResponse, PartitionData
from moldau.protocol.primitives import INT32
from moldau.records.batch import RECORDS_OFFSET, BatchInfo, scan_log_prefix
from moldau.records.compression import Compression, decompress
from moldau.records.control import read_marker
from moldau.spark import columnar
from moldau.spark.offsets import OffsetRange

FETCH_VERSION = 11  # topic names, aborted transactions, log start offset; not flexible
MAX_BYTES = 64 * 1024 * 1024
PARTITION_MAX_BYTES = 8 * 1024 * 1024
MAX_WAIT_MS = 500
# Errors after which the leader may have moved or will answer soon: look it up and retry.
RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_ENOUGH_REPLICAS,
    }
)
_PLAINTEXT = ("plaintext", "")


def native_capable(config: dict[str, str], include_headers: bool) -> bool:
    """The task's own Fetch loop serves plaintext listeners and Spark's header-less columns."""
    protocol = config.get("security.protocol", "").lower()
    return protocol in _PLAINTEXT and not include_headers


class OutOfRange(Exception):
    """`offset` is out of the log (OFFSET_OUT_OF_RANGE, or the log ends before it)."""

    def __init__(self, tp: TopicPartition, offset: int) -> None:
        super().__init__(f"{tp.topic}-{tp.partition}: offset {offset} is out of range")
        self.offset = offset


@dataclass
class _Answer:
    """One partition's Fetch answer, split into the batches to decode."""

    data: PartitionData
    records: memoryview
    padded: np.ndarray  # `records` followed by zero padding (`columnar.padded`)
    batches: list[BatchInfo] = field(default_factory=list)
    next_offset: int = 0


class Connection:
    """One blocking connection to a broker; answers come back in request order."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        self._correlation = 0
        self._sent: list[int] = []

    def send(self, request: FetchRequest) -> None:
        self._correlation += 1
        self._sock.sendall(
            encode_request(request, FETCH_VERSION, self._correlation, "moldau-spark")
        )
        self._sent.append(self._correlation)

    def receive(self) -> tuple[FetchResponse, np.ndarray]:
        """The next answer, and its frame's bytes followed by zero padding."""
        frame = self._frame()
        response: FetchResponse = decode_response(ApiKey.FETCH, FETCH_VERSION, _unpadded(frame))
        return response, frame

    def call(self, request: Any, version: int) -> Any:
        """One request of any API, answered before the next is sent (planning queries)."""
        self._correlation += 1
        self._sock.sendall(encode_request(request, version, self._correlation, "moldau-spark"))
        self._sent.append(self._correlation)
        return decode_response(request.API_KEY, version, _unpadded(self._frame()))

    def _frame(self) -> np.ndarray:
        """One answer's bytes, received into a zero-padded array that the decoding reads in
        place (no copy of the records to pad them)."""
        size = bytearray(4)
        self._fill(memoryview(size))
        (n,) = INT32.unpack(size)
        buf = np.empty(n + columnar.PAD, np.uint8)
        buf[n:] = 0
        self._fill(_unpadded(buf))
        if response_correlation_id(_unpadded(buf)) != self._sent.pop(0):
            raise ConnectionError("answers came back out of order")
        return buf

    def _fill(self, view: memoryview) -> None:
        got = 0
        while got < len(view):
            chunk = self._sock.recv_into(view[got:])
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            got += chunk

    def close(self) -> None:
        self._sock.close()


def _unpadded(frame: np.ndarray) -> memoryview:
    return frame.data[: len(frame) - columnar.PAD]


def leader(consumer: Consumer, topic: str, partition: int, timeout_s: float) -> tuple[str, int]:
    metadata = consumer.list_topics(topic, timeout=timeout_s)
    leader = metadata.topics[topic].partitions[partition].leader
    broker = metadata.brokers.get(leader)
    if broker is None:
        raise ConnectionError(f"{topic}-{partition} has no leader right now")
    return broker.host, broker.port


def _request(r: OffsetRange, offset: int, read_committed: bool) -> FetchRequest:
    part = FetchPartition(
        partition=r.partition, fetch_offset=offset, partition_max_bytes=PARTITION_MAX_BYTES
    )
    return FetchRequest(
        max_wait_ms=MAX_WAIT_MS,
        min_bytes=1,
        max_bytes=MAX_BYTES,
        isolation_level=int(read_committed),
        topics=[FetchTopic(topic=r.topic, partitions=[part])],
    )


def _split(response: FetchResponse, frame: np.ndarray, offset: int) -> _Answer:
    data = response.responses[0].partitions[0]
    if data.records is None:
        records, padded = memoryview(b""), columnar.padded(b"")
    else:
        records = memoryview(data.records)
        padded = columnar.padded_view(frame, records)
    answer = _Answer(data, records, padded, next_offset=offset)
    if data.error_code == ErrorCode.NONE:
        answer.batches, _ = scan_log_prefix(records, verify_crc=False)
        if answer.batches:
            answer.next_offset = max(offset, answer.batches[-1].next_offset)
    return answer


def _readable(answer: _Answer, read_committed: bool) -> list[BatchInfo]:
    """The data batches a consumer sees: no control batches, under read_committed none of
    an aborted transaction (the answer lists where each aborted transaction starts; its
    ABORT marker ends it), as Kafka's consumers filter them."""
    records = answer.records
    aborted = sorted(
        (t.first_offset, t.producer_id) for t in answer.data.aborted_transactions or []
    )
    if not read_committed:
        aborted = []
    active: set[int] = set()
    kept: list[BatchInfo] = []
    for batch in answer.batches:
        while aborted and aborted[0][0] <= batch.last_offset:
            active.add(aborted.pop(0)[1])
        if batch.is_control:
            if batch.producer_id in active:
                marker = read_marker(records[batch.position : batch.end_position])
                if marker is not None and not marker.committed:
                    active.discard(batch.producer_id)
        elif not (batch.is_transactional and batch.producer_id in active):
            kept.append(batch)
    return kept


def _decode(
    answer: _Answer, r: OffsetRange, read_committed: bool, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """In offset order: runs of uncompressed batches decoded together where they lie, each
    compressed batch on its own after decompression."""
    records, data = answer.records, answer.padded
    plain: list[BatchInfo] = []
    for batch in _readable(answer, read_committed):
        if batch.record_count == 0:
            continue
        if batch.compression == Compression.NONE:
            plain.append(batch)
            continue
        yield from _arrow(data, plain, r, schema)
        plain = []
        body = decompress(
            batch.compression, records[batch.position + RECORDS_OFFSET : batch.end_position]
        )
        alone = replace(batch, position=-RECORDS_OFFSET, size=len(body) + RECORDS_OFFSET)
        yield from _arrow(columnar.padded(body), [alone], r, schema)
    yield from _arrow(data, plain, r, schema)


def decode_log(
    records: memoryview, batches: list[BatchInfo], r: OffsetRange, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The data records of `r` in `batches` of `records`, read from elsewhere than a Fetch
    (a remote segment object): control batches skipped, no aborted transaction dropped."""
    answer = _Answer(PartitionData(), records, columnar.padded(records), batches)
    yield from _decode(answer, r, False, schema)


def _arrow(
    data: np.ndarray, batches: list[BatchInfo], r: OffsetRange, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    if not batches:
        return
    columns = columnar.decode(data, batches, r.start, r.end)
    if len(columns):
        yield columnar.to_record_batch(columns, r.topic, r.partition, schema)


def fetch_batches(
    consumer: Consumer,
    r: OffsetRange,
    start: int,
    *,
    read_committed: bool,
    schema: pa.Schema,
    timeout_s: float,
    poll_timeout_s: float,
) -> Iterator[pa.RecordBatch]:
    """The records of `r` from `start` on, one Fetch ahead of the decoding.

    Done once the next offset reaches `r.end` (offsets may have gaps: compaction,
    transaction markers). Raises OutOfRange on the broker's OFFSET_OUT_OF_RANGE, or when the
    log ends before `r.end` (it shrank); follows leader moves until `poll_timeout_s`
    passes without records.
    """
    tp = TopicPartition(r.topic, r.partition)
    r = replace(r, start=start)  # a batch fetched at `start` may begin before it
    offset, conn, ahead = start, None, False
    idle_since = time.monotonic()
    try:
        while offset < r.end:
            if time.monotonic() - idle_since > poll_timeout_s:
                raise TimeoutError(f"no records of {r} arrived within {poll_timeout_s}s")
            if conn is None:
                conn = Connection(*leader(consumer, r.topic, r.partition, timeout_s), timeout_s)
            if not ahead:
                conn.send(_request(r, offset, read_committed))
            answer = _split(*conn.receive(), offset)
            code, ahead = answer.data.error_code, False
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                raise OutOfRange(tp, offset)
            if code in RETRIABLE:  # the leader moved or is busy: look it up again
                conn.close()
                conn = None
                time.sleep(0.1)
                continue
            if code != ErrorCode.NONE:
                raise RuntimeError(f"Fetch of {r} failed: {ErrorCode(code).name}")
            if answer.batches:
                if answer.next_offset < r.end:
                    conn.send(_request(r, answer.next_offset, read_committed))  # read ahead
                    ahead = True
                idle_since = time.monotonic()
                yield from _decode(answer, r, read_committed, schema)
                offset = answer.next_offset
            elif consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)[1] < r.end:
                raise OutOfRange(tp, offset)
    finally:
        if conn is not None:
            conn.close()
