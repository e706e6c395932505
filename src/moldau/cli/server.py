"""`moldau server`: run a node (a single-node broker, or a KRaft broker and/or controller)."""

from __future__ import annotations

import asyncio
import logging
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from moldau.config.broker import BrokerConfig, ConfigError
from moldau.protocol.errors import KafkaError

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
    try:
        import uvloop

        uvloop.run(_serve(broker_config))
    except ConfigError as e:
        typer.echo(f"moldau server: invalid configuration: {e}", err=True)
        raise typer.Exit(2) from None
    except (OSError, KafkaError) as e:
        typer.echo(f"moldau server: {e}", err=True)
        raise typer.Exit(1) from None


async def _serve(config: BrokerConfig) -> None:
    from moldau.metrics.endpoint import start_metrics
    from moldau.server.node import Node
    from moldau.storage.resources import raise_open_files_limit

    node = Node(config)
    node.lock_log_dirs()  # before anything else: a second process on these dirs stops here
    raise_open_files_limit()
    metrics = start_metrics(config)  # binds next: a taken port fails before the node starts
    for b in await node.start():
        print(f"listening on {b.host}:{b.port}", flush=True)
    if metrics is not None:
        metrics.watch_node(node)
        print(f"metrics on {metrics.url}", flush=True)
    stop = node.failed
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await node.stop()
    if metrics is not None:
        metrics.close()
    print("shut down cleanly: logs flushed, checkpoints written", flush=True)
