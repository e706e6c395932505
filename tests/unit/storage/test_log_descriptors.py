"""Descriptors and memory grow with what is used, not with what exists (issue 14)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import append, batch, open_paths

from moldau.config.topic import LogConfig
from moldau.storage.files import StorageCaches
from moldau.storage.local_log import LogReadResult
from moldau.storage.segment import Segment
from moldau.storage.unified_log import UnifiedLog

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=128, file_delete_delay_ms=0)


def files_open_under(root: Path) -> int:
    return sum(1 for p in open_paths() if p.startswith(str(root)))


def fill(log: UnifiedLog, count: int, tag: int = 0) -> list[bytes]:
    out = []
    for i in range(count):
        data = batch(2, value_size=60, tag=tag + i, timestamp=1_000 + i)
        append(log, data)
        out.append(bytes(data))
    return out


def test_a_clean_open_reads_only_the_active_segments_tail(tmp_path: Path) -> None:
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG)
    stored = fill(log, 200)
    assert len(log.segments) > 20
    log.close()
    caches = StorageCaches(open_files=4)
    reopened = UnifiedLog.open(
        tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=400, caches=caches
    )
    sealed = reopened.segments[:-1]
    assert caches.files.opened == 1  # the active segment, for its tail
    assert not any(s.offset_index.loaded or s.time_index.loaded for s in sealed)
    assert reopened.log_end_offset == 400
    assert reopened.read_bytes(0, 1) == stored[0]
    assert sealed[0].offset_index.loaded and not sealed[1].offset_index.loaded
    assert reopened.read_bytes(0, 1 << 30) == b"".join(stored)
    assert files_open_under(tmp_path) <= 4


def test_many_partitions_hold_at_most_the_cache_in_descriptors(tmp_path: Path) -> None:
    """200 partitions of several segments each: the old design held 5 descriptors per
    partition; now everything read, appended or reopened shares 8."""
    caches = StorageCaches(open_files=8, index_bytes=4096)
    logs = [UnifiedLog.open(tmp_path / f"t-{p}", CONFIG, caches=caches) for p in range(200)]
    stored = [fill(log, 12, tag=p) for p, log in enumerate(logs)]
    assert all(len(log.segments) > 1 for log in logs)
    assert files_open_under(tmp_path) <= 8
    for log, batches in zip(logs, stored, strict=True):
        assert log.read_bytes(0, 1 << 30) == b"".join(batches)
    assert files_open_under(tmp_path) <= 8
    assert caches.indexes.bytes <= 4096
    for log in logs:
        log.close()
    assert files_open_under(tmp_path) == 0
    reopened = [
        UnifiedLog.open(
            tmp_path / f"t-{p}", CONFIG, clean_shutdown=True, recovery_point=24, caches=caches
        )
        for p in range(200)
    ]
    assert files_open_under(tmp_path) <= 8
    for log, batches in zip(reopened, stored, strict=True):
        assert log.read_bytes(0, 1 << 30) == b"".join(batches)
        assert log.log_end_offset == 24


def test_ranges_keep_evicted_files_open_until_they_are_dropped(tmp_path: Path) -> None:
    caches = StorageCaches(open_files=1)
    logs = [UnifiedLog.open(tmp_path / f"t-{p}", CONFIG, caches=caches) for p in range(5)]
    stored = [fill(log, 3, tag=10 * p) for p, log in enumerate(logs)]
    results = [log.read(0, 1 << 30) for log in logs]  # a fetch over five partitions
    assert files_open_under(tmp_path) == 5  # one cached, four held by ranges only
    for result, batches in zip(results, stored, strict=True):
        assert result.to_bytes() == b"".join(batches)
    del result
    results.clear()
    assert files_open_under(tmp_path) == 1


def test_crash_recovery_scans_only_segments_past_the_recovery_point(
    tmp_path: Path, monkeypatch
) -> None:
    log = UnifiedLog.open(tmp_path / "live" / "t-0", CONFIG)
    stored = fill(log, 200)
    middle = log.segments[len(log.segments) // 2].base_offset
    log.flush(middle + 1)
    stored += fill(log, 20, tag=500)
    crashed = tmp_path / "crash" / "t-0"
    shutil.copytree(log.dir, crashed)
    recovered_bases: list[int] = []
    recover = Segment.recover

    def counting(segment: Segment):
        recovered_bases.append(segment.base_offset)
        return recover(segment)

    monkeypatch.setattr(Segment, "recover", counting)
    reopened = UnifiedLog.open(crashed, CONFIG, recovery_point=middle + 1)
    bases = [s.base_offset for s in reopened.segments]
    assert recovered_bases == [b for b in bases if b >= middle]
    assert reopened.read_bytes(0, 1 << 30) == b"".join(stored)


def expected_read(model: list[tuple[int, bytes]], offset: int, max_bytes: int) -> bytes:
    """Whole batches from the one holding ``offset`` within ``max_bytes``, at least one."""
    rest = [d for n, d in model if n > offset]
    n, total = 0, 0
    while n < len(rest) and total + len(rest[n]) <= max_bytes:
        total += len(rest[n])
        n += 1
    return b"".join(rest[: max(n, 1)])


ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 4), st.integers(1, 4), st.integers(0, 300)),
        st.tuples(st.just("roll"), st.integers(0, 4)),
        st.tuples(st.just("read"), st.integers(0, 4), st.floats(0, 1), st.integers(1, 3000)),
        st.tuples(st.just("hold"), st.integers(0, 4)),
        st.tuples(st.just("truncate"), st.integers(0, 4), st.floats(0, 1)),
        st.tuples(st.just("crash")),
        st.tuples(st.just("reopen")),
    ),
    max_size=50,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3), ops)
def test_tiny_file_cache_always_reads_back_what_was_written(capacity: int, operations) -> None:
    """Five partitions share a cache of 1-3 files; appends, rolls, reads, truncations,
    crashes and reopens evict all the time, and ranges held across them still read the
    bytes they were read with."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        caches = StorageCaches(open_files=capacity, index_bytes=256)
        logs = [UnifiedLog.open(root / f"t-{p}", CONFIG, caches=caches) for p in range(5)]
        models: list[list[tuple[int, bytes]]] = [[] for _ in logs]  # (next offset, bytes)
        held: list[tuple[int, LogReadResult, bytes]] = []  # (partition, read, its bytes)
        tag = 0
        for step, op in enumerate(operations):
            name = op[0]
            if name == "append":
                tag += 1
                log, model = logs[op[1]], models[op[1]]
                data = batch(op[2], value_size=op[3], tag=tag)
                result = append(log, data)
                assert result.base_offset == (model[-1][0] if model else 0)
                model.append((result.last_offset + 1, bytes(data)))
            elif name == "roll":
                logs[op[1]].roll()
            elif name in ("read", "truncate"):
                log, model = logs[op[1]], models[op[1]]
                offset = int(op[2] * log.log_end_offset)
                if name == "read":
                    assert log.read_bytes(offset, op[3]) == expected_read(model, offset, op[3])
                else:
                    log.truncate_to(offset)
                    models[op[1]] = [(n, d) for n, d in model if n <= offset]
                    held = [h for h in held if h[0] != op[1]]  # those bytes are gone
            elif name == "hold":
                log, model = logs[op[1]], models[op[1]]
                held.append((op[1], log.read(0, 1 << 30), b"".join(d for _, d in model)))
            else:
                for log in logs:
                    if name == "reopen":
                        log.close()
                if name == "crash":
                    crashed = Path(tmp) / f"crash{step}"
                    shutil.copytree(root, crashed)
                    for log in logs:
                        log.close()
                    root = crashed
                logs = [UnifiedLog.open(root / f"t-{p}", CONFIG, caches=caches) for p in range(5)]
            for log, model in zip(logs, models, strict=True):
                assert log.log_end_offset == (model[-1][0] if model else 0)
            pinned = {id(r.file) for _, result, _ in held for r in result.ranges}
            assert files_open_under(Path(tmp)) <= capacity + len(pinned)
        for _, result, expected in held:
            assert result.to_bytes() == expected
        for log, model in zip(logs, models, strict=True):
            assert log.read_bytes(0, 1 << 30) == b"".join(d for _, d in model)
