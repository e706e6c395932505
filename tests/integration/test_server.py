"""The `moldau server` command and version edges: configs, old produce versions, ApiVersions."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.api_versions_request import ApiVersionsRequest
from moldau.records.record import build_batch
from tests.integration.helpers import (
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
