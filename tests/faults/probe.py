"""Raw acks=all produce requests to one chosen node, outside any client library: the exact
error code the broker answers (a client would retry and hide it), and a request that can
be sent to a paused process and answered after it resumes. Probe records join the history
like the workload's (their values are unique), so the checker covers them too."""

from __future__ import annotations

import contextlib
import time

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from tests.faults.checker import Ack, Failure
from tests.faults.workload import Recorder
from tests.integration.helpers import (
    RawClient,
    Rec,
    batch_of,
    decode_response,
    encode_request,
    framed,
    partition_results,
    produce_request,
)

PRODUCE_VERSION = 9


class ProduceProbe:
    def __init__(self, host: str, port: int, topic: str, recorder: Recorder) -> None:
        self.address = f"{host}:{port}"
        self.topic = topic
        self.recorder = recorder
        self.correlation = 0
        self.client: RawClient | None = None
        self.waiting: tuple[int, int, str] | None = None  # (correlation, partition, value)

    def send(self, partition: int, value: str, timeout_ms: int = 2_000) -> None:
        """Send one record (acks=all) without waiting for the answer."""
        if self.client is None:
            self.client = RawClient(self.address, timeout=5.0)
        request = produce_request(self.topic, {partition: batch_of([Rec(None, value.encode())])})
        request.timeout_ms = timeout_ms
        self.correlation += 1
        self.recorder.sent(partition, value)
        self.client.send_bytes(framed(encode_request(request, PRODUCE_VERSION, self.correlation)))
        self.waiting = (self.correlation, partition, value)

    def result(self, timeout: float = 30.0) -> str:
        """The error name of the last request's answer ("NONE": acknowledged), recorded."""
        assert self.client is not None and self.waiting is not None
        correlation, partition, value = self.waiting
        self.waiting = None
        self.client.sock.settimeout(timeout)
        try:
            frame = self.client.recv_frame()
        except (TimeoutError, OSError):
            frame = None
        if frame is None:
            self.close()
            return self._failed(partition, value, "NO_ANSWER")
        response = decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, frame, correlation)
        result = partition_results(response)[partition]
        name = ErrorCode(result.error_code).name
        if result.error_code == 0:
            self.recorder.delivered_raw(Ack(partition, result.base_offset, value, time.monotonic()))
            return name
        return self._failed(partition, value, name)

    def produce(self, partition: int, value: str, timeout_ms: int = 2_000) -> str:
        try:
            self.send(partition, value, timeout_ms)
        except OSError:
            self.close()
            return self._failed(partition, value, "NO_CONNECTION")
        return self.result(timeout_ms / 1000 + 10)

    def _failed(self, partition: int, value: str, name: str) -> str:
        self.recorder.delivered_raw(Failure(partition, value, name, time.monotonic()))
        return name

    def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(OSError):
                self.client.close()
            self.client = None
