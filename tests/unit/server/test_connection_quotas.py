"""ConnectionQuotas: Kafka's connection limits, stepped by hand with a fake clock."""

from __future__ import annotations

import pytest

from moldau.config.broker import BrokerConfig, ConfigError
from moldau.server.connection_quotas import ConnectionQuotas, normalize_ip


def test_per_ip_limit_and_overrides() -> None:
    q = ConnectionQuotas(max_connections_per_ip=2, per_ip_overrides={"127.0.0.2": 3})
    assert q.inc("L", "127.0.0.1", 0) and q.inc("L", "127.0.0.1", 0)
    assert not q.inc("L", "127.0.0.1", 0), "third connection from a 2-connection address"
    assert q.count("127.0.0.1") == 2 and q.total == 2
    assert all(q.inc("L", "127.0.0.2", 0) for _ in range(3))
    assert not q.inc("L", "127.0.0.2", 0)
    q.dec("127.0.0.1")
    assert q.inc("L", "::ffff:127.0.0.1", 0), "a slot freed; mapped IPv4 counts as IPv4"
    assert not q.inc("L", "127.0.0.1", 0)


def test_max_connections_blocks_all_but_the_inter_broker_listener() -> None:
    q = ConnectionQuotas(max_connections=2, inter_broker_listener="INTERNAL")
    q.add_listener("EXTERNAL")
    assert q.inc("EXTERNAL", "10.0.0.1", 0) and q.inc("EXTERNAL", "10.0.0.2", 0)
    assert not q.slot_available("EXTERNAL")
    assert not q.slot_available("INTERNAL"), "one listener only: nothing is protected"
    q.add_listener("INTERNAL")
    assert q.slot_available("INTERNAL") and not q.slot_available("EXTERNAL")
    q.dec("10.0.0.1")
    assert q.slot_available("EXTERNAL")


def test_creation_rate_delays_accepts_to_n_per_second() -> None:
    q = ConnectionQuotas(max_connection_creation_rate=3)
    for t in (0.0, 0.1, 0.2):
        assert q.throttle_s("L", t) == 0
        assert q.inc("L", "127.0.0.1", t)
    assert q.throttle_s("L", 0.3) == pytest.approx(0.7)
    assert q.throttle_s("L", 0.99) == pytest.approx(0.01)
    assert q.throttle_s("L", 1.0) == 0, "the accept at 0.0 has left the one-second window"
    assert q.inc("L", "127.0.0.1", 1.0)
    assert q.throttle_s("L", 1.0) == pytest.approx(0.1)


def test_normalize_ip() -> None:
    assert normalize_ip("::ffff:10.1.2.3") == "10.1.2.3"
    assert normalize_ip("::1") == "::1"
    assert normalize_ip("fe80::1%eth0") == "fe80::1"


def test_config_keys_validated_and_resolved_as_kafka() -> None:
    config = BrokerConfig({"max.connections.per.ip.overrides": "localhost:5, 127.0.0.9:7,::1:3"})
    assert config.ip_connection_overrides == {"127.0.0.1": 5, "127.0.0.9": 7, "::1": 3}
    assert config.int("max.connections") == 2**31 - 1
    assert config.int("queued.max.request.bytes") == 100 * 1024 * 1024
    assert config.int("connections.max.idle.ms") == 600000
    with pytest.raises(ConfigError, match="zero only if"):
        BrokerConfig({"max.connections.per.ip": "0"})
    BrokerConfig({"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "::1:2"})
    with pytest.raises(ConfigError, match="host:count"):
        BrokerConfig({"max.connections.per.ip.overrides": "127.0.0.1"})
    with pytest.raises(ConfigError, match="larger or equal"):
        BrokerConfig({"queued.max.request.bytes": "1000"})
    BrokerConfig({"queued.max.request.bytes": "-1"})
    with pytest.raises(ConfigError, match="at least 0"):
        BrokerConfig({"max.connection.creation.rate": "-5"})
