"""Consumer group offset resets, as kafka-consumer-groups --reset-offsets computes them."""

from __future__ import annotations

RESET_STRATEGIES = ("earliest", "latest", "offset", "shift", "timestamp")


def reset_target(
    strategy: str, *, current: int | None, low: int, high: int, value: int | None, at_time: int
) -> int:
    """The offset kafka-consumer-groups --reset-offsets would commit for one partition.

    `at_time` is the first offset at/after the wanted timestamp (-1: none that late, so
    the log end). Results outside the log are clamped to [low, high], as Kafka does.
    """
    if strategy == "earliest":
        target = low
    elif strategy == "latest":
        target = high
    elif strategy == "offset":
        if value is None:
            raise ValueError("an offset is required")
        target = value
    elif strategy == "shift":
        if current is None:
            raise ValueError("cannot shift: the group has no committed offset there")
        target = current + (value or 0)
    elif strategy == "timestamp":
        target = high if at_time < 0 else at_time
    else:
        raise ValueError(f"unknown reset strategy {strategy!r}, expected one of {RESET_STRATEGIES}")
    return min(max(target, low), high)
