"""`moldau server`: run a single-node broker (a controller quorum of one)."""

from __future__ import annotations

import asyncio
import logging
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from moldau.server.config import BrokerConfig, ConfigError, Listener

if TYPE_CHECKING:
    from moldau.security.listeners import ListenerSecurity

log = logging.getLogger("moldau.server")


def server(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Kafka-style server.properties file.")
    ] = None,
    override: Annotated[
        list[str] | None,
        typer.Option("--override", "-o", help="key=value, overrides the file; repeatable."),
    ] = None,
    ephemeral: Annotated[
        bool,
        typer.Option(
            "--ephemeral", help="Keep the data in a new temporary log.dirs, removed on exit."
        ),
    ] = False,
) -> None:
    """Start the broker. Stops cleanly on SIGTERM/SIGINT (flush + checkpoints)."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not ephemeral:
        _run(config, override or [])
        return
    data_dir = tempfile.mkdtemp(prefix="moldau-ephemeral-")
    log.info("ephemeral: data in %s, removed on exit", data_dir)
    try:
        _run(config, [*(override or []), f"log.dirs={data_dir}"])
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _run(config: Path | None, override: list[str]) -> None:
    try:
        broker_config = BrokerConfig.load(config, override)
    except ConfigError as e:
        typer.echo(f"moldau server: invalid configuration: {e}", err=True)
        raise typer.Exit(2) from None
    for key in broker_config.unknown:
        log.warning("unknown configuration '%s' was supplied but is not used", key)
    from moldau.security.listeners import SecurityConfigError, listener_security

    try:
        security = {
            li.name: listener_security(broker_config, li.name) for li in broker_config.listeners
        }
    except SecurityConfigError as e:
        typer.echo(f"moldau server: invalid configuration: {e}", err=True)
        raise typer.Exit(2) from None
    try:
        import uvloop

        uvloop.run(_serve(broker_config, security))
    except OSError as e:
        typer.echo(f"moldau server: {e}", err=True)
        raise typer.Exit(1) from None


async def _serve(config: BrokerConfig, security: dict[str, ListenerSecurity]) -> None:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import Dispatcher
    from moldau.server.network import NetworkLimits, start_listener

    broker = Broker(config)
    await broker.start()
    dispatcher = Dispatcher(broker.services, security)
    limits = NetworkLimits.from_config(config)  # one memory pool and quota set for all listeners
    servers = []
    bound: list[Listener] = []
    for listener in config.listeners:
        tls = security[listener.name].ssl_context
        srv = await start_listener(
            listener.host,
            listener.port,
            dispatcher,
            limits,
            listener.name,
            tls,
            dispatcher.connection_opened,
        )
        servers.append(srv)
        host, port = srv.sockets[0].getsockname()[:2]
        bound.append(Listener(listener.name, listener.host or host, port))
    advertised = config.advertised or bound
    await broker.register(
        [
            Listener(a.name, a.host or "127.0.0.1", a.port or b.port)
            for a, b in zip(advertised, bound, strict=False)
        ]
    )
    broker.start_background()
    for b in bound:
        print(f"listening on {b.host}:{b.port}", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await broker.controlled_shutdown()
    for srv in servers:
        srv.close()
    broker.shutdown()
    print("shut down cleanly: logs flushed, checkpoints written", flush=True)
