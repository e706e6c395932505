"""The `moldau` command: the server plus client tools that work against any Kafka broker."""

from __future__ import annotations

from typing import Annotated

import typer

from moldau.cli import groups, topics
from moldau.cli.common import fail, show_client_logs
from moldau.cli.consume import consume
from moldau.cli.produce import produce
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


def _spark_app() -> typer.Typer:
    """The Spark commands; pyspark is an optional extra, so without it only they fail."""
    try:
        from moldau.cli.spark import app as spark
    except ImportError as exc:
        reason = str(exc)
        spark = typer.Typer(help=f"Spark jobs (unavailable: {reason}).")

        @spark.callback(invoke_without_command=True)
        def unavailable() -> None:
            fail(f"spark commands unavailable: {reason}; install with: pip install 'moldau[spark]'")

    return spark


app.command("server")(server)
app.add_typer(topics.app, name="topics")
app.command("produce")(produce)
app.command("consume")(consume)
app.add_typer(groups.app, name="groups")
app.add_typer(_spark_app(), name="spark")
