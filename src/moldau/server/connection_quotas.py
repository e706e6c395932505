"""Connection limits as Kafka's ``ConnectionQuotas`` has them, as plain bookkeeping.

- ``max.connections``: broker-wide; when reached, listeners stop accepting until a
  connection closes (the kernel's backlog holds new ones meanwhile). The inter-broker
  listener is exempt once there is more than one listener, so replication keeps its
  connections whatever clients do.
- ``max.connection.creation.rate``: new connections per second, broker-wide; acceptors
  are delayed to keep to it (again not the inter-broker listener).
- ``max.connections.per.ip`` with ``max.connections.per.ip.overrides``: one more
  connection from an address at its limit is closed right after accept.

Kafka measures the rate over sampled windows; here it is "at most N accepts in any
one-second window", which is the same limit without the sampling.
"""

from __future__ import annotations

import ipaddress
from collections import Counter, deque

UNLIMITED = 2**31 - 1  # Kafka's Int.MaxValue default
RATE_WINDOW_S = 1.0


def normalize_ip(address: str) -> str:
    """One spelling per address: IPv4-mapped IPv6 (dual-stack listeners) as plain IPv4."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


class ConnectionQuotas:
    def __init__(
        self,
        *,
        max_connections: int = UNLIMITED,
        max_connections_per_ip: int = UNLIMITED,
        per_ip_overrides: dict[str, int] | None = None,
        max_connection_creation_rate: int = UNLIMITED,
        inter_broker_listener: str = "",
    ) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = {normalize_ip(a): n for a, n in (per_ip_overrides or {}).items()}
        self.max_connection_creation_rate = max_connection_creation_rate
        self.inter_broker_listener = inter_broker_listener
        self.total = 0
        self._per_ip: Counter[str] = Counter()
        self._listeners: set[str] = set()
        self._accepts: deque[float] = deque()  # accept times within the last rate window

    def add_listener(self, listener: str) -> None:
        self._listeners.add(listener)

    def _protected(self, listener: str) -> bool:
        return listener == self.inter_broker_listener and len(self._listeners) > 1

    def slot_available(self, listener: str) -> bool:
        """May ``listener`` accept another connection now (``max.connections``)?"""
        return self._protected(listener) or self.total < self.max_connections

    def throttle_s(self, listener: str, now: float) -> float:
        """How long ``listener`` must wait before its next accept (creation rate)."""
        if self._protected(listener) or self.max_connection_creation_rate >= UNLIMITED:
            return 0.0
        while self._accepts and self._accepts[0] <= now - RATE_WINDOW_S:
            self._accepts.popleft()
        if len(self._accepts) < self.max_connection_creation_rate:
            return 0.0
        return self._accepts[0] + RATE_WINDOW_S - now

    def limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(normalize_ip(ip), self.max_connections_per_ip)

    def inc(self, listener: str, ip: str, now: float) -> bool:
        """Count an accepted connection; False if ``ip`` is at its limit (close it)."""
        if self.max_connection_creation_rate < UNLIMITED and not self._protected(listener):
            self._accepts.append(now)
        ip = normalize_ip(ip)
        if self._per_ip[ip] >= self.limit_for(ip):
            return False
        self._per_ip[ip] += 1
        self.total += 1
        return True

    def dec(self, ip: str) -> None:
        ip = normalize_ip(ip)
        self._per_ip[ip] -= 1
        if self._per_ip[ip] <= 0:
            del self._per_ip[ip]
        self.total -= 1

    def count(self, ip: str) -> int:
        return self._per_ip[normalize_ip(ip)]
