"""The `moldau server` command and version edges: configs, a locked data dir, restarts, old
produce versions, ApiVersions."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.api_versions_request import ApiVersionsRequest
from moldau.records.record import build_batch
from tests.integration.helpers import (
    FreshBroker,
    RawClient,
    consume_confluent,
    create_topic,
    partition_results,
    produce_request,
)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("num.partitions=abc", "num.partitions: 'abc' is not an integer"),
        ("log.segment.bytes=-5", "log.segment.bytes"),
        ("listeners=nowhere", "listeners: 'nowhere' is not of the form NAME://HOST:PORT"),
        ("auto.create.topics.enable=perhaps", "auto.create.topics.enable"),
        ("nokey", "not of the form key=value"),
    ],
)
def test_bad_configuration_is_refused_with_a_clear_message(tmp_path, override, message):
    proc = subprocess.run(
        [sys.executable, "-m", "moldau", "server", "-o", f"log.dirs={tmp_path}", "-o", override],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "invalid configuration" in proc.stderr and message in proc.stderr


def test_properties_file_with_overrides_on_top(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text(
        "# a comment\nlisteners=PLAINTEXT://127.0.0.1:0\nnum.partitions=4\nnode.id=7\n"
        f"log.dirs={tmp_path / 'ignored'}\n"
    )
    cmd = [sys.executable, "-m", "moldau", "server", "--config", str(props)]
    cmd += ["-o", f"log.dirs={tmp_path / 'data'}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:")
        admin = AdminClient({"bootstrap.servers": line.split()[-1]})
        meta = admin.list_topics(topic="from-file", timeout=10)
        assert len(meta.topics["from-file"].partitions) == 4
        assert meta.controller_id == 7
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "shut down cleanly" in out
    assert (tmp_path / "data" / "from-file-3").is_dir()
    assert not (tmp_path / "ignored").exists()


def files_state(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``root``: (size, mtime in ns, SHA-256)."""
    return {
        str(f.relative_to(root)): (
            f.stat().st_size,
            f.stat().st_mtime_ns,
            hashlib.sha256(f.read_bytes()).hexdigest(),
        )
        for f in sorted(root.rglob("*"))
        if f.is_file()
    }


def test_a_second_process_on_a_live_log_dir_is_refused_and_touches_nothing(
    fresh_broker: FreshBroker, topic: str, tmp_path: Path
) -> None:
    b = fresh_broker()
    assert b.proc is not None
    b.create_topic(topic, 2)
    before = b.produce(topic, *(f"before-{i}" for i in range(50)))
    locked = f"log dir {b.data_dir} is locked by another process (PID {b.proc.pid})"
    props = tmp_path / "second.properties"
    props.write_text(f"log.dirs={b.data_dir}\nlisteners=PLAINTEXT://127.0.0.1:0\n")
    # Stopped (its lock held), the first broker cannot blur the comparison with its own
    # periodic checkpoints.
    b.proc.send_signal(signal.SIGSTOP)
    try:
        files = files_state(b.data_dir)
        for command, prefix in (
            (["server", "--config", str(props)], "moldau server"),
            (["storage", "format", "-t", "x", "--config", str(props)], "moldau storage format"),
        ):
            second = subprocess.run(
                [sys.executable, "-m", "moldau", *command],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert second.returncode == 1, second
            # Exactly this line: it stopped before recovering, registering or binding.
            assert second.stderr == f"{prefix}: {locked}\n" and not second.stdout
        assert files_state(b.data_dir) == files
    finally:
        b.proc.send_signal(signal.SIGCONT)
    after = b.produce(topic, *(f"after-{i}" for i in range(50)))
    expected = sorted(before + after, key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset, r.value) for r in b.consume(topic, 100)] == [
        (r.partition, r.offset, r.value) for r in expected
    ]


def test_a_single_node_restarted_after_kill_9_serves_at_once_without_errors(
    fresh_broker: FreshBroker, topic: str
) -> None:
    """It is its own controller: its previous incarnation cannot be alive, so its
    registration is not refused as a duplicate while the old session runs out."""
    b = fresh_broker({"broker.session.timeout.ms": "15000"})
    b.create_topic(topic, 1)
    acked = b.produce(topic, "one")
    b.kill()
    mark = b.lines_seen
    started = time.monotonic()
    b.start()
    acked += b.produce(topic, "two")
    took = time.monotonic() - started
    b.settle_output()
    problems = [line for line in b.output_since(mark) if " ERROR " in line or "DUPLICATE" in line]
    assert not problems
    assert took < 10, f"serving {took:.1f} s after the restart"  # the old session: 15 s
    assert [r.value for r in b.consume(topic, 2)] == [r.value for r in acked] == [b"one", b"two"]


def test_produce_v0_to_v2_are_advertised_but_refused(broker, topic):
    create_topic(broker.bootstrap, topic, 1)
    batch = build_batch([(b"k", b"v")])
    with RawClient(broker.bootstrap) as raw:
        versions = {v.api_key: v for v in raw.request(ApiVersionsRequest(), 3).api_keys}
        assert versions[ApiKey.PRODUCE].min_version == 0
        for version in (0, 1, 2):
            response = raw.request(produce_request(topic, {0: batch}), version)
            assert partition_results(response)[0].error_code == ErrorCode.UNSUPPORTED_VERSION
        ok = raw.request(produce_request(topic, {0: batch}), 3)
        assert partition_results(ok)[0].error_code == ErrorCode.NONE
    got = consume_confluent(broker.bootstrap, topic)[0]
    assert [(r.key, r.value) for r in got] == [(b"k", b"v")]


def test_invalid_acks_are_refused(broker, topic):
    create_topic(broker.bootstrap, topic, 1)
    with RawClient(broker.bootstrap) as raw:
        response = raw.request(produce_request(topic, {0: build_batch([(b"k", b"v")])}, acks=2), 9)
    assert partition_results(response)[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert consume_confluent(broker.bootstrap, topic) == {0: []}
