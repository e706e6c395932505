"""A local SparkSession that stays on the loopback interface and knows `format("moldau")`."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from moldau.spark.source import MoldauDataSource


def local_session(
    app_name: str = "moldau", master: str = "local[*]", shuffle_partitions: int = 4
) -> SparkSession:
    """Without the loopback settings Spark binds to whatever interface the hostname maps to."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.dataSource.register(MoldauDataSource)
    return spark
