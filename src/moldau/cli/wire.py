"""One Kafka request from a CLI command, over Moldau's own protocol client.

For the admin APIs librdkafka does not offer (ElectLeaders types, partition
reassignments): the request goes to the first of the bootstrap servers that answers, and
a broker forwards it to the active controller as it would a Java admin client's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, NoReturn

import typer

from moldau.admin.cluster import servers
from moldau.protocol.client import NetworkClient
from moldau.protocol.errors import ErrorCode

REQUEST_TIMEOUT_MS = 30_000




async def send(
    bootstrap: str, message: Any, version: int, timeout_ms: int = REQUEST_TIMEOUT_MS
) -> Any:
    """The response to ``message`` from the first bootstrap server that answers."""
    error: Exception = ConnectionError(f"no server in {bootstrap!r}")
    for address in servers(bootstrap):
        client = NetworkClient("moldau-cli", request_timeout_ms=timeout_ms)
        try:
            return await client.send(address, message, version)
        except (ConnectionError, TimeoutError, OSError) as e:
            error = e
        finally:
            client.close()
    raise error


def run(command: str, bootstrap: str, call: Callable[[], Any]) -> Any:
    """Run ``call()`` (a coroutine) and turn an unreachable cluster into one line on stderr
    and exit code 1."""
    try:
        return asyncio.run(call())
    except ValueError as e:
        fail(command, str(e))
    except (ConnectionError, TimeoutError, OSError) as e:
        fail(command, f"cannot reach {bootstrap}: {e or type(e).__name__}")


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
