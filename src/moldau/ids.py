"""Where state machines get ids and randomness: injected, so a simulation can seed them.

Cores that mint member ids, incarnation ids or random jitter take an :class:`IdSource`
instead of calling ``uuid.uuid4()`` or ``random`` directly; a running node passes
:data:`SYSTEM_IDS`, a test or simulation a :class:`SeededIds`, and the same seed then
replays the same run.
"""

from __future__ import annotations

import random
import uuid
from typing import Protocol


class IdSource(Protocol):
    def uuid4(self) -> uuid.UUID:
        """A random (version 4) UUID."""
        ...

    def random(self) -> float:
        """A float in [0, 1)."""
        ...


class SystemIds:
    """The operating system's randomness (what a running node uses)."""

    def uuid4(self) -> uuid.UUID:
        return uuid.uuid4()

    def random(self) -> float:
        return random.random()


class SeededIds:
    """Deterministic ids and randomness from a seed."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)

    def random(self) -> float:
        return self._rng.random()


SYSTEM_IDS: IdSource = SystemIds()
