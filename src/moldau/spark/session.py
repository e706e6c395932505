"""A SparkSession that stays on the loopback interface and knows `format("moldau")`.

Works with `local[*]` and with a standalone cluster (`spark://host:port`): executors start
this interpreter with the driver's `moldau` (and the rest of its `PYTHONPATH`) importable,
so tasks run the same data source code as the driver.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

import moldau
from moldau.spark.source import MoldauDataSource


def executor_pythonpath() -> str:
    """The driver's `moldau` source root first, then the driver's own `PYTHONPATH`."""
    root = str(Path(moldau.__file__).resolve().parents[1])
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    return os.pathsep.join([root, *rest])


def local_session(
    app_name: str = "moldau",
    master: str = "local[*]",
    shuffle_partitions: int = 4,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Without the loopback settings Spark binds to whatever interface the hostname maps to."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
        .config("spark.executorEnv.PYTHONPATH", executor_pythonpath())
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.dataSource.register(MoldauDataSource)
    return spark
