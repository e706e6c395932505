"""`moldau storage`: format data directories, as Kafka's kafka-storage tool."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from moldau.config.broker import BrokerConfig, ConfigError
from moldau.protocol.errors import KafkaError
from moldau.storage.log_dir_lock import LogDirLocks
from moldau.storage.meta_properties import format_dirs, new_uuid

app = typer.Typer(help="Format a node's log directories (kafka-storage).", no_args_is_help=True)


@app.command("random-uuid")
def random_uuid() -> None:
    """Print a new cluster id."""
    typer.echo(new_uuid())


@app.command("format")
def format_(
    cluster_id: Annotated[str, typer.Option("--cluster-id", "-t", help="The cluster id.")],
    config: Annotated[Path, typer.Option("--config", "-c", help="The node's server.properties.")],
    override: Annotated[
        list[str] | None, typer.Option("--override", "-o", help="key=value; repeatable.")
    ] = None,
    ignore_formatted: Annotated[
        bool,
        typer.Option("--ignore-formatted", "-g", help="Skip directories already formatted."),
    ] = False,
) -> None:
    """Write meta.properties (cluster id, node id) into every log directory."""
    try:
        broker_config = BrokerConfig.load(config, override or [])
        locks = LogDirLocks.acquire(broker_config.log_dirs)  # never under a running node
        try:
            format_dirs(
                broker_config.log_dirs,
                broker_config.node_id,
                cluster_id,
                ignore_formatted=ignore_formatted,
            )
        finally:
            locks.release()
    except ConfigError as e:
        typer.echo(f"moldau storage format: invalid configuration: {e}", err=True)
        raise typer.Exit(2) from None
    except KafkaError as e:
        typer.echo(f"moldau storage format: {e}", err=True)
        raise typer.Exit(1) from None
    for d in broker_config.log_dirs:
        typer.echo(
            f"Formatting {d} with cluster id {cluster_id} and node id {broker_config.node_id}"
        )
