"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-546) measured and enforced as Kafka does.

Quotas are ClientQuotaRecords: ``producer_byte_rate``, ``consumer_byte_rate`` and
``request_percentage`` for a user, a client id, or both, each possibly the default
(``<default>``). A client's quota is the first configured of Kafka's eight levels:

    user + client id,  user + default client,  user,
    default user + client id,  default user + default client,  default user,
    client id,  default client

and clients whose quota comes from the same entity share one rate (a user quota is
shared by all the user's clients). Rates are Kafka's sampled rates: ``quota.window.num``
samples of ``quota.window.size.seconds``, the rate being their total over the elapsed
window (at least ``num - 1`` windows long). A request that takes the rate over the
quota is still served; the client is throttled for (rate - quota) / quota * window, as
the response's throttle_time_ms says, and its connection reads nothing meanwhile.
Request time quotas count the broker CPU time a request took, as a percentage of one
thread (bounded to one window of throttle, as Kafka bounds them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from moldau.metadata.security import QuotaEntity
from moldau.security.acl import KafkaPrincipal
from moldau.stats.rate import Rate

if TYPE_CHECKING:
    from moldau.config.broker import BrokerConfig
    from moldau.metadata.image import MetadataImage
    from moldau.metadata.publisher import LocalChanges

PRODUCE = "producer_byte_rate"
FETCH = "consumer_byte_rate"
REQUEST = "request_percentage"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
# What each entity type may be given (Kafka's QuotaConfig) and whether it is integral.
USER_CLIENT_KEYS = {PRODUCE: True, FETCH: True, REQUEST: False, "controller_mutation_rate": False}
IP_KEYS = {"connection_creation_rate": True}
_SENSORS_KEPT = 10_000  # idle sensors are forgotten beyond this many


@dataclass(frozen=True)
class ClientQuotaConfig:
    samples: int = 11
    window_ms: int = 1000

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ClientQuotaConfig:
        return cls(config.int("quota.window.num"), 1000 * config.int("quota.window.size.seconds"))


SensorKey = tuple[str, str, str]  # (quota key, user tag, client-id tag)


class QuotaCaller(Protocol):
    @property
    def principal(self) -> KafkaPrincipal: ...

    @property
    def client_id(self) -> str | None: ...


class ClientQuotas:
    """The broker's quota sensors; a metadata listener for the configured quotas."""

    def __init__(self, config: ClientQuotaConfig | None = None) -> None:
        self.config = config or ClientQuotaConfig()
        self.quotas: Mapping[QuotaEntity, Mapping[str, float]] = {}
        self._configured: dict[str, set[QuotaEntity]] = {}
        self._sensors: dict[SensorKey, Rate] = {}

    def on_metadata_update(
        self, old: MetadataImage, new: MetadataImage, changes: LocalChanges
    ) -> None:
        self.update(new.security.quotas)

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        if quotas is self.quotas:
            return
        self.quotas = quotas
        self._configured = {}
        for entity, values in quotas.items():
            for key in values:
                self._configured.setdefault(key, set()).add(entity)
        self._sensors.clear()  # tags may now resolve to other entities: start afresh

    def enabled(self, key: str) -> bool:
        return key in self._configured

    def quota(self, key: str, user: str, client_id: str) -> tuple[float, SensorKey] | None:
        """The quota of (user, client id) for ``key`` and the rate it is measured by."""
        configured = self._configured.get(key)
        if not configured:
            return None
        u, c, du, dc = (USER, user), (CLIENT_ID, client_id), (USER, None), (CLIENT_ID, None)
        levels: list[tuple[QuotaEntity, str, str]] = [
            ((c, u), user, client_id),
            ((dc, u), user, client_id),
            ((u,), user, ""),
            ((c, du), user, client_id),
            ((dc, du), user, client_id),
            ((du,), user, ""),
            ((c,), "", client_id),
            ((dc,), "", client_id),
        ]
        for entity, user_tag, client_tag in levels:
            if entity in configured:
                return self.quotas[entity][key], (key, user_tag, client_tag)
        return None

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` (bytes, or request time in percent-seconds); the throttle in
        ms if that took the rate over the quota, else 0."""
        found = self.quota(key, user, client_id)
        if found is None:
            return 0
        bound, sensor_key = found
        rate = self._sensor(sensor_key)
        rate.record(value, now_ms)
        observed = rate.per_second(now_ms)
        if observed <= bound:
            return 0
        throttle = round((observed - bound) / bound * rate.window_size_ms(now_ms))
        if key == REQUEST:
            throttle = min(throttle, self.config.window_ms)
        return throttle

    def record_request(self, key: str, ctx: QuotaCaller, value: float, now_ms: int) -> int:
        """:meth:`record` for the caller of a request (its principal's name, client id)."""
        if key not in self._configured:
            return 0
        return self.record(key, ctx.principal.name, ctx.client_id or "", value, now_ms)

    def unrecord(self, key: str, user: str, client_id: str, value: float) -> None:
        """Take back a recorded value (a throttled fetch answered empty)."""
        found = self.quota(key, user, client_id)
        if found is not None and found[1] in self._sensors:
            self._sensors[found[1]].unrecord(value)

    def max_in_window(self, key: str, user: str, client_id: str) -> float | None:
        """Kafka's getMaxValueInQuotaWindow: what a fetch response may carry at most."""
        found = self.quota(key, user, client_id)
        if found is None:
            return None
        return found[0] * (self.config.samples - 1) * self.config.window_ms / 1000

    def _sensor(self, key: SensorKey) -> Rate:
        rate = self._sensors.get(key)
        if rate is None:
            if len(self._sensors) >= _SENSORS_KEPT:
                self._sensors.pop(next(iter(self._sensors)))
            rate = self._sensors[key] = Rate(self.config.samples, self.config.window_ms)
        return rate
