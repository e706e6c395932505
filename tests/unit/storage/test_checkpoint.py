"""Kafka checkpoint and properties files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from moldau.protocol.errors import StorageError
from moldau.storage import checkpoint
from moldau.storage.checkpoint import (
    read_checkpoint,
    write_checkpoint,
    write_properties,
)


def test_checkpoint_round_trip_in_kafka_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {("orders", 0): 42, ("my-dashed-topic", 12): 7, ("__consumer_offsets", 49): 0}
    write_checkpoint(path, offsets)
    assert path.read_text() == "0\n3\norders 0 42\nmy-dashed-topic 12 7\n__consumer_offsets 49 0\n"
    assert read_checkpoint(path) == offsets
    assert not list(tmp_path.glob("*.tmp"))
    write_checkpoint(path, {})
    assert read_checkpoint(path) == {}


def test_missing_checkpoint_is_empty(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "nope") == {}


@pytest.mark.parametrize("text", ["", "0\n2\na 0 1\n", "1\n0\n", "0\n1\na x 1\n", "0\n1\na 0\n"])
def test_malformed_checkpoint_raises(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(StorageError):
        read_checkpoint(path)


def test_properties_are_written_as_key_value_lines(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    write_properties(path, {"version": "1", "cluster.id": "abc=def", "node.id": "1"})
    assert path.read_text() == "version=1\ncluster.id=abc=def\nnode.id=1\n"


def test_sync_filesystems_syncs_each_file_system_once(tmp_path: Path, monkeypatch) -> None:
    """syncfs(2) once per file system of the log dirs, never a machine-wide os.sync."""
    synced: list[int] = []
    real = checkpoint._libc()
    assert real is not None and hasattr(real, "syncfs")  # Linux: this is the path taken

    class Libc:
        @staticmethod
        def syncfs(fd: int) -> int:
            synced.append(os.fstat(fd).st_dev)
            return real.syncfs(fd)

    monkeypatch.setattr(checkpoint, "_libc", lambda: Libc)
    monkeypatch.setattr(os, "sync", lambda: pytest.fail("os.sync called"))
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    checkpoint.sync_filesystems(dirs)
    assert synced == [os.stat(tmp_path).st_dev]
    with pytest.raises(OSError):
        checkpoint.sync_filesystems([tmp_path / "missing"])
