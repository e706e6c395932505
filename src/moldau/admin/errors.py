"""Kafka errors from librdkafka as one line a user can search for."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException


def describe_error(error: KafkaError | KafkaException) -> str:
    """`NAME: message`, Kafka's error name first so users can search for it."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if isinstance(error, KafkaError):
        return f"{error.name()}: {error.str()}"
    return str(error)
