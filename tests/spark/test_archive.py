"""The archive job copies every record once, however often it runs."""

from __future__ import annotations

import pyarrow.dataset
import pytest
from typer.testing import CliRunner

from moldau.cli.main import app
from moldau.spark.archive import archive
from tests.spark.clients import create_topic, produce

pytestmark = pytest.mark.spark


def test_archive_twice_copies_each_record_once(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "arch-a", 2)
    create_topic(broker.bootstrap, "arch-b", 1)
    first = [
        ("arch-a", r)
        for r in produce(
            broker.bootstrap, "arch-a", [(i % 2, None, b"a%d" % i) for i in range(200)]
        )
    ]
    first += [
        ("arch-b", r)
        for r in produce(broker.bootstrap, "arch-b", [(0, b"k", b"b%d" % i) for i in range(50)])
    ]
    out, ck = tmp_path / "out", tmp_path / "ck"
    run = archive(
        spark,
        bootstrap=broker.bootstrap,
        output=out,
        checkpoint=ck,
        topics=["arch-a", "arch-b"],
        max_offsets_per_trigger=90,
    )
    assert run.rows == 250 and run.batches >= 3
    second = [
        ("arch-a", r)
        for r in produce(broker.bootstrap, "arch-a", [(i % 2, None, b"c%d" % i) for i in range(30)])
    ]
    rerun = archive(
        spark, bootstrap=broker.bootstrap, output=out, checkpoint=ck, topics=["arch-a", "arch-b"]
    )
    assert rerun.rows == 30
    rows = spark.read.parquet(str(out)).select("topic", "partition", "offset", "value").collect()
    got = sorted((r["topic"], r["partition"], r["offset"], r["value"]) for r in rows)
    assert got == sorted((t, r.partition, r.offset, r.value) for t, r in first + second)
    dirs = {p.relative_to(out).parts[:3] for p in out.rglob("*.parquet")}
    assert all(
        d[0].startswith("topic=") and d[1].startswith("partition=") and d[2].startswith("date=")
        for d in dirs
    )


def test_cli_archive_by_pattern(spark, broker, tmp_path):
    """Runs last in this module: the command stops the (shared) Spark session when done."""
    create_topic(broker.bootstrap, "cli-arch-1", 1)
    produce(broker.bootstrap, "cli-arch-1", [(0, None, b"x%d" % i) for i in range(25)])
    args = ["spark", "archive", "-b", broker.bootstrap, "--pattern", "cli-arch-.*"]
    args += ["--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "archived 25 records" in result.output
    files = pyarrow.dataset.dataset(tmp_path / "out", format="parquet", partitioning="hive")
    assert sorted(files.to_table().column("value").to_pylist()) == sorted(
        b"x%d" % i for i in range(25)
    )
