"""One request in flight per destination, request timeouts and retry backoff (RequestManager).

A response is handled only if it answers the request still in flight to that node: after a
state transition every connection is reset, so late answers to an earlier election or
epoch are dropped instead of being counted again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Connection:
    correlation_id: int | None = None
    sent_ms: int = 0
    backoff_until_ms: int = 0


class RequestManager:
    def __init__(self, request_timeout_ms: int, retry_backoff_ms: int) -> None:
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._connections: dict[int, _Connection] = {}

    def is_ready(self, node: int, now_ms: int) -> bool:
        conn = self._connections.get(node)
        if conn is None:
            return True
        if conn.correlation_id is not None:
            return now_ms >= conn.sent_ms + self._request_timeout_ms
        return now_ms >= conn.backoff_until_ms

    def has_inflight(self, now_ms: int) -> bool:
        return any(
            conn.correlation_id is not None and now_ms < conn.sent_ms + self._request_timeout_ms
            for conn in self._connections.values()
        )

    def has_timed_out(self, node: int, now_ms: int) -> bool:
        conn = self._connections.get(node)
        return (
            conn is not None
            and conn.correlation_id is not None
            and now_ms >= conn.sent_ms + self._request_timeout_ms
        )

    def next_ready_ms(self, node: int) -> int:
        """When `node` can take a request again (0 if it can now)."""
        conn = self._connections.get(node)
        if conn is None:
            return 0
        if conn.correlation_id is not None:
            return conn.sent_ms + self._request_timeout_ms
        return conn.backoff_until_ms

    def on_sent(self, node: int, correlation_id: int, now_ms: int) -> None:
        self._connections[node] = _Connection(correlation_id, now_ms)

    def is_expected(self, node: int, correlation_id: int) -> bool:
        conn = self._connections.get(node)
        return conn is not None and conn.correlation_id == correlation_id

    def on_result(self, node: int, success: bool, now_ms: int) -> None:
        """The expected response arrived: ready again, or back off after a failure."""
        if success:
            self._connections.pop(node, None)
        else:
            self._connections[node] = _Connection(backoff_until_ms=now_ms + self._retry_backoff_ms)

    def reset_all(self) -> None:
        self._connections.clear()
