"""One Kafka request from a CLI command, over Moldau's own protocol client.

For the admin APIs librdkafka does not offer (ElectLeaders types, partition
reassignments): the request goes to the first of the bootstrap servers that answers, and
a broker forwards it to the active controller as it would a Java admin client's. The
connection takes TLS and SASL from the same client properties as librdkafka's
(``--command-config``, ``-X``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import typer

from moldau.admin.preflight import Unreachable, client_security, ensure_reachable, parse_servers
from moldau.protocol.client import Address, NetworkClient
from moldau.protocol.errors import ErrorCode
from moldau.security.client import ClientSecurity

REQUEST_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Target:
    """The cluster a command talks to: its bootstrap servers and how to connect to them."""

    bootstrap: str
    security: ClientSecurity = field(default_factory=ClientSecurity)

    @classmethod
    def of(cls, command: str, bootstrap: str, properties: dict[str, str]) -> Target:
        """From the user's client properties; fails (one line) if they cannot be used."""
        try:
            return cls(bootstrap, client_security(properties))
        except Unreachable as e:
            fail(command, str(e))

    @property
    def servers(self) -> list[Address]:
        return parse_servers(self.bootstrap)


async def send(
    target: Target, message: Any, version: int, timeout_ms: int = REQUEST_TIMEOUT_MS
) -> Any:
    """The response to ``message`` from the first bootstrap server that answers."""
    error: Exception = ConnectionError(f"no server in {target.bootstrap!r}")
    for address in target.servers:
        client = NetworkClient(
            "moldau-cli", request_timeout_ms=timeout_ms, security=target.security
        )
        try:
            return await client.send(address, message, version)
        except (ConnectionError, TimeoutError, OSError) as e:
            error = e
        finally:
            client.close()
    raise error


def run(command: str, target: Target, call: Callable[[], Any]) -> Any:
    """Check that the cluster can be reached, then run ``call()`` (a coroutine); failures
    are one line on stderr and exit code 1."""
    try:
        ensure_reachable(target.bootstrap, target.security)
        return asyncio.run(call())
    except Unreachable as e:
        fail(command, str(e))
    except (ConnectionError, TimeoutError, OSError) as e:
        fail(command, f"cannot reach {target.bootstrap}: {e or type(e).__name__}")


def fail(command: str, message: str) -> NoReturn:
    typer.echo(f"moldau {command}: {message}", err=True)
    raise typer.Exit(1)


def error_text(code: int, message: str | None = None) -> str:
    """``NAME: message`` for a Kafka error code."""
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return f"{name}: {message}" if message else name
