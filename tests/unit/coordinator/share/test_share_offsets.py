"""Share-group offsets on the share-group service: the KIP-1226 lag, AlterShareGroupOffsets
(a share-partition starting over) and DeleteShareGroupOffsets (state forgotten)."""

from __future__ import annotations

import asyncio

from moldau.clock import ManualClock
from moldau.coordinator.share.partition import AcknowledgeType, SharePartition
from moldau.coordinator.share.service import ShareGroupService, ShareSettings
from moldau.ids import SYSTEM_IDS
from moldau.protocol.errors import ErrorCode
from moldau.server.handlers.describe_share_group_offsets import lag

ACCEPT, REJECT = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.REJECT)


def _service(reset: str = "earliest") -> ShareGroupService:
    configs = {"share.auto.offset.reset": reset}
    return ShareGroupService(
        ShareSettings(), ManualClock(), SYSTEM_IDS, lambda key: None, lambda g: configs
    )


def _share_partition(shares: ShareGroupService, *args: int) -> SharePartition:
    error, sp = asyncio.run(shares.share_partition("g", "t", *args))
    assert not error and sp is not None
    return sp


def test_lag_counts_records_up_to_the_high_watermark_not_yet_done():
    shares = _service()
    sp = _share_partition(shares, 0, 0, 20)
    sp.acquire("m", 9, 100, now_ms=0)  # 0-9 in flight
    assert lag(sp, 20) == 20
    sp.acknowledge("m", 0, 3, [ACCEPT])  # the start offset moves to 4
    sp.acknowledge("m", 6, 7, [REJECT])  # done, but above acquired 4-5
    assert (sp.start_offset, lag(sp, 20)) == (4, 14)


def test_alter_starts_the_share_partition_over_and_delete_forgets_it():
    shares = _service()
    sp = _share_partition(shares, 0, 0, 20)
    sp.acquire("m", 9, 100, now_ms=0)
    assert not asyncio.run(shares.alter_start_offset("g", "t", 0, 15))
    assert shares.group_partitions("g")[("t", 0)].start_offset == 15
    assert shares.group_partitions("g")[("t", 0)].fetch_offset() == 15
    assert not asyncio.run(
        shares.alter_start_offset("g", "t", 1, 3)
    )  # never read before: created there
    assert _share_partition(shares, 1, 0, 20).start_offset == 3
    assert asyncio.run(shares.delete_offsets("g", "t", [0, 1])) == (ErrorCode.NONE, True)
    assert shares.group_partitions("g") == {}
    assert asyncio.run(shares.delete_offsets("g", "t", [0, 1])) == (ErrorCode.NONE, False)
    # The next fetch starts again at share.auto.offset.reset (earliest: the log start).
    assert _share_partition(shares, 0, 2, 20).start_offset == 2
