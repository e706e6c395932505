"""The descriptor and index caches: bounds, eviction and the sendfile lifetime rule."""

from __future__ import annotations

import errno
import gc
import os
from pathlib import Path

import pytest
from storage_helpers import open_paths

from moldau.protocol.errors import ErrorCode, StorageError
from moldau.storage.files import FileCache, IndexCache


def is_open(path: Path) -> bool:
    return str(path) in open_paths()


def opener(path: Path):
    return lambda: os.open(path, os.O_RDONLY)


@pytest.fixture
def paths(tmp_path: Path) -> list[Path]:
    out = []
    for i in range(6):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"file %d" % i)
        out.append(path)
    return out


def test_cache_keeps_at_most_capacity_files_open(paths: list[Path]) -> None:
    cache = FileCache(2)
    for path in paths:
        cache.open(path, opener(path))
    gc.collect()
    assert len(cache) == 2
    assert sum(is_open(path) for path in paths) == 2 and is_open(paths[-1])
    assert cache.opened == 6


def test_a_hit_opens_nothing(paths: list[Path]) -> None:
    cache = FileCache(2)
    first = cache.open(paths[0], opener(paths[0])).fd
    assert cache.open(paths[0], opener(paths[0])).fd == first
    assert cache.opened == 1


def test_cycling_over_more_files_than_fit_still_hits(tmp_path: Path) -> None:
    """A produce spread over more partitions than the cache holds visits them in turn:
    LRU would miss every time, random eviction keeps most of them."""
    paths = []
    for i in range(110):
        paths.append(tmp_path / f"c{i}")
        paths[-1].write_bytes(b"x")
    cache = FileCache(100)
    for _ in range(10):
        for path in paths:
            cache.open(path, opener(path))
    assert len(cache) == 100
    assert cache.opened < 110 + 9 * 110 // 2


def test_an_evicted_file_stays_open_while_a_range_holds_it(paths: list[Path]) -> None:
    """The sendfile rule: eviction drops the cache's reference only."""
    cache = FileCache(1)
    held = cache.open(paths[0], opener(paths[0]))
    fd = held.fd
    cache.open(paths[1], opener(paths[1]))  # evicts paths[0]
    assert cache.peek(paths[0]) is None
    assert is_open(paths[0]) and os.pread(fd, 6, 0) == b"file 0"
    del held
    assert not is_open(paths[0])  # the last reference closed it


def test_shrinking_the_capacity_evicts(paths: list[Path]) -> None:
    cache = FileCache(4)
    for path in paths[:4]:
        cache.open(path, opener(path))
    cache.capacity = 1
    gc.collect()
    assert len(cache) == 1 and sum(is_open(path) for path in paths) == 1


def test_out_of_descriptors_gives_back_the_cache_and_retries(paths: list[Path]) -> None:
    cache = FileCache(10)
    for path in paths[:3]:
        cache.open(path, opener(path))
    attempts = []

    def flaky() -> int:
        attempts.append(len(cache))
        if len(attempts) == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        return os.open(paths[5], os.O_RDONLY)

    file = cache.open(paths[5], flaky)
    gc.collect()
    assert attempts == [3, 0]  # the retry came after the cache let go of its files
    assert not any(is_open(path) for path in paths[:3])
    assert os.pread(file.fd, 6, 0) == b"file 5"


def test_out_of_descriptors_for_good_is_a_storage_error(paths: list[Path]) -> None:
    cache = FileCache(10)

    def exhausted() -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    with pytest.raises(StorageError) as raised:
        cache.open(paths[0], exhausted)
    assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "file descriptors" in str(raised.value)


def test_other_errors_pass_through(tmp_path: Path) -> None:
    cache = FileCache(10)
    with pytest.raises(FileNotFoundError):
        cache.open("missing", opener(tmp_path / "missing"))


class Loaded:
    def __init__(self) -> None:
        self.unloaded = 0

    def unload(self) -> None:
        self.unloaded += 1


def test_index_cache_is_bounded_by_bytes_least_recently_used_first() -> None:
    cache = IndexCache(100)
    a, b, c = Loaded(), Loaded(), Loaded()
    cache.touch(a, 40)
    cache.touch(b, 40)
    cache.touch(a, 40)  # a is now the most recent
    cache.touch(c, 40)
    assert (a.unloaded, b.unloaded, c.unloaded) == (0, 1, 0)
    assert cache.bytes == 80
    cache.forget(a)
    assert cache.bytes == 40


def test_index_cache_keeps_one_entry_larger_than_the_bound() -> None:
    cache = IndexCache(10)
    big = Loaded()
    cache.touch(big, 1000)
    assert big.unloaded == 0 and cache.bytes == 1000
    other = Loaded()
    cache.touch(other, 5)
    assert big.unloaded == 1 and cache.bytes == 5
