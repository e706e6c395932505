"""A wire-level client that logs in with SASL: what no client library lets a test do
(the legacy v0 handshake and bare tokens, a request before logging in, a chosen
SaslAuthenticate version)."""

from __future__ import annotations

from typing import Any

from moldau.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from moldau.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from moldau.security.plain import plain_token
from moldau.security.scram import MECHANISMS, ScramClient
from tests.integration.helpers import RawClient, framed


class SaslRawClient(RawClient):
    def handshake(self, mechanism: str, version: int = 1) -> Any:
        return self.request(SaslHandshakeRequest(mechanism=mechanism), version)

    def authenticate(self, token: bytes, version: int = 2) -> Any:
        return self.request(SaslAuthenticateRequest(auth_bytes=token), version)

    def bare_token(self, token: bytes) -> bytes | None:
        """A legacy (v0 handshake) token: sent and answered without Kafka headers."""
        self.send_bytes(framed(token))
        return self.recv_frame()

    def login(self, mechanism: str, user: str, password: str, version: int = 2) -> Any:
        """Handshake and authenticate; the last SaslAuthenticate response."""
        assert self.handshake(mechanism).error_code == 0
        if mechanism == "PLAIN":
            return self.authenticate(plain_token(user, password), version)
        scram = ScramClient(MECHANISMS[mechanism], user, password)
        first = self.authenticate(scram.first(), version)
        if first.error_code:
            return first
        final = self.authenticate(scram.final(bytes(first.auth_bytes)), version)
        if not final.error_code:
            scram.verify(bytes(final.auth_bytes))
        return final
