"""The RemoteStorageManager contract, against the `file` manager and against `s3` on a
real SeaweedFS server: copy, ranged reads, indexes, idempotent delete, partial uploads,
and a store that is killed or frozen."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.storage.remote.file_storage import FileRemoteStorageManager
from moldau.storage.remote.s3_storage import MIN_PART_SIZE, S3RemoteStorageManager
from moldau.storage.remote.segment import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from moldau.storage.remote.storage_manager import (
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    load_remote_storage_manager,
)
from moldau.testing.seaweedfs import SeaweedFS

LEADER_EPOCHS = b"0\n2\n0 100\n3 150\n"


@pytest.fixture(params=["file", "s3"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def configs_for(kind: str, tmp_path: Path, seaweedfs: SeaweedFS | None) -> dict[str, str]:
    if kind == "file":
        return {"dir": str(tmp_path / "remote")}
    assert seaweedfs is not None
    return {**seaweedfs.rsm_configs(), "key.prefix": f"contract-{uuid.uuid4().hex[:8]}/"}


@pytest.fixture
def rsm(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[RemoteStorageManager]:
    seaweedfs = request.getfixturevalue("seaweedfs") if kind == "s3" else None
    manager = load_remote_storage_manager(kind, configs_for(kind, tmp_path, seaweedfs))
    yield manager
    manager.close()


def segment(tmp_path: Path, size: int = 100_000, txn: bool = True, snapshot: bool = True):
    """A segment's files on disk, with distinct content each, and its metadata."""
    tp = TopicIdPartition(uuid.uuid4(), "orders", 3)
    md = RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate(tp), 100, 199, 1_700_000_000_000, 1, 0, size, {0: 100, 3: 150}
    )
    local = tmp_path / f"local-{md.segment_id.id}"
    local.mkdir()
    files = {}
    for name, length in [("log", size), ("index", 800), ("timeindex", 1200), ("txnindex", 68),
                         ("snapshot", 300)]:  # fmt: skip
        files[name] = local / f"00000000000000000100.{name}"
        files[name].write_bytes(os.urandom(length))
    data = LogSegmentData(
        files["log"],
        files["index"],
        files["timeindex"],
        files["txnindex"] if txn else None,
        files["snapshot"] if snapshot else None,
        LEADER_EPOCHS,
    )
    return md, data


def objects(rsm: RemoteStorageManager, md: RemoteLogSegmentMetadata) -> list[str]:
    """The names of the segment's objects present in the store."""
    if isinstance(rsm, FileRemoteStorageManager):
        base = rsm.root
        return sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())
    assert isinstance(rsm, S3RemoteStorageManager)
    answer = rsm.client.list_objects_v2(Bucket=rsm.bucket, Prefix=rsm.key_prefix)
    return sorted(o["Key"][len(rsm.key_prefix) :] for o in answer.get("Contents", ()))


def test_copy_then_read_back_every_file_and_range(rsm, tmp_path):
    md, data = segment(tmp_path)
    assert rsm.copy_log_segment_data(md, data) is None
    records = data.log_segment.read_bytes()
    assert rsm.fetch_log_segment(md, 0) == records
    assert rsm.fetch_log_segment(md, 0, 0) == records[:1]
    assert rsm.fetch_log_segment(md, 1234, 5678) == records[1234:5679]  # end inclusive
    assert rsm.fetch_log_segment(md, 99_000) == records[99_000:]
    assert rsm.fetch_log_segment(md, 99_000, 10**9) == records[99_000:]  # past the end
    assert rsm.fetch_log_segment(md, len(records)) == b""
    assert rsm.fetch_index(md, IndexType.OFFSET) == data.offset_index.read_bytes()
    assert rsm.fetch_index(md, IndexType.TIMESTAMP) == data.time_index.read_bytes()
    assert data.transaction_index and data.producer_snapshot
    assert rsm.fetch_index(md, IndexType.TRANSACTION) == data.transaction_index.read_bytes()
    assert rsm.fetch_index(md, IndexType.PRODUCER_SNAPSHOT) == data.producer_snapshot.read_bytes()
    assert rsm.fetch_index(md, IndexType.LEADER_EPOCH) == LEADER_EPOCHS


