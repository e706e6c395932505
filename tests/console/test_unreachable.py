"""The console when its cluster goes away: pages fail at once with one line naming the
address and the cause (not after the client's 15 s request timeout), and Ctrl-C stops it
promptly and quietly."""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

from moldau.testing import BrokerProcess
from tests.console.conftest import start_console


def test_pages_of_a_stopped_cluster_fail_at_once_and_ctrl_c_is_quiet(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "broker") as broker:
        console = start_console(broker.bootstrap)
        try:
            with urllib.request.urlopen(console.page_url("/topics"), timeout=30) as page:
                assert page.status == 200
            broker.stop()
            started = time.monotonic()
            try:
                urllib.request.urlopen(console.page_url("/topics"), timeout=30)
                raise AssertionError("the page of a stopped cluster answered 200")
            except urllib.error.HTTPError as e:
                status, body = e.code, e.read().decode()
            assert time.monotonic() - started < 5
            assert status == 502
            assert f"cannot reach {broker.bootstrap}: connection refused" in body
        finally:
            console.proc.send_signal(signal.SIGINT)
            output, _ = console.proc.communicate(timeout=30)
    assert "Traceback" not in output
    assert len(output.splitlines()) < 10, output
