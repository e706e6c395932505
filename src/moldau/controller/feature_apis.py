"""The controller's side of KRaft features: UpdateFeatures, and the bootstrap of
``metadata.version`` in a new cluster's metadata log (Kafka's FeatureControlManager;
Kafka writes the bootstrap record when formatting, Moldau when its first controller
becomes active). Levels and Kafka's rules are in :mod:`moldau.metadata.features`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.controller.quorum_controller import ControllerResult
from moldau.metadata.features import (
    BOOTSTRAP_LEVELS,
    METADATA_VERSION,
    UpgradeType,
    check_update,
)
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import FeatureLevelRecord, MetadataRecord
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.update_features_request import UpdateFeaturesRequest
from moldau.protocol.messages.update_features_response import (
    UpdatableFeatureResult,
    UpdateFeaturesResponse,
)

if TYPE_CHECKING:
    from moldau.controller.context import ControllerContext


async def update_features(
    controller: ControllerContext, version: int, request: UpdateFeaturesRequest
) -> UpdateFeaturesResponse:
    """Each update is checked on its own; those that pass are applied (unless
    ``validate_only``) and the others answered INVALID_UPDATE_VERSION, as Kafka does."""

    def op(image: MetadataImage) -> ControllerResult[UpdateFeaturesResponse]:
        finalized = dict(image.features)
        results, records = [], []
        for u in request.feature_updates or []:
            upgrade: int = u.upgrade_type
            if version == 0:  # AllowDowngrade became UpgradeType in v1
                upgrade = UpgradeType.SAFE_DOWNGRADE if u.allow_downgrade else UpgradeType.UPGRADE
            why = check_update(
                controller.topics.node_id, finalized, u.feature, u.max_version_level, upgrade
            )
            results.append(
                UpdatableFeatureResult(
                    feature=u.feature,
                    error_code=ErrorCode.INVALID_UPDATE_VERSION if why else ErrorCode.NONE,
                    error_message=why,
                )
            )
            if why is None and finalized.get(u.feature, 0) != u.max_version_level:
                finalized[u.feature] = u.max_version_level
                records.append(
                    FeatureLevelRecord(name=u.feature, feature_level=u.max_version_level)
                )
        response = UpdateFeaturesResponse(error_code=ErrorCode.NONE, error_message=None)
        response.results = results
        return ControllerResult(response, [] if request.validate_only else records)

    return await controller.quorum.write(op)


async def bootstrap_metadata_version(controller: ControllerContext, level: int) -> None:
    """Finalize ``metadata.version`` at ``level`` (and the bootstrap features, such as
    ``group.version``) in a log that has none yet."""

    def op(image: MetadataImage) -> ControllerResult[None]:
        if METADATA_VERSION in image.features:
            return ControllerResult(None, [])
        records: list[MetadataRecord] = [
            FeatureLevelRecord(name=METADATA_VERSION, feature_level=level)
        ]
        records += [
            FeatureLevelRecord(name=name, feature_level=feature_level)
            for name, feature_level in BOOTSTRAP_LEVELS.items()
        ]
        return ControllerResult(None, records)

    await controller.quorum.write(op)
