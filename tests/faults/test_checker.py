"""The checker finds each anomaly it names, on small hand-made histories (and nothing on a
clean one): a checker that cannot fail would make every fault test pass."""

from __future__ import annotations

import struct
from pathlib import Path

from tests.faults.checker import (
    BATCH_HEADER,
    Ack,
    BatchHeader,
    History,
    Poll,
    check,
    read_batch_headers,
    value_of,
)


def clean() -> History:
    """p0 wrote 3 records to partition 0, all acknowledged, read by one consumer."""
    values = [value_of("p0", 0, i) for i in range(3)]
    h = History()
    h.sent = [(0, v) for v in values]
    h.acks = [Ack(0, i, v, float(i)) for i, v in enumerate(values)]
    h.polls = [Poll("c0", 1, 0, i, v, 10.0 + i) for i, v in enumerate(values)]
    h.final = {0: list(enumerate(values))}
    h.final_high_watermarks = {0: 3}
    batches = [BatchHeader(i, i, 0, 100 + i) for i in range(3)]
    h.replica_logs = {0: {1: batches, 2: batches[:], 3: batches[:]}}
    return h


def test_clean_history_is_valid() -> None:
    report = check(clean())
    assert report.valid, report.summary()
    assert (report.acked, report.final_records, report.polled) == (3, 3, 3)


def test_lost_acknowledged_record() -> None:
    h = clean()
    h.final[0] = h.final[0][:2]
    h.polls = h.polls[:2]
    h.final_high_watermarks = {0: 2}
    report = check(h)
    assert report.lost == [(0, 2, "p0/0:2")]
    assert not report.phantom


def test_record_at_another_offset_than_acknowledged() -> None:
    h = clean()
    h.acks[1] = Ack(0, 5, "p0/0:1", 1.0)
    assert check(h).moved == [(0, 5, "p0/0:1", [(0, 1)])]


def test_an_ack_without_offset_counts_by_presence() -> None:
    h = clean()
    h.acks[1] = Ack(0, None, h.acks[1].value, 1.0)
    assert check(h).valid
    h.final[0][1] = (1, "p0/0:9")
    h.sent.append((0, "p0/0:9"))
    assert check(h).lost == [(0, None, "p0/0:1")]


def test_duplicate_and_unexpected_values() -> None:
    h = clean()
    h.final[0] += [(3, "p0/0:1"), (4, "nobody/0:0")]
    report = check(h)
    assert report.duplicated == [("p0/0:1", [(0, 1), (0, 3)])]
    assert report.unexpected == [(0, 4, "nobody/0:0")]
    assert report.reordered == [(0, 3, "p0/0", 2, 1)]


def test_offsets_must_increase() -> None:
    h = clean()
    h.final[0] = [(0, "p0/0:0"), (2, "p0/0:1"), (2, "p0/0:2")]
    assert check(h).bad_offsets == [(0, 2, 2)]


def test_consumer_saw_a_record_later_lost() -> None:
    h = clean()
    h.sent.append((0, "p0/0:3"))
    h.polls.append(Poll("c0", 1, 0, 3, "p0/0:3", 20.0))  # read above the final log
    h.polls.append(Poll("c1", 1, 0, 1, "p1/0:0", 21.0))  # another value at offset 1
    report = check(h)
    assert report.phantom == [("c0", 0, 3, "p0/0:3"), ("c1", 0, 1, "p1/0:0")]


def test_poll_order_within_a_session() -> None:
    h = clean()
    v = [value for _, value in h.final[0]]
    h.polls = [
        Poll("c0", 1, 0, 0, v[0], 1.0),
        Poll("c0", 1, 0, 2, v[2], 2.0),  # skipped offset 1
        Poll("c0", 1, 0, 1, v[1], 3.0),  # went back
        Poll("c0", 2, 0, 0, v[0], 4.0),  # a new assignment may start over
    ]
    report = check(h)
    assert report.poll_skip == [("c0", 1, 0, 0, 2, 1)]
    assert report.poll_nonmonotonic == [("c0", 1, 0, 2, 1)]


def test_acknowledged_but_never_consumed() -> None:
    h = clean()
    h.polls = h.polls[:1]
    assert check(h).unconsumed == [(0, 1, "p0/0:1"), (0, 2, "p0/0:2")]


def test_diverged_replicas() -> None:
    h = clean()
    logs = h.replica_logs[0]
    logs[2] = [*logs[2][:2], BatchHeader(2, 2, 1, 999)]  # another epoch's batch at 2
    logs[3] = logs[3][:1]  # ends below the HW
    report = check(h)
    assert (0, 3, "ends at 1 below the HW 3") in report.diverged
    assert (0, 1, 2, BatchHeader(2, 2, 0, 102), BatchHeader(2, 2, 1, 999)) in report.diverged


def test_batch_headers_from_segment_files(tmp_path: Path) -> None:
    def batch(base: int, records: int, epoch: int, crc: int, body: int) -> bytes:
        length = BATCH_HEADER.size - 12 + body
        header = BATCH_HEADER.pack(base, length, epoch, 2, crc, records - 1)
        return header + bytes(body)

    (tmp_path / "00000000000000000000.log").write_bytes(
        batch(0, 2, 0, 7, 30) + batch(2, 1, 1, 8, 10)
    )
    torn = batch(3, 5, 1, 9, 40)[:-5]  # a write cut short by a crash
    (tmp_path / "00000000000000000003.log").write_bytes(torn)
    (tmp_path / "00000000000000000009.log").write_bytes(struct.pack(">qi", 9, 0))  # zeros
    assert read_batch_headers(tmp_path) == [BatchHeader(0, 1, 0, 7), BatchHeader(2, 2, 1, 8)]
