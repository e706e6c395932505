"""KRaft features through the Java Admin client (kafka-clients 3.9): describeFeatures
reads ApiVersions' SupportedFeatures / FinalizedFeatures / FinalizedFeaturesEpoch, and
updateFeatures finalizes metadata.version as a FeatureLevelRecord, refusing what Kafka
refuses with INVALID_UPDATE_VERSION."""

from __future__ import annotations

from moldau.metadata.features import GROUP_VERSION, LATEST_LEVEL, MINIMUM_KRAFT_LEVEL
from moldau.testing import BrokerProcess
from tests.integration.helpers import FreshBroker
from tests.java.client import JavaClient

MV = "metadata.version"
SHARE = {"share.version": [1, 1]}  # KIP-932: always on
GV = {GROUP_VERSION: [1, 1], **SHARE}  # finalized at bootstrap: KIP-848 consumer groups


def describe(java: JavaClient, bootstrap: str) -> dict:
    return java.admin(bootstrap, ["describe-features"]).check().one("describe-features")


def test_new_cluster_reports_its_metadata_version(broker: BrokerProcess, java: JavaClient) -> None:
    features = describe(java, broker.bootstrap)
    assert features["supported"] == {
        MV: [MINIMUM_KRAFT_LEVEL, LATEST_LEVEL],
        GROUP_VERSION: [0, 1],
        **SHARE,
    }
    assert features["finalized"] == {MV: [LATEST_LEVEL, LATEST_LEVEL], **GV}
    assert features["epoch"] >= 0


def test_refused_updates(broker: BrokerProcess, java: JavaClient) -> None:
    result = java.admin(
        broker.bootstrap,
        ["update-features", "--feature", MV, "--level", str(LATEST_LEVEL + 1)],
        ["update-features", "--feature", MV, "--level", str(LATEST_LEVEL - 1)],
        ["update-features", "--feature", MV, "--level", str(LATEST_LEVEL - 1),
         "--type", "safe_downgrade"],
        ["update-features", "--feature", MV, "--level", str(LATEST_LEVEL - 1),
         "--type", "unsafe_downgrade"],
        ["update-features", "--feature", "transaction.version", "--level", "1"],
    )  # fmt: skip
    errors = result.of("error")
    assert len(errors) == 5, str(result)
    reasons = [
        f"only supports versions [{MINIMUM_KRAFT_LEVEL}-{LATEST_LEVEL}]",
        "without setting the upgrade type",
        "might delete metadata information",
        "Unsafe metadata downgrade is not supported",
        "does not support this feature",
    ]
    for error, reason in zip(errors, reasons, strict=True):
        assert "InvalidUpdateVersionException" in str(error) and reason in str(error), error
    assert describe(java, broker.bootstrap)["finalized"] == {MV: [LATEST_LEVEL, LATEST_LEVEL], **GV}


def test_upgrade_from_an_older_bootstrap_level(fresh_broker: FreshBroker, java: JavaClient) -> None:
    """A cluster started at 3.3-IV1 (inter.broker.protocol.version, as kafka-storage
    format reads it) is upgraded with updateFeatures; the level survives a restart."""
    b = fresh_broker({"inter.broker.protocol.version": "3.3-IV1"})
    before = describe(java, b.bootstrap)
    assert before["finalized"] == {MV: [5, 5], **GV}
    java.admin(
        b.bootstrap,
        ["update-features", "--feature", MV, "--level", "7", "--validate-only", "true"],
    ).check()
    assert describe(java, b.bootstrap)["finalized"] == {MV: [5, 5], **GV}
    java.admin(b.bootstrap, ["update-features", "--feature", MV, "--level", "7"]).check()
    after = describe(java, b.bootstrap)
    assert after["finalized"] == {MV: [7, 7], **GV} and after["epoch"] > before["epoch"]
    b.restart()
    assert describe(java, b.bootstrap)["finalized"] == {MV: [7, 7], **GV}
