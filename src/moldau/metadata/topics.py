"""Topic names: what is legal, what is internal, what is not a topic at all.

As Kafka's ``Topic``: ``__consumer_offsets``, ``__transaction_state`` and
``__share_group_state`` are internal (only the broker writes them, clients cannot delete
them or add partitions), and ``__cluster_metadata`` is the KRaft log, not a topic any API
can name.
"""

from __future__ import annotations

import re

from moldau.protocol.errors import ErrorCode

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"
METADATA_TOPIC = "__cluster_metadata"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC})

MAX_TOPIC_NAME = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def topic_name_error(name: str) -> str | None:
    """Why ``name`` cannot be a topic's name (None if it can)."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL_TOPIC.match(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    if name == METADATA_TOPIC:
        return f"'{METADATA_TOPIC}' is the cluster metadata log, not a topic"
    return None


def missing_topic(name: str) -> tuple[ErrorCode, str]:
    """Why ``name`` names no topic: it is illegal, or it does not exist."""
    if (msg := topic_name_error(name)) is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, msg
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
