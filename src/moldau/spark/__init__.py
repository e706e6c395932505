"""PySpark data source `moldau`: batch and streaming read and write of Kafka topics.

`MoldauDataSource` is imported on first use: Spark's Python workers import this package to
unpickle a reader or writer, and a read task needs none of the writer's or the planner's
modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moldau.spark.source import MoldauDataSource

__all__ = ["MoldauDataSource"]


def __getattr__(name: str) -> Any:
    if name == "MoldauDataSource":
        from moldau.spark.source import MoldauDataSource

        return MoldauDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
