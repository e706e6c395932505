"""A single node's data dir written by an earlier release is taken over on first start.

Earlier releases kept a single node's metadata in a local log of their own (committed
once fsynced, epoch-0 batches); a single node is now a Raft quorum of one on the same
``__cluster_metadata-0``. ``data/single-node-local-metadata-log.tar.gz`` is the data dir
such a release wrote (``moldau server`` with node.id=1: topic ``kept`` with two
partitions and retention.ms=123456789, then 20 records keyed k0..k19, values v0..v19,
produced with acks=all to partitions i % 2, then a clean stop).
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource

from moldau.testing import BrokerProcess
from moldau.testing.process import TEST_DEFAULTS

DATA_DIR = Path(__file__).parent / "data" / "single-node-local-metadata-log.tar.gz"


def values_by_partition(broker: BrokerProcess, topic: str, count: int) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for r in broker.consume(topic, count):
        assert r.value is not None
        out.setdefault(r.partition, []).append(r.value)
    return out


def test_a_data_dir_of_the_local_metadata_log_is_taken_over(tmp_path: Path) -> None:
    with tarfile.open(DATA_DIR) as archive:
        archive.extractall(tmp_path, filter="data")
    written = {p: [b"v%d" % i for i in range(p, 20, 2)] for p in (0, 1)}
    with BrokerProcess(tmp_path, TEST_DEFAULTS) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        assert len(admin.list_topics("kept", timeout=30).topics["kept"].partitions) == 2
        resource = ConfigResource(ConfigResource.Type.TOPIC, "kept")
        configs = admin.describe_configs([resource])[resource].result(30)
        assert configs["retention.ms"].value == "123456789"
        assert values_by_partition(broker, "kept", 20) == written
        # The quorum of one writes on top of the old log: new metadata, new records.
        broker.create_topic("new")
        broker.produce("new", "after")
        broker.stop()
        broker.start()
        assert values_by_partition(broker, "kept", 20) == written
        assert [r.value for r in broker.consume("new", 1)] == [b"after"]
