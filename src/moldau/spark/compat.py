"""What the installed PySpark offers: `moldau[spark]` admits 4.0 and newer.

- PySpark 4.2 added admission control for Python streaming sources
  (`pyspark.sql.streaming.datasource`: read limits, `latestOffset(start, limit)`,
  `SupportsTriggerAvailableNow`). Before it, Spark calls `latestOffset()` without arguments
  and every micro-batch reads all that is available: `maxOffsetsPerTrigger` cannot be
  honoured (the reader logs a warning), and `Trigger.AvailableNow` runs as one batch up to
  the end Spark saw when the query started.
- PySpark 4.1 added `DataSourceStreamArrowWriter`. PySpark 4.0 hands Arrow batches to any
  writer that is a `DataSourceArrowWriter`, streaming ones included, so the stand-in is a
  stream writer that is also one.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import TYPE_CHECKING

from pyspark.sql import datasource

ADMISSION_CONTROL = find_spec("pyspark.sql.streaming.datasource") is not None

if TYPE_CHECKING or ADMISSION_CONTROL:
    from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
else:  # PySpark 4.0, 4.1: no limit is ever passed, nothing asks for AvailableNow support
    ReadLimit = ReadMaxRows = type(None)
    SupportsTriggerAvailableNow = object

if TYPE_CHECKING or hasattr(datasource, "DataSourceStreamArrowWriter"):
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
else:  # PySpark 4.0

    class DataSourceStreamArrowWriter(
        datasource.DataSourceStreamWriter, datasource.DataSourceArrowWriter
    ):
        """A stream writer PySpark 4.0 feeds with Arrow batches."""


__all__ = [
    "ADMISSION_CONTROL",
    "DataSourceStreamArrowWriter",
    "ReadLimit",
    "ReadMaxRows",
    "SupportsTriggerAvailableNow",
]
