"""The records of the `_schemas` topic, in Confluent Schema Registry's JSON formats.

Keys are JSON objects with a `keytype` (SCHEMA, CONFIG, MODE, DELETE_SUBJECT,
CLEAR_SUBJECT, NOOP), a `magic` and, as the type needs, `subject` and `version`; values are
JSON objects, or null (a tombstone: a hard delete, or a config/mode set back to its
default). Keys are written with Confluent's field order and no spaces so that compaction
keeps one record per key whichever registry (Confluent's, Karapace, Moldau) wrote it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

TOPIC = "_schemas"

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"


@dataclass(frozen=True)
class Key:
    """A `_schemas` key; `subject` None is the global config or mode."""

    keytype: str
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        fields: dict[str, Any] = {"keytype": self.keytype}
        if self.keytype != NOOP:
            fields["subject"] = self.subject
        if self.keytype == SCHEMA:
            fields["version"] = self.version
        fields["magic"] = 1 if self.keytype == SCHEMA else 0
        return json.dumps(fields, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Key | None:
        """The key, or None for a key this registry does not know (skipped, as Karapace
        and Confluent skip keys of newer versions)."""
        try:
            fields = json.loads(data)
            keytype = fields["keytype"]
        except (ValueError, KeyError, TypeError):
            return None
        version = fields.get("version")
        return cls(keytype, fields.get("subject"), version if isinstance(version, int) else None)


def encode_value(value: dict[str, Any] | None) -> bytes | None:
    return None if value is None else json.dumps(value, separators=(",", ":")).encode()


def decode_value(data: bytes | None) -> dict[str, Any] | None:
    """The value, None for a tombstone; a value that is not a JSON object counts as one."""
    if data is None:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
