"""A live broker, the console serving it (`moldau console` as a subprocess) and Debian's
Chromium driven by Playwright."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka.admin import AdminClient
from playwright.sync_api import Browser, Page, sync_playwright

# The one place the broker helper is imported (it is becoming a pytest plugin).
from moldau.testing import BrokerProcess

CHROMIUM = os.environ.get("MOLDAU_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
SAMPLE_INTERVAL_S = 0.5


@dataclass
class Console:
    url: str
    proc: subprocess.Popen[str]

    def page_url(self, path: str) -> str:
        return self.url.rstrip("/") + path


def start_console(bootstrap: str, *extra: str) -> Console:
    """`moldau console` on a free port; returns once it answers /healthz."""
    cmd = [sys.executable, "-m", "moldau", "console", "--bootstrap", bootstrap, "--port", "0"]
    cmd += ["--sample-interval", str(SAMPLE_INTERVAL_S), *extra]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        raise RuntimeError(f"console did not start: {line}{proc.stdout.read()}")
    url = line.split("http://", 1)[1].split()[0]
    console = Console(f"http://{url}", proc)
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(console.page_url("/healthz"), timeout=2) as response:
                if response.read() == b"ok":
                    return console
        except OSError:
            if time.monotonic() > deadline:
                stop_console(console)
                raise
            time.sleep(0.1)


def stop_console(console: Console) -> None:
    console.proc.send_signal(signal.SIGTERM)
    try:
        console.proc.wait(20)
    except subprocess.TimeoutExpired:
        console.proc.kill()
        console.proc.wait()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    overrides = {"num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}
    with BrokerProcess(tmp_path_factory.mktemp("broker"), overrides) as running:
        yield running


@pytest.fixture(scope="module")
def console(broker: BrokerProcess) -> Iterator[Console]:
    running = start_console(broker.bootstrap)
    yield running
    stop_console(running)


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """Package scope: Playwright's sync API keeps an event loop running in this thread,
    so it must stop before tests elsewhere call asyncio.run()."""
    if shutil.which(CHROMIUM) is None:
        pytest.fail(
            f"{CHROMIUM} is missing: run ./scripts/setup.sh test (apt-get install chromium)"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    opened.on("dialog", lambda dialog: dialog.accept())  # "Delete topic ...?" confirmations
    yield opened
    context.close()
