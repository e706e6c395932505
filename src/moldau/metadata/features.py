"""KRaft feature flags: ``metadata.version``, finalized as a FeatureLevelRecord in the
metadata log, reported in ApiVersions and changed with UpdateFeatures, as Kafka does.

Moldau supports ``metadata.version`` 3.0-IV1 (level 1, Kafka's first KRaft level) to
3.3-IV3 (level 7): the metadata records it writes and reads are those of 3.3-IV3
(BrokerRegistrationChangeRecord with ``in_controlled_shutdown``, leader recovery state).
Later levels stand for protocol Moldau's brokers do not speak to each other (Fetch v14+
from 3.5-IV0, log-dir assignment in 3.7-IV2, dynamic quorums in 3.9-IV0).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

METADATA_VERSION = "metadata.version"

# Kafka's MetadataVersion levels of the KRaft era: level -> (name, did the metadata
# record formats change at this level). A downgrade across a change may lose metadata.
LEVELS: dict[int, tuple[str, bool]] = {
    1: ("3.0-IV1", True),
    2: ("3.1-IV0", False),
    3: ("3.2-IV0", True),
    4: ("3.3-IV0", False),
    5: ("3.3-IV1", True),
    6: ("3.3-IV2", True),
    7: ("3.3-IV3", True),
    8: ("3.4-IV0", True),
    9: ("3.5-IV0", False),
    10: ("3.5-IV1", False),
    11: ("3.5-IV2", True),
    12: ("3.6-IV0", False),
    13: ("3.6-IV1", True),
    14: ("3.6-IV2", True),
    15: ("3.7-IV0", True),
    16: ("3.7-IV1", False),
    17: ("3.7-IV2", True),
    18: ("3.7-IV3", False),
    19: ("3.7-IV4", False),
    20: ("3.8-IV0", False),
    21: ("3.9-IV0", False),
}
MINIMUM_KRAFT_LEVEL = 1
LATEST_LEVEL = 7  # 3.3-IV3
GROUP_VERSION = "group.version"
"""Level 1: KIP-848 consumer groups (ConsumerGroupHeartbeat); finalized at bootstrap."""
# KIP-932's share groups: level 1 is Kafka 4.1's stable share-group protocol. Moldau
# always has it on, so it is finalized at 1 without a record (UpdateFeatures cannot turn
# it off).
SHARE_VERSION = "share.version"
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (MINIMUM_KRAFT_LEVEL, LATEST_LEVEL),
    GROUP_VERSION: (0, 1),
    SHARE_VERSION: (1, 1),
}
BOOTSTRAP_LEVELS: dict[str, int] = {GROUP_VERSION: 1}
"""Features besides metadata.version that a new cluster finalizes, as Kafka 4 does."""
ALWAYS_FINALIZED: dict[str, int] = {SHARE_VERSION: 1}


class UpgradeType(IntEnum):
    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


def level_of(name: str) -> int | None:
    """The level of a metadata.version name ("3.3-IV3", or "3.3" for its last level)."""
    matches = [lvl for lvl, (n, _) in LEVELS.items() if n == name or n.split("-")[0] == name]
    return max(matches) if matches else None


def metadata_changed(a: int, b: int) -> bool:
    """Kafka's MetadataVersion.checkIfMetadataChanged: a level in (low, high] changed
    the metadata record formats."""
    low, high = sorted((a, b))
    return any(LEVELS[level][1] for level in range(low + 1, high + 1))


def check_update(
    node_id: int, finalized: Mapping[str, int], feature: str, level: int, upgrade: int
) -> str | None:
    """Why ``feature`` cannot be set to ``level`` (None: it can), in Kafka's words;
    every refusal is INVALID_UPDATE_VERSION."""

    def invalid(why: str) -> str:
        return f"Invalid update version {level} for feature {feature}. {why}"

    if upgrade not in tuple(UpgradeType) or upgrade == UpgradeType.UNKNOWN:
        return invalid("The controller does not support the given upgrade type.")
    if level < 0:
        return invalid("A feature version cannot be less than 0.")
    low, high = SUPPORTED.get(feature, (0, 0))
    if not low <= level <= high:
        if high == 0:
            return invalid(f"Local controller {node_id} does not support this feature.")
        return invalid(f"Local controller {node_id} only supports versions [{low}-{high}]")
    current = finalized.get(feature, 0)
    if level < current and upgrade == UpgradeType.UPGRADE:
        return invalid(
            "Can't downgrade the version of this feature without setting the upgrade type "
            "to either safe or unsafe downgrade."
        )
    if level > current and upgrade != UpgradeType.UPGRADE:
        return invalid("Can't downgrade to a newer version.")
    if feature == METADATA_VERSION and level < current and metadata_changed(current, level):
        why = (
            "Unsafe metadata downgrade is not supported in this version."
            if upgrade == UpgradeType.UNSAFE_DOWNGRADE
            else "Refusing to perform the requested downgrade because it might delete "
            "metadata information."
        )
        return f"Invalid metadata.version {level}. {why}"
    return None
