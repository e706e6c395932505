"""One connection's security: who is calling, and on SASL listeners how far it got.

A plain state machine (Kafka's SaslServerAuthenticator), driven by the dispatcher and
the SaslHandshake / SaslAuthenticate handlers:

* before authentication only ApiVersions and SaslHandshake are accepted; any other
  request closes the connection ("Unexpected Kafka request ... during SASL handshake");
* SaslHandshake picks an enabled mechanism. From v1 the tokens come in SaslAuthenticate
  requests (KIP-152); after a v0 handshake they come as bare size-prefixed frames and
  are answered the same way (:meth:`raw_token`);
* a failed exchange answers SASL_AUTHENTICATION_FAILED and the connection is closed;
* with ``connections.max.reauth.ms`` a session ends after that long (KIP-368): the
  client is told the lifetime (SaslAuthenticate v1+) and must re-authenticate, with the
  same mechanism and as the same principal, by a new SaslHandshake; any other request on
  an expired session closes the connection.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moldau.metadata.security import ScramCredential
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.security.acl import ANONYMOUS, KafkaPrincipal
from moldau.security.listeners import PLAIN, ListenerSecurity
from moldau.security.plain import PlainServer
from moldau.security.scram import MECHANISMS, SaslFailure, ScramMechanism, ScramServer
from moldau.security.tls import TlsConfigError, peer_principal

CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]
Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class State(enum.Enum):
    HANDSHAKE = "handshake"  # SASL: waiting for SaslHandshake (ApiVersions allowed)
    AUTHENTICATE = "authenticate"  # SASL: exchanging tokens
    COMPLETE = "complete"  # authenticated (or a listener without SASL)
    FAILED = "failed"


@dataclass(frozen=True)
class SaslOutcome:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    token: bytes = b""
    session_lifetime_ms: int = 0


class Session:
    def __init__(
        self,
        listener: ListenerSecurity,
        credentials: CredentialLookup,
        principal: KafkaPrincipal = ANONYMOUS,
        clock: Clock = wall_clock_ms,
    ) -> None:
        self.listener = listener
        self.credentials = credentials
        self.clock = clock
        self.principal = principal  # a TLS client certificate's, until SASL says otherwise
        self.state = State.HANDSHAKE if listener.protocol.sasl else State.COMPLETE
        self.mechanism: str | None = None
        self.kafka_framing = True  # False after a v0 handshake: bare tokens follow
        self.reauthenticating = False
        self.reauth_supported = False  # the client sent SaslAuthenticate v1+
        self.expires_at_ms: int | None = None
        self.failure: str | None = None  # why it failed, for the log
        self._server: PlainServer | ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.state == State.COMPLETE and not self.reauthenticating

    @property
    def raw_tokens(self) -> bool:
        """The next frame is a bare SASL token (after a v0 handshake)."""
        return self.state == State.AUTHENTICATE and not self.kafka_framing

    def refusal(self, api_key: int, now_ms: int | None = None) -> str | None:
        """Why a request with ``api_key`` must close the connection, or None."""
        if self.state == State.FAILED:
            return f"request after failed authentication: {self.failure}"
        if self.state == State.HANDSHAKE:
            if api_key in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE):
                return None
            return f"Unexpected Kafka request of type {_name(api_key)} during SASL handshake."
        if self.state == State.AUTHENTICATE:
            if api_key == ApiKey.SASL_AUTHENTICATE:
                return None
            return f"Unexpected Kafka request of type {_name(api_key)} during SASL authentication."
        if self.expires_at_ms is None:  # no session lifetime: nothing to look at the clock for
            return None
        if self.expired(self.clock() if now_ms is None else now_ms) and not (
            api_key == ApiKey.SASL_HANDSHAKE and self.reauth_supported
        ):
            return "session expired (connections.max.reauth.ms) without re-authentication"
        return None

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms

    # -- SaslHandshake ------------------------------------------------------------------
    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        """Start an exchange (or a re-authentication) with ``mechanism``."""
        if self.state == State.COMPLETE:
            if not self.listener.protocol.sasl or not self.reauth_supported:
                return ErrorCode.ILLEGAL_SASL_STATE
            if mechanism != self.mechanism:
                self._fail(
                    f"SASL mechanism '{mechanism}' requested by client is not supported for "
                    f"re-authentication of mechanism '{self.mechanism}'"
                )
                return ErrorCode.UNSUPPORTED_SASL_MECHANISM
            self.reauthenticating = True
        elif self.state != State.HANDSHAKE:
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in self.listener.mechanisms:
            self._fail(f"Unsupported SASL mechanism {mechanism}")
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism
        self.kafka_framing = version >= 1
        if mechanism == PLAIN:
            self._server = PlainServer(self.listener.plain_users)
        else:
            self._server = ScramServer(MECHANISMS[mechanism], self.credentials)
        self.state = State.AUTHENTICATE
        return ErrorCode.NONE

    # -- SaslAuthenticate (or a bare token) ---------------------------------------------
    def authenticate(self, token: bytes, version: int, now_ms: int | None = None) -> SaslOutcome:
        if self.state != State.AUTHENTICATE or not self.kafka_framing:
            what = "after successful authentication" if self.state == State.COMPLETE else "now"
            return SaslOutcome(
                ErrorCode.ILLEGAL_SASL_STATE, f"SaslAuthenticate request received {what}"
            )
        self.reauth_supported |= version > 0
        return self._evaluate(token, self.clock() if now_ms is None else now_ms)

    def raw_token(self, token: bytes, now_ms: int | None = None) -> bytes | None:
        """A token of the legacy (v0 handshake) exchange; None: it failed, close."""
        outcome = self._evaluate(token, self.clock() if now_ms is None else now_ms)
        return None if outcome.error else outcome.token

    def _evaluate(self, token: bytes, now_ms: int) -> SaslOutcome:
        assert self._server is not None
        what = "re-authentication" if self.reauthenticating else "authentication"
        try:
            reply = self._server.evaluate(token)
        except SaslFailure as e:
            self._fail(str(e))
            message = e.client_message or (
                f"Authentication failed during {what} due to invalid credentials with SASL "
                f"mechanism {self.mechanism}"
            )
            return SaslOutcome(ErrorCode.SASL_AUTHENTICATION_FAILED, message)
        if not self._server.complete:
            return SaslOutcome(token=reply)
        assert self._server.user is not None
        principal = KafkaPrincipal("User", self._server.user)
        if self.reauthenticating and principal != self.principal:
            message = (
                f"Cannot change principals during re-authentication from "
                f"{self.principal.type}.{self.principal.name}: {principal.type}.{principal.name}"
            )
            self._fail(message)
            return SaslOutcome(ErrorCode.SASL_AUTHENTICATION_FAILED, message)
        self.principal = principal
        self.state, self.reauthenticating = State.COMPLETE, False
        lifetime = max(self.listener.reauth_ms, 0)
        self.expires_at_ms = now_ms + lifetime if lifetime else None
        return SaslOutcome(token=reply, session_lifetime_ms=lifetime)

    def _fail(self, why: str) -> None:
        self.state, self.failure = State.FAILED, why


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


def open_session(
    listener: ListenerSecurity, transport: Any, credentials: CredentialLookup
) -> Session:
    """The session of a new connection; on TLS listeners its principal is the client
    certificate's (a subject no mapping rule names fails the connection, as in Kafka)."""
    session = Session(listener, credentials)
    if listener.protocol.tls and transport is not None:
        try:
            session.principal = peer_principal(
                transport.get_extra_info("ssl_object"), listener.principal_mapper
            )
        except TlsConfigError as e:
            session._fail(str(e))
    return session
