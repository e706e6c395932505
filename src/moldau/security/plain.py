"""SASL/PLAIN (RFC 4616) against the users of the listener's JAAS configuration.

The client sends ``authzid NUL authcid NUL password`` in one message; an authorization
id, if given, must be the user itself (as Kafka's PlainSaslServer requires).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import NoReturn

from moldau.security.scram import SaslFailure


class PlainServer:
    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.user: str | None = None
        self.complete = False

    def evaluate(self, message: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("unexpected PLAIN message after the exchange")
        parts = bytes(message).split(b"\0")
        if len(parts) != 3:
            _fail(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            _fail("Invalid SASL/PLAIN response: not UTF-8")
        if not user:
            _fail("Authentication failed: username not specified")
        if not password:
            _fail("Authentication failed: password not specified")
        if authzid and authzid != user:
            _fail(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        expected = self.users.get(user)
        # Compared even for unknown users, so timing does not tell which users exist.
        if (
            not hmac.compare_digest((expected or "\0").encode(), password.encode())
            or expected is None
        ):
            raise SaslFailure(
                f"Invalid username or password (user {user!r})",
                "Authentication failed: Invalid username or password",
            )
        self.user, self.complete = user, True
        return b""


def _fail(message: str) -> NoReturn:
    """PLAIN's failures are told to the client as they are (Kafka's PlainSaslServer)."""
    raise SaslFailure(message, message)


def plain_token(user: str, password: str) -> bytes:
    """The client's PLAIN message."""
    return b"\0" + user.encode() + b"\0" + password.encode()
