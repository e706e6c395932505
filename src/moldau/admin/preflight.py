"""Can the cluster be reached? Asked before a CLI command (or a console page) uses it.

librdkafka retries an unreachable bootstrap server until a request times out, then names
neither the address nor the cause (``_TRANSPORT: ... Broker transport failure``). So the
tools first connect to the bootstrap servers themselves, as their clients would (TCP, TLS
and SASL from the same client properties), ask ApiVersions and an empty Metadata with a
short timeout, and turn a failure into one line naming the address and the cause: an
unresolvable name, a refused connection, no answer, a TLS mismatch or handshake failure,
failed authentication.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import ssl
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from moldau.admin.cluster import servers
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.client import Address, Connection
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.api_versions_request import ApiVersionsRequest
from moldau.protocol.messages.metadata_request import MetadataRequest
from moldau.security.client import ClientSecurity
from moldau.security.listeners import SUPPORTED_MECHANISMS, SecurityProtocol

PREFLIGHT_TIMEOUT_S = 5.0
CLIENT_ID = "moldau-cli"
API_VERSIONS_VERSION = 3
METADATA_MAX_VERSION = 12


class Unreachable(Exception):
    """No bootstrap server can be used; the message is the one line to show."""


def parse_servers(bootstrap: str) -> list[Address]:
    """``host:port[,host:port]``; Unreachable naming a malformed entry."""
    try:
        found = list(servers(bootstrap))
    except ValueError as e:
        raise Unreachable(str(e)) from None
    if not found:
        raise Unreachable("no bootstrap server given")
    return found


def client_security(properties: Mapping[str, str]) -> ClientSecurity:
    """What librdkafka's properties (``security.protocol``, ``ssl.*``, ``sasl.*``) ask of a
    connection, as Moldau's own client does it; Unreachable if they cannot be used."""
    name = properties.get("security.protocol", "plaintext").upper()
    try:
        protocol = SecurityProtocol(name)
    except ValueError:
        choices = ", ".join(p.value for p in SecurityProtocol)
        raise Unreachable(f"security.protocol={name} is not one of {choices}") from None
    context = _tls_context(properties) if protocol.tls else None
    mechanism = properties.get("sasl.mechanism") or properties.get("sasl.mechanisms") or ""
    mechanism = mechanism.upper() or "GSSAPI"
    if not protocol.sasl or mechanism not in SUPPORTED_MECHANISMS:
        return ClientSecurity(protocol, context)  # other mechanisms: not checked here
    return ClientSecurity(
        protocol,
        context,
        mechanism,
        properties.get("sasl.username", ""),
        properties.get("sasl.password", ""),
    )


def _tls_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    ca = properties.get("ssl.ca.location")
    cert, key = properties.get("ssl.certificate.location"), properties.get("ssl.key.location")
    try:
        if ca is not None and Path(ca).is_dir():
            context = ssl.create_default_context(capath=ca)
        else:
            context = ssl.create_default_context(cafile=ca)
        if cert and key:
            context.load_cert_chain(cert, key, properties.get("ssl.key.password"))
    except (OSError, ssl.SSLError) as e:
        raise Unreachable(f"cannot use the TLS settings (ssl.*): {e}") from None
    if properties.get("enable.ssl.certificate.verification", "true").lower() == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif properties.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    return context


def ensure_reachable(
    bootstrap: str, security: ClientSecurity, timeout_s: float = PREFLIGHT_TIMEOUT_S
) -> None:
    """Return once a bootstrap server answered; Unreachable (one line) if none did."""
    servers = parse_servers(bootstrap)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(probe(servers, security, timeout_s))
        return
    raise RuntimeError("ensure_reachable() blocks: call it outside the event loop")


async def probe(servers: list[Address], security: ClientSecurity, timeout_s: float) -> None:
    """Try the servers at once; the first that answers wins."""
    tasks = [asyncio.ensure_future(_probe(a, security, timeout_s)) for a in servers]
    failures: list[str] = []
    try:
        for done in asyncio.as_completed(tasks):
            try:
                await done
                return
            except Unreachable as e:
                failures.append(str(e))
    finally:
        for task in tasks:
            task.cancel()
    if len(failures) == 1:
        raise Unreachable(failures[0])
    raise Unreachable("no bootstrap server answered: " + "; ".join(sorted(failures)))


async def _probe(address: Address, security: ClientSecurity, timeout_s: float) -> None:
    host, port = address
    where = f"{host}:{port}"
    deadline = time.monotonic() + timeout_s
    try:
        await asyncio.wait_for(
            asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout_s
        )
    except socket.gaierror as e:
        raise Unreachable(f"cannot reach {where}: unknown host {host!r} ({e.strerror})") from None
    except TimeoutError:
        raise Unreachable(f"cannot reach {where}: resolving {host!r} timed out") from None
    ids = itertools.count(1)

    async def exchange(conn: Connection, message: Any, version: int) -> Any:
        left = max(0.0, deadline - time.monotonic())
        return await asyncio.wait_for(conn.send(message, version, next(ids), CLIENT_ID), left)

    step = "connecting"
    conn: Connection | None = None
    try:
        conn = await Connection.open(address, timeout_s, security, exchange)
        step = "ApiVersions"
        request = ApiVersionsRequest(client_software_name=CLIENT_ID, client_software_version="1")
        versions = await exchange(conn, request, API_VERSIONS_VERSION)
        if versions.error_code:
            raise Unreachable(f"{where} refused ApiVersions: {ErrorCode(versions.error_code).name}")
        if security.protocol.sasl and security.mechanism is None:
            return  # a login this probe cannot do (GSSAPI, OAUTHBEARER): leave it to the client
        step = "Metadata"
        supported = {v.api_key: v for v in versions.api_keys}.get(ApiKey.METADATA)
        version = min(supported.max_version, METADATA_MAX_VERSION) if supported else 1
        await exchange(conn, MetadataRequest(topics=[], allow_auto_topic_creation=False), version)
    except Unreachable:
        raise
    except Exception as e:
        raise Unreachable(f"cannot reach {where}: {_cause(e, step, security, timeout_s)}") from None
    finally:
        if conn is not None:
            conn.close()


def _cause(error: BaseException, step: str, security: ClientSecurity, timeout_s: float) -> str:
    """Why a connection attempt failed, in a user's words."""
    protocol = security.protocol
    if isinstance(error, ConnectionRefusedError):
        return "connection refused (is a broker listening there?)"
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"TLS certificate not accepted: {error.verify_message}"
    if isinstance(error, ssl.SSLError):
        return (
            f"TLS handshake failed ({error.reason or error}): is it a TLS listener? "
            f"(this client uses security.protocol={protocol})"
        )
    if "SASL" in str(error):  # the login was refused (ClientSecurity.authenticate)
        return str(error) if "authentication" in str(error) else f"authentication failed: {error}"
    if protocol.tls and step == "connecting":
        return (
            "the TLS handshake got no TLS answer: is it a plaintext listener? "
            f"(this client uses security.protocol={protocol})"
        )
    hint = ""
    if not protocol.tls and step != "Metadata":  # TLS servers drop a plaintext request
        hint = f" (a TLS listener? this client uses security.protocol={protocol})"
    elif not protocol.sasl and step == "Metadata":  # SASL servers drop requests before login
        hint = f" (a SASL listener? this client uses security.protocol={protocol})"
    if isinstance(error, TimeoutError):
        return f"no answer to {step} within {timeout_s:g} s{hint}"
    if isinstance(error, OSError) and error.strerror and not isinstance(error, ConnectionError):
        return error.strerror
    return f"the connection was closed during {step}{hint}"
