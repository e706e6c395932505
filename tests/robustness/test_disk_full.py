"""A broker whose disk fills up: produce is refused with KAFKA_STORAGE_ERROR, every
acknowledged record stays readable, and producing works again once space returns (and
after a kill -9 on the formerly full disk).

The disk is a small tmpfs, and a loop-mounted ext4 image (whose page cache and block
reservations fail differently); mounting needs root, so elsewhere each is skipped with
the reason.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.protocol.errors import ErrorCode
from tests.integration.helpers import (
    PRODUCE_VERSION,
    RawClient,
    Rec,
    assert_log_matches,
    batch_of,
    consume_confluent,
    create_topic,
    make_records,
    partition_results,
    produce_request,
)
from tests.robustness.conftest import Start

pytestmark = pytest.mark.slow
DISK_MIB = 48
HEADROOM = 3 * 1024 * 1024  # free bytes left beside the ballast


def _run(*cmd: str) -> str | None:
    """Run a command; None if it worked, else why not."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except OSError as e:
        return str(e)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


@contextlib.contextmanager
def small_disk(mountpoint: Path, mib: int, kind: str) -> Iterator[None]:
    """A ``mib`` MiB file system at ``mountpoint``: tmpfs or a loop-mounted ext4 image."""
    mountpoint.mkdir()
    if kind == "tmpfs":
        why = _run("mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(mountpoint))
    else:
        image = mountpoint.with_suffix(".img")
        with open(image, "wb") as f:
            f.truncate(mib * 1024 * 1024)
        why = _run("mkfs.ext4", "-q", "-F", str(image)) or _run(
            "mount", "-o", "loop", str(image), str(mountpoint)
        )
    if why is not None:
        pytest.skip(f"cannot mount a small {kind} here (needs root): {why}")
    try:
        yield
    finally:
        if _run("umount", str(mountpoint)) is not None:
            _run("umount", "-l", str(mountpoint))


def fill(disk: Path, leave: int) -> Path:
    """A ballast file taking all but ``leave`` bytes of the file system."""
    st = os.statvfs(disk)
    ballast = disk / "ballast"
    with open(ballast, "wb") as f:
        remaining = st.f_bavail * st.f_frsize - leave
        chunk = bytes(1024 * 1024)
        while remaining > 0:
            f.write(chunk[: min(remaining, len(chunk))])
            remaining -= len(chunk)
    return ballast


def produce_until_refused(
    raw: RawClient, topic: str, batches: Iterator[list[Rec]], attempts: int
) -> tuple[list[Rec], list[int]]:
    """Produce batches until three are refused; returns the acknowledged records and the
    error codes seen. A refused batch's records are never sent again: they must not
    appear in the log."""
    acked: list[Rec] = []
    errors: list[int] = []
    for _, records in zip(range(attempts), batches, strict=False):
        response = raw.request(produce_request(topic, {0: batch_of(records)}), PRODUCE_VERSION)
        code = partition_results(response)[0].error_code
        if code == 0:
            acked += records
        else:
            errors.append(code)
            if len(errors) >= 3:
                break
    return acked, errors


@pytest.mark.parametrize("kind", ["tmpfs", "ext4"])
def test_full_disk_refuses_produce_keeps_acked_records_and_recovers(
    start_broker: Start, tmp_path: Path, topic: str, kind: str
) -> None:
    disk = tmp_path / "disk"
    with small_disk(disk, DISK_MIB, kind):
        b = start_broker(
            {"log.segment.bytes": str(1024 * 1024), "offsets.topic.num.partitions": "1"},
            data_dir=disk,
        )
        create_topic(b.bootstrap, topic, 1)
        ballast = fill(disk, HEADROOM)
        records = make_records(64 * 600, seed=1)
        batches = (records[i : i + 64] for i in range(0, len(records), 64))
        with RawClient(b.bootstrap) as raw:
            acked, errors = produce_until_refused(raw, topic, batches, attempts=500)
            assert errors, f"{len(acked)} records fitted in {HEADROOM} bytes of {kind}?"
            assert set(errors) == {ErrorCode.KAFKA_STORAGE_ERROR}, errors
            assert acked, "nothing fitted before the disk was full"
            assert b.alive, "the broker died when its disk filled up"
            assert_log_matches(acked, consume_confluent(b.bootstrap, topic))

            ballast.unlink()  # space returns
            more, errors = produce_until_refused(raw, topic, batches, attempts=20)
            assert not errors and len(more) == 20 * 64, f"still refused: {errors}"
        acked += more
        assert_log_matches(acked, consume_confluent(b.bootstrap, topic))
        b.kill()
        b.output.clear()
        b.start()
        assert_log_matches(acked, consume_confluent(b.bootstrap, topic))
        assert not b.tracebacks(), b.tracebacks()[0]
        b.stop()
