"""`remoteStorage.directRead` on the `s3` remote storage manager against a real S3 server
(SeaweedFS): the brokers tier to a bucket, the direct read's tasks read the segments from
it and return exactly the rows of the read through the brokers."""

from __future__ import annotations

import pytest

from moldau.testing.seaweedfs import SeaweedFS
from tests.spark.remote_tier import (
    CLASS_NAME,
    PARTITIONS,
    TOPIC,
    assert_direct_read_equals_the_broker_read,
    options,
    per_partition,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EMPTY_BUCKET = "moldau-spark-empty"


@pytest.fixture(scope="module")
def store(seaweedfs: SeaweedFS) -> dict[str, str]:
    return {CLASS_NAME: "s3", **seaweedfs.rsm_configs("rsm.config.")}


def test_direct_read_equals_the_broker_read(spark, tiered, store, seaweedfs) -> None:
    segments = [k for k in seaweedfs.keys(f"{TOPIC}-") if k.endswith(".log")]
    assert {int(k.split("/")[-2]) for k in segments} == set(PARTITIONS), segments
    assert_direct_read_equals_the_broker_read(spark, tiered, store)


def test_remote_tasks_read_the_store(spark, tiered, store, seaweedfs) -> None:
    """Pointed at an empty bucket of the same server, the direct read fails: its remote
    segment tasks read the store, not a broker."""
    seaweedfs.client().create_bucket(Bucket=EMPTY_BUCKET)
    empty = store | {"rsm.config.storage.s3.bucket.name": EMPTY_BUCKET}
    with pytest.raises(Exception, match=f"not found in s3://{EMPTY_BUCKET}"):
        per_partition(spark, options(tiered, empty, direct=True))
