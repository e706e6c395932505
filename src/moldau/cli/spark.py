"""`moldau spark`: Spark jobs over Moldau (or any Kafka) topics."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from moldau.cli.common import DEFAULT_BOOTSTRAP, BootstrapOption, err, fail, out

app = typer.Typer(help="Spark jobs over topics.", no_args_is_help=True)


@app.command()
def archive(
    output: Annotated[Path, typer.Option("--output", "-o", help="Parquet output directory.")],
    checkpoint: Annotated[
        Path, typer.Option("--checkpoint", help="Checkpoint directory; rerun to copy new data.")
    ],
    topics: Annotated[
        str | None, typer.Option("--topics", "-t", help="Comma-separated topics.")
    ] = None,
    pattern: Annotated[
        str | None, typer.Option("--pattern", help="Regex of topics (new ones are picked up).")
    ] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    max_offsets_per_trigger: Annotated[
        int | None, typer.Option(min=1, help="Cap on records per micro-batch (default: no cap).")
    ] = None,
    master: Annotated[str, typer.Option(help="Spark master.")] = "local[*]",
) -> None:
    """Copy topics into Parquet partitioned by topic, partition and date; rerun for new data."""
    names = [t.strip() for t in (topics or "").split(",") if t.strip()]
    if bool(names) == bool(pattern):
        fail("give --topics or --pattern (one of them)")
    try:  # pyspark is heavy and optional: load it only for Spark commands
        from moldau.spark import archive as archive_job
        from moldau.spark.session import local_session
    except ImportError as exc:
        fail(f"spark commands unavailable: {exc}; install with: pip install 'moldau[spark]'")
    spark = local_session("moldau-archive", master=master)
    spark.sparkContext.setLogLevel("ERROR")
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("starting")

        def show(p: archive_job.ArchiveProgress) -> None:
            progress.update(task, description=f"{p.rows:,} records in {p.batches} batches")

        done = archive_job.archive(
            spark,
            bootstrap=bootstrap,
            output=output,
            checkpoint=checkpoint,
            topics=names or None,
            pattern=pattern,
            max_offsets_per_trigger=max_offsets_per_trigger,
            on_progress=show,
        )
    out.print(f"archived {done.rows} records in {done.batches} batches to {output}")
    spark.stop()
