"""Generated index of __remote_log_metadata record codecs by api key. Do not edit."""

from __future__ import annotations

from typing import Any

from moldau.protocol.remote_log_metadata_records.remote_log_segment_metadata_record import (
    RemoteLogSegmentMetadataRecord,
)
from moldau.protocol.remote_log_metadata_records.remote_log_segment_metadata_snapshot_record import (
    RemoteLogSegmentMetadataSnapshotRecord,
)
from moldau.protocol.remote_log_metadata_records.remote_log_segment_metadata_update_record import (
    RemoteLogSegmentMetadataUpdateRecord,
)
from moldau.protocol.remote_log_metadata_records.remote_partition_delete_metadata_record import (
    RemotePartitionDeleteMetadataRecord,
)

RECORDS: dict[int, Any] = {
    0: RemoteLogSegmentMetadataRecord,
    1: RemoteLogSegmentMetadataUpdateRecord,
    2: RemotePartitionDeleteMetadataRecord,
    3: RemoteLogSegmentMetadataSnapshotRecord,
}
