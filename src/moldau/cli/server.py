"""`moldau server`: run a single-node broker (a controller quorum of one)."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from moldau.server.config import BrokerConfig, ConfigError, Listener

log = logging.getLogger("moldau.server")


def server(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Kafka-style server.properties file.")
    ] = None,
    override: Annotated[
        list[str] | None,
        typer.Option("--override", "-o", help="key=value, overrides the file; repeatable."),
    ] = None,
) -> None:
    """Start the broker. Stops cleanly on SIGTERM/SIGINT (flush + checkpoints)."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        broker_config = BrokerConfig.load(config, override or [])
    except ConfigError as e:
        typer.echo(f"moldau server: invalid configuration: {e}", err=True)
        raise typer.Exit(2) from None
    for key in broker_config.unknown:
        log.warning("unknown configuration '%s' was supplied but is not used", key)
    from moldau.storage.resources import raise_open_files_limit

    raise_open_files_limit()
    try:
        import uvloop

        uvloop.run(_serve(broker_config))
    except OSError as e:
        typer.echo(f"moldau server: {e}", err=True)
        raise typer.Exit(1) from None


async def _serve(config: BrokerConfig) -> None:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import Dispatcher
    from moldau.server.network import start_listener

    broker = Broker(config)
    broker.load()
    dispatcher = Dispatcher(broker)
    max_frame = config.int("socket.request.max.bytes")
    servers = []
    bound: list[Listener] = []
    for listener in config.listeners:
        srv = await start_listener(listener.host, listener.port, dispatcher, max_frame)
        servers.append(srv)
        host, port = srv.sockets[0].getsockname()[:2]
        bound.append(Listener(listener.name, listener.host or host, port))
    advertised = config.advertised or bound
    broker.register(
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
    for srv in servers:
        srv.close()
    broker.shutdown()
    print("shut down cleanly: logs flushed, checkpoints written", flush=True)
