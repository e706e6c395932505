"""The `moldau` command: the server plus client tools that work against any Kafka broker."""

from __future__ import annotations

from typing import Annotated

import typer

from moldau.cli import (
    acls,
    cluster,
    groups,
    perf,
    schemas,
    spark,
    storage,
    topics,
    transactions,
    users,
)
from moldau.cli.common import show_client_logs
from moldau.cli.console import console
from moldau.cli.consume import consume
from moldau.cli.leader_election import leader_election
from moldau.cli.produce import produce
from moldau.cli.reassign import reassign
from moldau.cli.registry import registry
from moldau.cli.server import server

app = typer.Typer(
    name="moldau",
    help="Moldau: a Kafka-compatible streaming platform.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def main(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show the Kafka client's (librdkafka) logs.")
    ] = False,
) -> None:
    if verbose:
        show_client_logs()


app.command("server")(server)
app.add_typer(topics.app, name="topics")
app.command("produce")(produce)
app.command("consume")(consume)
app.add_typer(groups.app, name="groups")
app.add_typer(spark.app, name="spark")
app.command("console")(console)
app.command("registry")(registry)
app.add_typer(schemas.app, name="schemas")
app.add_typer(perf.app, name="perf")
app.add_typer(storage.app, name="storage")
app.add_typer(cluster.app, name="cluster")
app.command("leader-election")(leader_election)
app.command("reassign")(reassign)
app.add_typer(acls.app, name="acls")
app.add_typer(users.app, name="users")
app.add_typer(transactions.app, name="transactions")
