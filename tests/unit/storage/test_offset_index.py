"""Offset and time index files: Kafka's entry format, lookups, trimming and reopening."""

from __future__ import annotations

import struct
from pathlib import Path

from moldau.storage.index import OffsetIndex, TimeIndex

BASE = 1000


def make_offset_index(path: Path, n: int, max_bytes: int = 8 * 1024) -> OffsetIndex:
    index = OffsetIndex.create(path, BASE, max_bytes)
    for i in range(n):
        index.append(BASE + 10 * i + 9, 100 * (i + 1))  # last offset of batch -> its start
    return index


def test_offset_index_lookup_every_key(tmp_path: Path) -> None:
    index = make_offset_index(tmp_path / "a.index", 500)
    assert index.lookup(BASE) == (BASE, 0)
    assert index.lookup(BASE + 8) == (BASE, 0)
    for i in range(500):
        key = BASE + 10 * i + 9
        assert index.lookup(key) == (key, 100 * (i + 1))
        assert index.lookup(key + 5) == (key, 100 * (i + 1))
        assert index.lookup_position(100 * (i + 1) + 50) == 100 * (i + 1)
    assert index.lookup_position(99) == 0
    index.close()


def test_offset_index_file_format_and_trim(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    index = make_offset_index(path, 3)
    assert not path.exists()  # made at its first write
    index.flush()
    assert path.stat().st_size == 8 * 1024  # preallocated
    index.close()
    assert path.read_bytes() == b"".join(
        struct.pack(">ii", 10 * i + 9, 100 * (i + 1)) for i in range(3)
    )
    reopened = OffsetIndex(path, BASE, 8 * 1024)
    assert reopened.entries == 3 and reopened.is_full  # trimmed: read-only until resized
    reopened.make_writable()
    reopened.append(BASE + 100, 1000)
    assert reopened.lookup(BASE + 100) == (BASE + 100, 1000)
    reopened.close()


def test_untrimmed_index_reopens_with_its_real_entries(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    index = make_offset_index(path, 37)
    index.flush()
    crashed = OffsetIndex(path, BASE, 8 * 1024)  # as after a crash: zero-filled tail
    assert crashed.entries == 37
    assert crashed.last_entry() == (BASE + 369, 3700)
    crashed.close()


def test_offset_index_truncation(tmp_path: Path) -> None:
    index = make_offset_index(tmp_path / "a.index", 10)
    index.truncate_to(BASE + 50)  # keeps entries for offsets < 1050: 1009..1049
    assert index.entries == 5 and index.last_entry() == (BASE + 49, 500)
    index.reset()
    assert index.entries == 0 and index.lookup(BASE + 5000) == (BASE, 0)
    index.close()


def test_full_index(tmp_path: Path) -> None:
    index = make_offset_index(tmp_path / "a.index", 4, max_bytes=35)  # room for 4 entries
    assert index.is_full
    index.close()


def test_time_index(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    index = TimeIndex.create(path, BASE, 12 * 100)
    assert index.last_entry() == (-1, BASE)
    for i in range(50):
        index.maybe_append(10_000 + 100 * i, BASE + 10 * i)
    index.maybe_append(10_000, BASE + 999)  # not a new maximum: ignored
    assert index.entries == 50
    assert index.lookup(0) == BASE
    assert index.lookup(10_000 + 100 * 7 + 50) == BASE + 70
    assert index.lookup(10**9) == BASE + 490
    index.truncate_to(BASE + 200)
    assert index.last_entry() == (10_000 + 1900, BASE + 190)
    index.flush()
    crashed = TimeIndex(path, BASE, 12 * 100)
    assert crashed.entries == 20
    crashed.close()
    assert path.stat().st_size == 20 * 12
    index.close()


def test_time_index_forced_final_entry_when_full(tmp_path: Path) -> None:
    index = TimeIndex.create(tmp_path / "a.timeindex", BASE, 24)
    index.maybe_append(1, BASE)
    index.maybe_append(2, BASE + 1)
    index.maybe_append(3, BASE + 2)
    assert index.entries == 2
    index.maybe_append(3, BASE + 2, force=True)
    assert index.last_entry() == (3, BASE + 2)
    index.close()
