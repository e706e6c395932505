"""PySpark data source `moldau`: batch and streaming read and write of Kafka topics."""

from moldau.spark.source import MoldauDataSource

__all__ = ["MoldauDataSource"]
