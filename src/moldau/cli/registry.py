"""`moldau registry`: a schema registry node against any Kafka-protocol cluster."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer

from moldau.cli.common import (
    DEFAULT_BOOTSTRAP,
    CommandConfigOption,
    PropertyOption,
    ServiceBootstrapOption,
    check_reachable,
    fail,
    parse_pairs,
    user_properties,
)


def registry(
    bootstrap: ServiceBootstrapOption = DEFAULT_BOOTSTRAP,
    listener: Annotated[
        str,
        typer.Option(help="http(s)://HOST:PORT the REST API is served at (port 0: any)."),
    ] = "http://127.0.0.1:8081",
    advertised_url: Annotated[
        str | None,
        typer.Option(help="URL other registry nodes forward writes to (default: the listener)."),
    ] = None,
    replication_factor: Annotated[
        int | None,
        typer.Option(
            min=1, help="Replicas of a new _schemas topic (default: 3, or fewer brokers)."
        ),
    ] = None,
    primary_eligible: Annotated[
        bool, typer.Option(help="May this node become the primary (the one that writes)?")
    ] = True,
    basic_auth_users: Annotated[
        Path | None,
        typer.Option(
            "--basic-auth-users",
            metavar="FILE",
            help="HTTP basic authentication against this users file ('user: password[,role]' "
            "lines, as Confluent's registry's password file); without it, anyone may call.",
        ),
    ] = None,
    command_config: CommandConfigOption = None,
    properties: PropertyOption = None,
    listener_properties: Annotated[
        list[str] | None,
        typer.Option(
            "--listener-property",
            "-L",
            metavar="KEY=VALUE",
            help="TLS of an https listener, Kafka's ssl.* keys (ssl.keystore.location, "
            "ssl.keystore.type, ssl.truststore.location, ...); repeatable.",
        ),
    ] = None,
) -> None:
    """Serve Confluent Schema Registry's REST API, with the schemas in the cluster's
    `_schemas` topic. Several nodes on one cluster elect a primary; any takes requests."""
    try:  # web dependencies are an extra: load them only for this command
        from moldau.admin.preflight import Unreachable, client_security
        from moldau.registry.auth import RegistryAccess, users_file_credentials
        from moldau.registry.kafkastore import (
            KafkastoreConfigError,
            client_properties,
            split_properties,
        )
        from moldau.registry.runner import RegistryNode
        from moldau.security.tls import TlsConfigError, client_context, server_context
    except ImportError as exc:
        fail(f"the registry is unavailable: {exc}; install with: pip install 'moldau[registry]'")
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # librdkafka's keys, or Confluent's registry's `kafkastore.*` (Kafka's Java client keys).
    user, store = split_properties(user_properties(properties, command_config))
    if store:
        try:
            user.update(client_properties(store.get))
        except KafkastoreConfigError as exc:
            fail(str(exc))
    check_reachable(bootstrap, user)
    tls_settings = parse_pairs(listener_properties, "--listener-property").get
    try:
        https = listener.startswith("https:")
        tls = server_context(tls_settings) if https else None
        forward_tls = client_context(tls_settings) if https else None
    except TlsConfigError as exc:
        fail(f"--listener-property: {exc}")
    access = None
    if basic_auth_users is not None:
        try:
            access = RegistryAccess(users_file_credentials(basic_auth_users))
        except (OSError, ValueError) as exc:
            fail(f"--basic-auth-users: {exc}")
    try:
        node = RegistryNode(
            bootstrap,
            listener,
            advertised=advertised_url,
            client_config=user,
            security=client_security(user),
            eligible=primary_eligible,
            replication_factor=replication_factor,
            tls=tls,
            forward_tls=forward_tls,
            access=access,
        )
    except (ValueError, OSError, Unreachable) as exc:
        fail(f"cannot serve the registry at {listener}: {exc}")
    try:
        node.start()
    except Exception as exc:
        fail(f"the registry did not start: {exc}")
    print(f"schema registry on {node.url} (cluster {bootstrap})", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    node.stop()
