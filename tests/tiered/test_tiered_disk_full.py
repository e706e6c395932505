"""A tiered broker whose object store is down while its disk fills (a small tmpfs; root
needed to mount it, else skipped with the reason).

Segments that are not copied cannot leave the disk, so producing goes on until the disk
is full, then is refused with KAFKA_STORAGE_ERROR and a log line that says segments wait
for the remote tier; nothing acknowledged is lost. When the store returns, copies resume,
local retention frees the disk (the ballast that filled it stays) and producing works
again; every acknowledged record is read back from offset 0.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.testing.process import BrokerProcess
from moldau.testing.seaweedfs import SeaweedFS
from tests.integration.helpers import (
    PRODUCE_VERSION,
    RawClient,
    assert_log_matches,
    batch_of,
    consume_confluent,
    create_topic,
    make_records,
    partition_results,
    produce_request,
)
from tests.robustness.test_disk_full import fill, produce_until_refused, small_disk
from tests.tiered.test_tiered_broker import wait_for

pytestmark = pytest.mark.slow

DISK_MIB = 32
HEADROOM = 2 * 1024 * 1024
TOPIC = "tiered-full"


def local_segments(data_dir: Path) -> list[Path]:
    return sorted(next(data_dir.rglob(f"{TOPIC}-0")).glob("*.log"))


def test_disk_full_while_the_store_is_down(tmp_path: Path, seaweedfs: SeaweedFS) -> None:
    disk = tmp_path / "disk"
    with small_disk(disk, DISK_MIB, "tmpfs"):
        b = BrokerProcess(
            disk,
            {
                "remote.log.storage.system.enable": "true",
                "remote.log.storage.manager.class.name": "s3",
                **seaweedfs.rsm_configs("rsm.config."),
                "rsm.config.key.prefix": "disk-full/",
                "rsm.config.storage.s3.api.call.attempt.timeout": "1000",
                "rsm.config.storage.s3.api.call.timeout": "2000",
                "remote.log.manager.task.interval.ms": "200",
                "remote.log.manager.task.retry.backoff.max.ms": "2000",
                "log.retention.check.interval.ms": "200",
                "remote.log.metadata.topic.num.partitions": "1",
                "offsets.topic.num.partitions": "1",
            },
        )
        b.start()
        try:
            check(b, disk, seaweedfs)
        finally:
            seaweedfs.resume()
            b.close()


def check(b: BrokerProcess, disk: Path, seaweedfs: SeaweedFS) -> None:
    create_topic(
        b.bootstrap,
        TOPIC,
        1,
        config={
            "remote.storage.enable": "true",
            "segment.bytes": str(128 * 1024),
            "local.retention.bytes": "1",
            "retention.ms": "-1",
            "file.delete.delay.ms": "0",
        },
    )
    records = make_records(64 * 2000, seed=7)
    batches = (records[i : i + 64] for i in range(0, len(records), 64))
    with RawClient(b.bootstrap) as raw:
        acked, errors = produce_until_refused(raw, TOPIC, batches, attempts=20)
        assert not errors
        wait_for(lambda: any(k.endswith(".log") for k in seaweedfs.keys("disk-full/")), "copies")

        seaweedfs.pause()  # the store is down from now on
        frozen_from = len(acked)
        ballast = fill(disk, HEADROOM)
        mark = b.lines_seen
        more, errors = produce_until_refused(raw, TOPIC, batches, attempts=1000)
        acked += more
        assert more, "nothing fitted in the headroom"
        assert set(errors) == {ErrorCode.KAFKA_STORAGE_ERROR}, errors
        assert b.proc is not None and b.proc.poll() is None, "the broker died"
        # local retention deleted nothing that was not copied
        assert int(local_segments(disk)[0].name.split(".")[0]) <= frozen_from
        b.settle_output()
        said = [line for line in b.output_since(mark) if f"append to {TOPIC}-0 failed" in line]
        assert said and "wait to be copied to the remote tier" in said[-1], said[-1:]
        # what the disk holds is read back now (remote reads fail while the store is down)
        local = consume_confluent(b.bootstrap, TOPIC, ends={0: (frozen_from, len(acked))})
        assert_log_matches(acked[frozen_from:], local, start_offsets={0: frozen_from})

        seaweedfs.resume()  # copies resume; the copied segments leave the disk
        deadline = time.monotonic() + 90
        while True:
            batch = next(batches)
            response = raw.request(produce_request(TOPIC, {0: batch_of(batch)}), PRODUCE_VERSION)
            if partition_results(response)[0].error_code == 0:
                acked += batch
                break
            assert time.monotonic() < deadline, "the disk was not freed after the store came back"
            time.sleep(0.5)
        assert ballast.exists()  # the space came from tiering
        wait_for(lambda: len(local_segments(disk)) <= 3, "local retention", timeout=90)
    assert_log_matches(acked, consume_confluent(b.bootstrap, TOPIC))
