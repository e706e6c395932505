"""metadata.version: the image keeps finalized levels, snapshots carry them, and updates
follow Kafka's FeatureControlManager rules."""

from __future__ import annotations

import pytest

from moldau.metadata.features import (
    LATEST_LEVEL,
    METADATA_VERSION,
    UpgradeType,
    check_update,
    level_of,
    metadata_changed,
)
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import FeatureLevelRecord
from moldau.metadata.snapshot import image_to_records


def test_image_keeps_levels_and_snapshots_carry_them() -> None:
    image = MetadataImage().apply([FeatureLevelRecord(name=METADATA_VERSION, feature_level=5)], 3)
    assert image.features == {METADATA_VERSION: 5} and image.offset == 3
    image = image.apply([FeatureLevelRecord(name=METADATA_VERSION, feature_level=7)], 9)
    assert MetadataImage().apply(image_to_records(image)).features == {METADATA_VERSION: 7}
    removed = image.apply([FeatureLevelRecord(name=METADATA_VERSION, feature_level=0)], 10)
    assert removed.features == {}


def test_level_names() -> None:
    assert level_of("3.3-IV3") == 7 == LATEST_LEVEL
    assert level_of("3.3") == 7 and level_of("3.0-IV1") == 1 and level_of("2.8-IV1") is None
    assert not metadata_changed(4, 3) and metadata_changed(7, 6) and metadata_changed(2, 5)


@pytest.mark.parametrize(
    ("current", "level", "upgrade", "refusal"),
    [
        (5, 7, UpgradeType.UPGRADE, None),
        (7, 7, UpgradeType.UPGRADE, None),
        (4, 3, UpgradeType.SAFE_DOWNGRADE, None),  # 3.3-IV0 changed no record format
        (7, 8, UpgradeType.UPGRADE, "only supports versions [1-7]"),
        (7, 0, UpgradeType.SAFE_DOWNGRADE, "only supports versions [1-7]"),
        (7, -1, UpgradeType.UPGRADE, "cannot be less than 0"),
        (7, 6, UpgradeType.UPGRADE, "without setting the upgrade type"),
        (5, 7, UpgradeType.SAFE_DOWNGRADE, "Can't downgrade to a newer version"),
        (7, 6, UpgradeType.SAFE_DOWNGRADE, "might delete metadata information"),
        (7, 6, UpgradeType.UNSAFE_DOWNGRADE, "Unsafe metadata downgrade"),
        (7, 6, 9, "does not support the given upgrade type"),
    ],
)
def test_update_rules(current: int, level: int, upgrade: int, refusal: str | None) -> None:
    why = check_update(1, {METADATA_VERSION: current}, METADATA_VERSION, level, upgrade)
    assert why is None if refusal is None else (why is not None and refusal in why)


def test_unknown_features_are_refused() -> None:
    why = check_update(1, {}, "transaction.version", 1, UpgradeType.UPGRADE)
    assert why == (
        "Invalid update version 1 for feature transaction.version. "
        "Local controller 1 does not support this feature."
    )
