"""How this node connects to another node's listener: TLS, then a SASL login.

:class:`ClientSecurity` is what ``moldau.protocol.client.NetworkClient`` takes for its
connections (inter-broker and controller traffic): an SSL context for TLS listeners and,
for SASL ones, the mechanism and this node's credentials, taken from the broker config
as Kafka takes them (``inter.broker.listener.name`` with
``sasl.mechanism.inter.broker.protocol``, a controller listener with
``sasl.mechanism.controller.protocol``; the ``username``/``password`` options of the
listener's JAAS config for that mechanism).
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from moldau.config.broker import BrokerConfig
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from moldau.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from moldau.security.listeners import (
    PLAIN,
    SUPPORTED_MECHANISMS,
    ListenerConfig,
    SecurityConfigError,
    SecurityProtocol,
    listener_protocol,
)
from moldau.security.plain import plain_token
from moldau.security.scram import MECHANISMS, SaslFailure, ScramClient
from moldau.security.tls import TlsConfigError, client_context

Exchange = Callable[[Any, int], Awaitable[Any]]
"""Sends one request (message, version) on the connection being set up; its response."""

SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2


@dataclass(frozen=True)
class ClientSecurity:
    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    @classmethod
    def for_listener(
        cls, config: BrokerConfig, listener: str, mechanism_key: str
    ) -> ClientSecurity:
        """Connecting to ``listener`` of another node; SecurityConfigError if the settings
        for it are incomplete."""
        protocol = listener_protocol(config, listener)
        lc = ListenerConfig(config, listener)
        try:
            ctx = client_context(lc.get) if protocol.tls else None
        except TlsConfigError as e:
            raise SecurityConfigError(f"listener {listener} (as a client): {e}") from None
        if not protocol.sasl:
            return cls(protocol, ctx)
        mechanism = (lc.get(mechanism_key) or "").upper()
        if mechanism not in SUPPORTED_MECHANISMS:
            raise SecurityConfigError(f"{mechanism_key}={mechanism} is not supported")
        jaas = lc.jaas(mechanism)
        if jaas is None or "username" not in jaas.options or "password" not in jaas.options:
            raise SecurityConfigError(
                f"{lc.prefix}{mechanism.lower()}.sasl.jaas.config must give this node's "
                f'username="..." and password="..." for connections to listener {listener}'
            )
        return cls(protocol, ctx, mechanism, jaas.options["username"], jaas.options["password"])

    @classmethod
    def inter_broker(cls, config: BrokerConfig) -> ClientSecurity:
        return cls.for_listener(
            config,
            config.get("inter.broker.listener.name"),
            "sasl.mechanism.inter.broker.protocol",
        )

    @classmethod
    def controller(cls, config: BrokerConfig) -> ClientSecurity:
        listener = config.get("controller.listener.names").split(",")[0].strip()
        return cls.for_listener(config, listener, "sasl.mechanism.controller.protocol")

    async def authenticate(self, exchange: Exchange) -> int:
        """Log in on a new connection (SaslHandshake v1, then SaslAuthenticate); the session
        lifetime the server gave (0: unlimited). ConnectionError if it refuses us."""
        if self.mechanism is None:
            return 0
        handshake = await exchange(
            SaslHandshakeRequest(mechanism=self.mechanism), SASL_HANDSHAKE_VERSION
        )
        if handshake.error_code:
            raise ConnectionError(
                f"SASL handshake refused ({ErrorCode(handshake.error_code).name}); the server "
                f"offers {', '.join(handshake.mechanisms or []) or 'no mechanism'}"
            )
        if self.mechanism == PLAIN:
            return (await self._step(exchange, plain_token(self.username, self.password)))[1]
        scram = ScramClient(MECHANISMS[self.mechanism], self.username, self.password)
        try:
            server_first, _ = await self._step(exchange, scram.first())
            server_final, lifetime = await self._step(exchange, scram.final(server_first))
            scram.verify(server_final)
        except SaslFailure as e:
            raise ConnectionError(f"SASL {self.mechanism} login failed: {e}") from None
        return lifetime

    @staticmethod
    async def _step(exchange: Exchange, token: bytes) -> tuple[bytes, int]:
        response = await exchange(
            SaslAuthenticateRequest(auth_bytes=token), SASL_AUTHENTICATE_VERSION
        )
        if response.error_code:
            raise ConnectionError(
                f"SASL authentication failed ({ErrorCode(response.error_code).name}): "
                f"{response.error_message}"
            )
        return bytes(response.auth_bytes), response.session_lifetime_ms