def test_objects_are_named_so_an_operator_can_tell_what_they_are(rsm, tmp_path):
    md, data = segment(tmp_path)
    rsm.copy_log_segment_data(md, data)
    sid = md.segment_id
    base = f"orders-{sid.topic_id}/3/00000000000000000100-{sid.id}"
    suffixes = [
        ".index",
        ".leader_epoch_checkpoint",
        ".log",
        ".snapshot",
        ".timeindex",
        ".txnindex",
    ]
    assert objects(rsm, md) == sorted(base + s for s in suffixes)


def test_missing_optional_indexes_and_unknown_segments_are_not_found(rsm, tmp_path):
    md, data = segment(tmp_path, txn=False, snapshot=False)
    rsm.copy_log_segment_data(md, data)
    for index_type in (IndexType.TRANSACTION, IndexType.PRODUCER_SNAPSHOT):
        with pytest.raises(RemoteResourceNotFoundError):
            rsm.fetch_index(md, index_type)
    assert rsm.fetch_index(md, IndexType.OFFSET) == data.offset_index.read_bytes()
    never_copied, _ = segment(tmp_path)
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_log_segment(never_copied, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_index(never_copied, IndexType.OFFSET)


def test_delete_is_idempotent_and_leaves_nothing(rsm, tmp_path):
    md, data = segment(tmp_path)
    other, other_data = segment(tmp_path)
    rsm.copy_log_segment_data(md, data)
    rsm.copy_log_segment_data(other, other_data)
    rsm.delete_log_segment_data(md)
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_log_segment(md, 0)
    rsm.delete_log_segment_data(md)  # again: nothing to delete, no error
    assert all(str(other.segment_id.id) in name for name in objects(rsm, md))
    rsm.delete_log_segment_data(other)
    assert objects(rsm, md) == []


def test_partial_upload_is_not_whole_and_delete_cleans_it_up(rsm, tmp_path):
    md, data = segment(tmp_path)
    data.log_segment.unlink()  # the copy fails at the records file, after the indexes
    with pytest.raises(RemoteStorageError):
        rsm.copy_log_segment_data(md, data)
    present = objects(rsm, md)
    assert present and not any(name.endswith(".log") for name in present)
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_log_segment(md, 0)
    rsm.delete_log_segment_data(md)
    assert objects(rsm, md) == []


def test_the_records_object_is_written_last(kind, rsm, tmp_path):
    md, data = segment(tmp_path)
    written: list[str] = []
    if isinstance(rsm, S3RemoteStorageManager):
        rsm.client.meta.events.register(
            "before-call.s3.PutObject", lambda params, **_: written.append(params["url_path"])
        )
        rsm.copy_log_segment_data(md, data)
    else:
        rsm.copy_log_segment_data(md, data)
        paths = [p for p in Path(rsm.root).rglob("*") if p.is_file()]  # type: ignore[attr-defined]
        written = [str(p) for p in sorted(paths, key=lambda p: p.stat().st_mtime_ns)]
    assert len(written) == 6 and written[-1].endswith(".log"), written


def test_load_by_module_path_and_refuse_bad_names(tmp_path):
    manager = load_remote_storage_manager(
        "moldau.storage.remote.file_storage:FileRemoteStorageManager", {"dir": str(tmp_path)}
    )
    assert isinstance(manager, FileRemoteStorageManager) and manager.root == tmp_path
    dotted = load_remote_storage_manager(
        "moldau.storage.remote.file_storage.FileRemoteStorageManager", {"dir": str(tmp_path)}
    )
    assert isinstance(dotted, FileRemoteStorageManager)
    for bad in ("nope", "no.such.module:Class", "moldau.storage.remote.segment:IndexType"):
        with pytest.raises(ValueError, match="remote.log.storage.manager.class.name"):
            load_remote_storage_manager(bad, {})
    with pytest.raises(ValueError, match="rsm.config.dir"):
        load_remote_storage_manager("file", {})
    with pytest.raises(ValueError, match="bucket.name"):
        load_remote_storage_manager("s3", {})
    with pytest.raises(ValueError, match="go together"):
        load_remote_storage_manager(
            "s3", {"storage.s3.bucket.name": "b", "storage.aws.access.key.id": "k"}
        )
    with pytest.raises(ValueError, match="part.size"):
        load_remote_storage_manager(
            "s3", {"storage.s3.bucket.name": "b", "storage.s3.multipart.upload.part.size": "10"}
        )


def test_s3_takes_credentials_from_the_aws_environment(seaweedfs, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-the-environment")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    configs = {k: v for k, v in seaweedfs.rsm_configs().items() if not k.startswith("storage.aws.")}
    manager = load_remote_storage_manager("s3", configs)
    signed: list[str] = []
    manager.client.meta.events.register(  # type: ignore[attr-defined]
        "request-created.s3", lambda request, **_: signed.append(request.headers["Authorization"])
    )
    md, data = segment(tmp_path)
    manager.copy_log_segment_data(md, data)
    assert signed and all("Credential=from-the-environment/" in s for s in signed)
    manager.delete_log_segment_data(md)


def test_s3_multipart_upload_of_a_segment_above_the_part_size(seaweedfs, tmp_path):
    configs = {
        **seaweedfs.rsm_configs(),
        "storage.s3.multipart.upload.part.size": str(MIN_PART_SIZE),
    }
    manager = load_remote_storage_manager("s3", configs)
    md, data = segment(tmp_path, size=2 * MIN_PART_SIZE + 12_345)
    parts: list[int] = []
    manager.client.meta.events.register(  # type: ignore[attr-defined]
        "before-call.s3.UploadPart", lambda params, **_: parts.append(1)
    )
    manager.copy_log_segment_data(md, data)
    records = data.log_segment.read_bytes()
    assert len(parts) == 3
    # A range across the boundary of the first two parts, and the tail.
    assert (
        manager.fetch_log_segment(md, MIN_PART_SIZE - 10, MIN_PART_SIZE + 10)
        == (records[MIN_PART_SIZE - 10 : MIN_PART_SIZE + 11])
    )
    assert manager.fetch_log_segment(md, 2 * MIN_PART_SIZE) == records[2 * MIN_PART_SIZE :]
    manager.delete_log_segment_data(md)


FAST_FAILING = {
    "storage.s3.api.call.attempt.timeout": "1000",
    "storage.s3.api.call.timeout": "2000",
}


def every_call_fails_in_bounded_time(manager: RemoteStorageManager, tmp_path: Path) -> None:
    md, data = segment(tmp_path)
    calls = [
        lambda: manager.copy_log_segment_data(md, data),
        lambda: manager.fetch_log_segment(md, 0, 100),
        lambda: manager.fetch_index(md, IndexType.OFFSET),
        lambda: manager.delete_log_segment_data(md),
    ]
    for call in calls:
        started = time.monotonic()
        with pytest.raises(RemoteStorageError) as raised:
            call()
        # Not "not found": the store did not answer.
        assert not isinstance(raised.value, RemoteResourceNotFoundError)
        # 2 attempts of at most 1 s each plus backoff; generous for a loaded machine.
        assert time.monotonic() - started < 15


def works_again(manager: RemoteStorageManager, tmp_path: Path, deadline_s: float = 60) -> None:
    """The same manager copies and reads again once the store is back (retrying while a
    restarted store is still slow to answer)."""
    md, data = segment(tmp_path)
    give_up = time.monotonic() + deadline_s
    while True:
        try:
            manager.copy_log_segment_data(md, data)
            assert manager.fetch_log_segment(md, 0) == data.log_segment.read_bytes()
            break
        except RemoteStorageError:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.5)
    manager.delete_log_segment_data(md)


def test_s3_store_killed_raises_remote_storage_error_then_recovers(seaweedfs, tmp_path):
    manager = load_remote_storage_manager("s3", {**seaweedfs.rsm_configs(), **FAST_FAILING})
    seaweedfs.kill()
    try:
        every_call_fails_in_bounded_time(manager, tmp_path)
    finally:
        seaweedfs.start()
    works_again(manager, tmp_path)


def test_s3_store_frozen_raises_remote_storage_error_within_the_timeout(seaweedfs, tmp_path):
    manager = load_remote_storage_manager("s3", {**seaweedfs.rsm_configs(), **FAST_FAILING})
    md, data = segment(tmp_path)
    manager.copy_log_segment_data(md, data)
    seaweedfs.pause()
    try:
        every_call_fails_in_bounded_time(manager, tmp_path)
    finally:
        seaweedfs.resume()
    works_again(manager, tmp_path)
    assert manager.fetch_log_segment(md, 0) == data.log_segment.read_bytes()  # still there
    manager.delete_log_segment_data(md)
