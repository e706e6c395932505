"""What survives a crash, a damaged file, retention and a restart, checked from the data.

Brokers here are the test's own (``fresh_broker``): they get killed, stopped, damaged on
disk and restarted on the same data dir.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import ConfigResource

from moldau.records.batch import scan_batches
from moldau.records.record import decode_all
from moldau.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, read_checkpoint
from moldau.storage.log_manager import CLEAN_SHUTDOWN_FILE
from moldau.testing import BrokerProcess
from tests.integration.helpers import (
    DEADLINE_S,
    PRODUCE_VERSION,
    Acked,
    FreshBroker,
    RawClient,
    Rec,
    admin,
    alter_topic_config,
    assert_acked_survived,
    assert_log_matches,
    batch_of,
    confluent_producer,
    consume_confluent,
    create_topic,
    flatten,
    init_producer_id,
    make_records,
    partition_results,
    produce_confluent,
    produce_request,
    roundtrip_ok,
    wait_until,
    watermarks,
)

FIRST_SEGMENT = "00000000000000000000"
CLEAN_SHUTDOWN_LINE = "shut down cleanly"
ROLLING = {"segment.bytes": "200000"}  # a crash then finds many segments and indexes


def segment_files(partition_dir: Path, suffix: str = ".log") -> list[Path]:
    return sorted(p for p in partition_dir.iterdir() if p.name.endswith(suffix))


# --- kill -9 -------------------------------------------------------------------------------


def produce_through_crash(
    bootstrap: str,
    topic: str,
    records: list[Rec],
    crash: Callable[[], None],
    crash_after_acks: int,
    **config: Any,
) -> tuple[Acked, list[str]]:
    """Produce ``records`` with confluent-kafka from a thread and call ``crash()`` once
    ``crash_after_acks`` are acknowledged. The second half is only produced after the
    crash, so the crash always lands mid-stream. Returns the acks and delivery errors."""
    producer = confluent_producer(
        bootstrap, **{"linger.ms": 2, "batch.num.messages": 100, **config}
    )
    acked: Acked = {}
    errors: list[str] = []
    crashed = threading.Event()

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.value()] = (msg.partition(), msg.offset())
        else:
            errors.append(str(err))

    def produce_all() -> None:
        for i, r in enumerate(records):
            if i == len(records) // 2:
                deadline = time.monotonic() + DEADLINE_S
                while not crashed.is_set() and time.monotonic() < deadline:
                    producer.poll(0.02)  # serves the delivery callbacks the crash waits for
            while True:
                try:
                    producer.produce(
                        topic,
                        key=r.key,
                        value=r.value,
                        headers=list(r.headers),
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        producer.flush(DEADLINE_S)

    thread = threading.Thread(target=produce_all)
    thread.start()
    try:
        wait_until(lambda: len(acked) >= crash_after_acks, f"{crash_after_acks} acks")
        crash()
    finally:
        crashed.set()
        thread.join()
    return acked, errors


def test_kill_9_keeps_every_acknowledged_record(fresh_broker: FreshBroker, topic: str) -> None:
    b = fresh_broker()
    create_topic(b.bootstrap, topic, 3, ROLLING)
    records = make_records(20_000, seed=21)
    # After the kill nothing gets through: those records fail after message.timeout.ms.
    acked, _ = produce_through_crash(
        b.bootstrap, topic, records, b.kill, 3000, **{"acks": "all", "message.timeout.ms": 2000}
    )
    assert len(acked) < len(records)
    b.start()
    consumed = consume_confluent(b.bootstrap, topic)
    by_value = {r.value: r for r in records}
    assert all(g.value in by_value for g in flatten(consumed)), "records nobody produced"
    assert_acked_survived({v: by_value[v] for v in acked}, acked, consumed)
    roundtrip_ok(b.bootstrap, topic, seed=22)


def restart_on_same_port(b: BrokerProcess, *, kill: bool) -> None:
    """Stop (or kill -9) and start again where running clients can reconnect (a
    BrokerProcess keeps its port)."""
    if kill:
        b.kill()
    else:
        b.stop()
    b.start()


def test_idempotent_producer_retries_across_a_crash(fresh_broker: FreshBroker, topic: str) -> None:
    """librdkafka's idempotent producer keeps going through a kill -9 and restart: the
    batches it retries (some already in the log) must be written exactly once, so the log
    holds every record once, in produce order, at its acknowledged offset."""
    b = fresh_broker()
    create_topic(b.bootstrap, topic, 3, ROLLING)
    records = make_records(20_000, seed=23)
    acked, errors = produce_through_crash(
        b.bootstrap,
        topic,
        records,
        lambda: restart_on_same_port(b, kill=True),
        2000,
        **{"enable.idempotence": True, "message.timeout.ms": 60000},
    )
    assert not errors, f"{len(errors)} delivery errors, e.g. {errors[:3]}"
    assert len(acked) == len(records), "records left undelivered"
    assert_log_matches(records, consume_confluent(b.bootstrap, topic), acked=acked)


# --- damaged segment tails -------------------------------------------------------------------


def produce_batches(
    bootstrap: str, topic: str, partition: int, batches: list[list[Rec]]
) -> list[bytes]:
    """One raw produce per batch, so batch boundaries in the file are known; returns the
    batches as built (the bytes the broker stores, bar its offset stamp)."""
    built = []
    with RawClient(bootstrap) as raw:
        offset = 0
        for recs in batches:
            batch = batch_of(recs)
            response = raw.request(produce_request(topic, {partition: batch}), PRODUCE_VERSION)
            result = partition_results(response)[partition]
            assert (result.error_code, result.base_offset) == (0, offset)
            offset += len(recs)
            built.append(batch)
    return built


def damage_garbage_then_partial_batch(log_file: Path, batches: list[bytes]) -> int:
    with log_file.open("ab") as f:
        f.write(random.Random(5).randbytes(333))
        f.write(batches[0][: len(batches[0]) // 2])
    return len(batches)


def damage_half_last_batch(log_file: Path, batches: list[bytes]) -> int:
    size = log_file.stat().st_size
    with log_file.open("r+b") as f:
        f.truncate(size - len(batches[-1]) // 2)
    return len(batches) - 1


def damage_partial_header(log_file: Path, batches: list[bytes]) -> int:
    with log_file.open("ab") as f:
        f.write(batches[1][:20])  # shorter than a batch header
    return len(batches)


#: damage(log file, batches in it) -> how many whole batches must survive
DAMAGES = [damage_garbage_then_partial_batch, damage_half_last_batch, damage_partial_header]


def test_recovery_cuts_a_damaged_tail(fresh_broker: FreshBroker, topic: str) -> None:
    """One damage per partition: recovery keeps the whole batches before it, drops
    everything from it on, and new records continue at the next offset."""
    b = fresh_broker()
    create_topic(b.bootstrap, topic, len(DAMAGES))
    batches = [make_records(25, seed=30 + i) for i in range(5)]
    built = {p: produce_batches(b.bootstrap, topic, p, batches) for p in range(len(DAMAGES))}
    assert b.stop() == 0
    kept = {}
    for p, damage in enumerate(DAMAGES):
        (log_file,) = segment_files(b.data_dir / f"{topic}-{p}")
        kept[p] = [r for recs in batches[: damage(log_file, built[p])] for r in recs]
    (b.data_dir / CLEAN_SHUTDOWN_FILE).unlink()
    (b.data_dir / RECOVERY_POINT_CHECKPOINT).unlink()

    b.start()
    assert watermarks(b.bootstrap, topic) == {p: (0, len(kept[p])) for p in kept}
    consumed = consume_confluent(b.bootstrap, topic)
    for p, damage in enumerate(DAMAGES):
        more = [dataclasses.replace(r, partition=p) for r in make_records(40, seed=40 + p)]
        acked = produce_confluent(b.bootstrap, topic, more)
        assert sorted(offset for _, offset in acked.values()) == list(
            range(len(kept[p]), len(kept[p]) + len(more))
        ), damage.__name__
        assert_log_matches(kept[p], {p: consumed[p]})
    after = consume_confluent(b.bootstrap, topic)
    for p in kept:
        more = [dataclasses.replace(r, partition=p) for r in make_records(40, seed=40 + p)]
        assert_log_matches(kept[p] + more, {p: after[p]})


# --- retention -------------------------------------------------------------------------------

RETENTION_BROKER = {"log.retention.check.interval.ms": "200"}
SMALL_BATCHES = {"batch.num.messages": 10}  # many batches: segments of ~10 kB can roll


def assert_retained_suffix(bootstrap: str, topic: str, records: list[Rec], acked: Acked) -> int:
    """Consuming from the (moved) log start returns exactly the produced records from
    there on; returns the log start offset."""
    ((start, end),) = watermarks(bootstrap, topic).values()
    assert end == len(records)
    suffix = [r for r in records if acked[r.value][1] >= start]
    assert_log_matches(suffix, consume_confluent(bootstrap, topic), start_offsets={0: start})
    return start


def test_retention_by_time(fresh_broker: FreshBroker, topic: str) -> None:
    """Records stamped an hour ago fill the first segments; once retention.ms is set to
    ten minutes those segments go at the next check, the recent ones stay."""
    b = fresh_broker(RETENTION_BROKER)
    create_topic(b.bootstrap, topic, 1, {"segment.bytes": "10000", "retention.ms": "-1"})
    now_ms = int(time.time() * 1000)
    old = make_records(150, seed=50, timestamp=now_ms - 3_600_000)
    recent = make_records(150, seed=51, timestamp=now_ms)
    acked = produce_confluent(b.bootstrap, topic, old, **SMALL_BATCHES)
    acked |= produce_confluent(b.bootstrap, topic, recent, **SMALL_BATCHES)
    partition_dir = b.data_dir / f"{topic}-0"
    before = segment_files(partition_dir)
    assert len(before) >= 4, "segment.bytes=10000 should have rolled several segments"

    alter_topic_config(b.bootstrap, topic, {"retention.ms": "600000"})
    wait_until(lambda: watermarks(b.bootstrap, topic)[0][0] > 0, "the log start to move")
    start = assert_retained_suffix(b.bootstrap, topic, old + recent, acked)
    assert start <= len(old), "recent records were deleted"
    after = segment_files(partition_dir)
    assert before[0] not in after, "the first segment's .log is still there"
    assert before[-1] in after, "the active segment was deleted"
    assert int(after[0].stem) == start, "log start is not the first remaining segment's base"
    roundtrip_ok(b.bootstrap, topic, seed=52)


def _present_bytes(files: list[Path]) -> int:
    """Bytes of the files still there: retention may delete one between listing and stat."""
    total = 0
    for path in files:
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size
    return total


def test_retention_by_size(fresh_broker: FreshBroker, topic: str) -> None:
    b = fresh_broker(RETENTION_BROKER)
    segment_bytes, retention_bytes = 10_000, 20_000
    create_topic(b.bootstrap, topic, 1, {"segment.bytes": str(segment_bytes)})
    records = make_records(400, seed=53)
    acked = produce_confluent(b.bootstrap, topic, records, **SMALL_BATCHES)
    partition_dir = b.data_dir / f"{topic}-0"
    before = segment_files(partition_dir)
    assert sum(p.stat().st_size for p in before) > 2 * retention_bytes

    alter_topic_config(b.bootstrap, topic, {"retention.bytes": str(retention_bytes)})
    wait_until(lambda: watermarks(b.bootstrap, topic)[0][0] > 0, "the log start to move")
    wait_until(
        lambda: _present_bytes(segment_files(partition_dir)) <= retention_bytes + segment_bytes,
        "the log to shrink to retention.bytes",
    )
    after = segment_files(partition_dir)
    assert before[0] not in after, "the first segment's .log is still there"
    assert before[-1] in after, "the active segment was deleted"
    assert int(after[0].stem) == assert_retained_suffix(b.bootstrap, topic, records, acked)
    roundtrip_ok(b.bootstrap, topic, seed=54)


# --- clean restart ---------------------------------------------------------------------------


def producer_ids(bootstrap: str, n: int) -> list[int]:
    with RawClient(bootstrap) as raw:
        return [init_producer_id(raw)[0] for _ in range(n)]


def describe_topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    client = admin(bootstrap)
    futures = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    (entries,) = (f.result(timeout=30) for f in futures.values())
    return {name: entry.value for name, entry in entries.items()}


def test_clean_restart_keeps_everything(fresh_broker: FreshBroker, topic: str) -> None:
    b = fresh_broker()
    create_topic(b.bootstrap, topic, 4, {"retention.ms": "123456789", "segment.bytes": "50000"})
    records = make_records(1000, seed=60)
    acked = produce_confluent(b.bootstrap, topic, records, "zstd")
    ids_before = producer_ids(b.bootstrap, 3)
    assert len(set(ids_before)) == 3

    ends = watermarks(b.bootstrap, topic)
    assert b.stop() == 0
    assert any(CLEAN_SHUTDOWN_LINE in line for line in b.output), list(b.output)[-20:]
    # Nothing left to recover: the marker is there and every recovery point is the log end.
    assert (b.data_dir / CLEAN_SHUTDOWN_FILE).exists()
    points = read_checkpoint(b.data_dir / RECOVERY_POINT_CHECKPOINT)
    assert {p: points.get((topic, p)) for p in ends} == {p: hi for p, (_, hi) in ends.items()}
    b.start()
    assert not (b.data_dir / CLEAN_SHUTDOWN_FILE).exists(), "a crash now must run recovery"

    assert describe_topic_config(b.bootstrap, topic)["retention.ms"] == "123456789"
    assert watermarks(b.bootstrap, topic).keys() == {0, 1, 2, 3}
    assert_log_matches(records, consume_confluent(b.bootstrap, topic), acked=acked)
    ids_after = producer_ids(b.bootstrap, 3)
    assert not set(ids_after) & set(ids_before), "producer ids reused after a restart"
    roundtrip_ok(b.bootstrap, topic, seed=61)


# --- on-disk layout --------------------------------------------------------------------------


def test_on_disk_layout_is_kafkas(fresh_broker: FreshBroker, topic: str) -> None:
    """``<log.dir>/<topic>-<p>/00000000000000000000.log|.index|.timeindex``, and the .log
    holds the produced records as plain v2 batches (the wire format is the storage format)."""
    b = fresh_broker()
    create_topic(b.bootstrap, topic, 2)
    records = make_records(300, seed=70)
    acked = produce_confluent(b.bootstrap, topic, records, "gzip")
    assert b.stop() == 0  # the active segment's indexes are written at flush, roll or close
    for p in range(2):
        partition_dir = b.data_dir / f"{topic}-{p}"
        for suffix in (".log", ".index", ".timeindex"):
            assert (partition_dir / f"{FIRST_SEGMENT}{suffix}").is_file(), (p, suffix)
    on_disk = {}
    for p in range(2):
        data = (b.data_dir / f"{topic}-{p}" / f"{FIRST_SEGMENT}.log").read_bytes()
        # Whole valid v2 batches, as many as the producer sent (not one, as in a request).
        assert sum(info.size for info in scan_batches(data, strict=False)) == len(data)
        on_disk[p] = [
            (p, rec.offset, rec.key, rec.value, tuple(rec.headers))
            for _, recs in decode_all(data)
            for rec in recs
        ]
    by_value = {r.value: r for r in records}
    for p, rows in on_disk.items():
        for _, offset, key, value, headers in rows:
            want = by_value[value]
            assert (acked[value], key, headers) == ((p, offset), want.key, want.headers)
    assert sum(len(rows) for rows in on_disk.values()) == len(records)
