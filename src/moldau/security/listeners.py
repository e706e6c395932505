"""Each listener's security, from Kafka's configs.

``listener.security.protocol.map`` names each listener's protocol (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL). Every security key is looked up for a listener first as
``listener.name.<listener in lower case>.<key>``, then as ``<key>``; a SASL mechanism's
JAAS configuration only as ``listener.name.<listener>.<mechanism in lower case>.sasl.jaas.config``
(as a Kafka broker reads it). :class:`ListenerSecurity` is what connections on one
listener need.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from moldau.config.broker import BROKER_KEYS, BrokerConfig, ConfigError
from moldau.security.jaas import JaasConfig, JaasError, parse_jaas
from moldau.security.scram import MECHANISMS as SCRAM_MECHANISMS
from moldau.security.tls import PrincipalMapper, TlsConfigError, server_context

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = frozenset({PLAIN, *SCRAM_MECHANISMS})


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class SecurityConfigError(ConfigError):
    """A listener's security settings are missing or wrong; the message says which."""


def protocol_map(config: BrokerConfig) -> dict[str, SecurityProtocol]:
    """``listener.security.protocol.map`` (``NAME:PROTOCOL,...``)."""
    out: dict[str, SecurityProtocol] = {}
    for item in filter(
        None, (v.strip() for v in config.get("listener.security.protocol.map").split(","))
    ):
        name, sep, protocol = item.partition(":")
        try:
            out[name.strip()] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            raise SecurityConfigError(
                f"listener.security.protocol.map: '{item}' is not NAME:PROTOCOL with PROTOCOL one "
                f"of {', '.join(p.value for p in SecurityProtocol)}"
            ) from None
        if not sep:
            raise SecurityConfigError(
                f"listener.security.protocol.map: '{item}' is not NAME:PROTOCOL"
            )
    return out


def listener_protocol(config: BrokerConfig, listener: str) -> SecurityProtocol:
    mapping = protocol_map(config)
    if listener in mapping:
        return mapping[listener]
    controllers = [n.strip() for n in config.get("controller.listener.names").split(",")]
    if listener in controllers:
        return SecurityProtocol.PLAINTEXT  # KRaft: an unmapped controller listener is PLAINTEXT
    raise SecurityConfigError(
        f"No security protocol defined for listener {listener}: add {listener}:PROTOCOL to "
        "listener.security.protocol.map"
    )


class ListenerConfig:
    """One listener's view of the broker's properties (its overrides first)."""

    def __init__(self, config: BrokerConfig, listener: str) -> None:
        self.props = config.props
        self.defaults = config
        self.listener = listener
        self.prefix = f"listener.name.{listener.lower()}."

    def get(self, key: str) -> str | None:
        for k in (self.prefix + key, key):
            value = self.props.get(k)
            if value is not None and value.strip() != "":
                return value.strip()
        spec = BROKER_KEYS.get(key)
        return spec.default if spec is not None and spec.default != "" else None

    def jaas(self, mechanism: str) -> JaasConfig | None:
        key = f"{self.prefix}{mechanism.lower()}.sasl.jaas.config"
        text = self.props.get(key)
        if not text:
            return None
        try:
            return parse_jaas(text)
        except JaasError as e:
            raise SecurityConfigError(f"{key}: {e}") from None

    def int(self, key: str) -> int:
        value = self.get(key) or "0"
        try:
            return int(value)
        except ValueError:
            raise SecurityConfigError(f"{key}: '{value}' is not an integer") from None

    def mechanisms(self, key: str = "sasl.enabled.mechanisms") -> list[str]:
        return [m.strip().upper() for m in (self.get(key) or "").split(",") if m.strip()]


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: SecurityProtocol
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: PrincipalMapper = field(default_factory=PrincipalMapper)
    mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(default_factory=dict)
    reauth_ms: int = 0  # connections.max.reauth.ms (0: sessions never expire)
    max_receive: int = 524288  # sasl.server.max.receive.size: frames before authentication

    @classmethod
    def plaintext(cls, name: str = "PLAINTEXT") -> ListenerSecurity:
        return cls(name, SecurityProtocol.PLAINTEXT)


def listener_security(config: BrokerConfig, name: str) -> ListenerSecurity:
    """What a listener's connections need; SecurityConfigError if the settings are off."""
    protocol = listener_protocol(config, name)
    lc = ListenerConfig(config, name)
    try:
        mapper = PrincipalMapper(lc.get("ssl.principal.mapping.rules"))
        ctx = server_context(lc.get) if protocol.tls else None
    except TlsConfigError as e:
        raise SecurityConfigError(f"listener {name}: {e}") from None
    if not protocol.sasl:
        return ListenerSecurity(name, protocol, ctx, mapper)
    mechanisms = lc.mechanisms()
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported or not mechanisms:
        raise SecurityConfigError(
            f"listener {name}: sasl.enabled.mechanisms={','.join(mechanisms)}: "
            f"{', '.join(unsupported) or 'none'} not supported; use "
            f"{', '.join(sorted(SUPPORTED_MECHANISMS))}"
        )
    users: dict[str, str] = {}
    if PLAIN in mechanisms:
        jaas = lc.jaas(PLAIN)
        if jaas is None:
            raise SecurityConfigError(
                f"listener {name} enables PLAIN but {lc.prefix}plain.sasl.jaas.config is not set "
                '(PlainLoginModule required user_NAME="password" ...;)'
            )
        users = jaas.plain_users
    return ListenerSecurity(
        name,
        protocol,
        ctx,
        mapper,
        tuple(mechanisms),
        users,
        reauth_ms=lc.int("connections.max.reauth.ms"),
        max_receive=lc.int("sasl.server.max.receive.size"),
    )
