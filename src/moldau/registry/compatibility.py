"""Confluent's compatibility levels, expressed through each format's reader/writer check.

BACKWARD: the new schema reads data written with the previous one; FORWARD: the previous
one reads data written with the new; FULL: both. The `_TRANSITIVE` levels check every
previous version instead of only the latest (Confluent's "Schema Evolution and
Compatibility" documentation).
"""

from __future__ import annotations

from moldau.registry.formats import ParsedSchema

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)


def check(level: str, new: ParsedSchema, previous: list[ParsedSchema]) -> list[str]:
    """Why `new` breaks `level` against `previous` (oldest first); [] when compatible.

    Messages name a previous schema by its position in `previous` (1 = oldest), newest first.

    Raises ValueError on a level that is not one of LEVELS.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown compatibility level {level!r}")
    if level == "NONE" or not previous:
        return []
    first = 0 if level.endswith("_TRANSITIVE") else len(previous) - 1
    base = level.removesuffix("_TRANSITIVE")
    errors: list[str] = []
    for position in range(len(previous) - 1, first - 1, -1):
        old = previous[position]
        label = f"previous schema {position + 1} of {len(previous)}"
        if base in ("BACKWARD", "FULL"):
            errors += [f"{e} (the new schema reading {label}'s data)" for e in new.read_errors(old)]
        if base in ("FORWARD", "FULL"):
            errors += [f"{e} ({label} reading the new schema's data)" for e in old.read_errors(new)]
    return errors
