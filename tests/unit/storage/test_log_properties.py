"""Property: any sequence of appends, rolls, reads, retention, DeleteRecords, reopens and
crashes keeps "reading from the log start offset returns exactly the batches appended
since, in order"."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import append, batch

from moldau.config.topic import LogConfig
from moldau.storage.unified_log import UnifiedLog

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=128, file_delete_delay_ms=0)

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5), st.integers(0, 400)),
        st.tuples(st.just("roll")),
        st.tuples(st.just("read"), st.floats(0, 1), st.integers(1, 3000)),
        st.tuples(st.just("retain"), st.integers(0, 4000)),
        st.tuples(st.just("delete_records"), st.floats(0, 1)),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("crash")),
    ),
    max_size=60,
)


def expected_from(model: list[tuple[int, int, bytes]], offset: int) -> list[bytes]:
    return [data for _, next_offset, data in model if next_offset > offset]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_log_keeps_appended_batches_in_order(operations) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log = UnifiedLog.open(directory, CONFIG)
        model: list[tuple[int, int, bytes]] = []  # (base offset, next offset, bytes)
        tag = 0
        for step, op in enumerate(operations):
            name = op[0]
            if name == "append":
                tag += 1
                data = batch(op[1], value_size=op[2], tag=tag)
                result = append(log, data)
                assert result.base_offset == (model[-1][1] if model else 0)
                model.append((result.base_offset, result.last_offset + 1, bytes(data)))
            elif name == "roll":
                log.roll()
            elif name == "read":
                start = log.log_start_offset
                offset = start + int(op[1] * (log.log_end_offset - start))
                got = log.read_bytes(offset, op[2])
                expected = expected_from(model, offset)
                if expected:
                    n, total = 0, 0
                    while n < len(expected) and total + len(expected[n]) <= op[2]:
                        total += len(expected[n])
                        n += 1
                    assert got == b"".join(expected[: max(n, 1)])
                else:
                    assert got == b""
            elif name == "retain":
                before = log.log_start_offset
                log.update_config(dataclasses.replace(CONFIG, retention_bytes=op[1]))
                log.enforce_retention(log.log_end_offset)
                log.update_config(CONFIG)
                after = log.log_start_offset
                assert after == before or after == log.segments[0].base_offset > before
            elif name == "delete_records":
                start = log.log_start_offset
                hw = log.log_end_offset
                log.delete_records_before(start + int(op[1] * (hw - start)), hw)
            elif name == "reopen":
                start = log.log_start_offset
                log.close()
                log = UnifiedLog.open(directory, CONFIG, log_start_offset=start)
            else:  # crash: reopen a copy of the files as they are, never closing
                start = log.log_start_offset
                crashed = Path(tmp) / f"crash{step}" / "t-0"
                shutil.copytree(directory, crashed)
                log.close()
                directory = crashed
                log = UnifiedLog.open(directory, CONFIG, log_start_offset=start)
            start = log.log_start_offset
            assert log.log_end_offset == (model[-1][1] if model else 0)
            assert log.read_bytes(start, 1 << 30) == b"".join(expected_from(model, start))
        log.close()
