"""`moldau console`: the web UI for any Kafka-protocol cluster."""

from __future__ import annotations

import socket
from typing import Annotated

import typer

from moldau.cli.common import (
    DEFAULT_BOOTSTRAP,
    CommandConfigOption,
    PropertyOption,
    ServiceBootstrapOption,
    check_reachable,
    fail,
    metrics_urls,
    user_properties,
)


def console(
    bootstrap: ServiceBootstrapOption = DEFAULT_BOOTSTRAP,
    host: Annotated[str, typer.Option(help="Address the web server binds.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Web server port (0: any free port).")
    ] = 8080,
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics",
            metavar="URL",
            help="Prometheus endpoint of a broker (repeatable, or comma-separated); "
            "without one, charts sample offsets.",
        ),
    ] = None,
    sample_interval: Annotated[
        float, typer.Option(min=0.2, help="Seconds between chart samples.")
    ] = 5.0,
    schema_registry: Annotated[
        str | None,
        typer.Option(
            "--schema-registry",
            envvar="MOLDAU_SCHEMA_REGISTRY",
            metavar="URL",
            help="Schema registry URL for the schema pages and decoding messages "
            "(default: the registry the brokers serve, if any).",
        ),
    ] = None,
    schema_registry_auth: Annotated[
        str | None,
        typer.Option(
            "--schema-registry-auth",
            envvar="MOLDAU_SCHEMA_REGISTRY_AUTH",
            metavar="USER:PASSWORD",
            help="HTTP basic credentials for the registry (default: sasl.username/password).",
        ),
    ] = None,
    command_config: CommandConfigOption = None,
    properties: PropertyOption = None,
) -> None:
    """Serve the web console: cluster overview, topics, messages, consumer groups, charts."""
    try:  # web dependencies are an extra: load them only for this command
        import uvicorn

        from moldau.console.app import ConsoleSettings, create_app
    except ImportError as exc:
        fail(f"the console is unavailable: {exc}; install with: pip install 'moldau[console]'")
    user = user_properties(properties, command_config)
    check_reachable(bootstrap, user)  # an unreachable cluster: one line now, not slow pages
    settings = ConsoleSettings(
        bootstrap=bootstrap,
        properties=user,
        metrics_urls=metrics_urls(metrics),
        sample_interval_s=sample_interval,
        schema_registry_url=schema_registry,
        schema_registry_auth=schema_registry_auth,
    )
    # Bind first: port 0 then has a real number to print, and a busy port fails here, clearly.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        fail(f"cannot listen on {host}:{port}: {exc.strerror}")
    bound_port = sock.getsockname()[1]
    url_host = f"[{host}]" if family == socket.AF_INET6 else host
    print(f"Moldau console on http://{url_host}:{bound_port}/ (cluster {bootstrap})", flush=True)
    config = uvicorn.Config(create_app(settings), log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
