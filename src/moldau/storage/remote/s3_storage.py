"""The ``s3`` remote storage manager: segments in any S3-compatible object store.

Client: boto3. It is AWS's own, maintained in step with S3, and the client users of any
S3-compatible store already know: it reads the usual AWS environment variables, profiles
and instance credentials, and its botocore clients are thread-safe, which is what a
manager called from the copy and reader worker threads needs. Its blocking calls fit our
model as they are (every call here runs on a worker thread, never the event loop); the
alternative, obstore, is fast but young and async-first, with less control over per-call
timeouts and retries than botocore's ``Config``.

Settings are those of Aiven's tiered-storage plugin (the most used open-source one), so
users' ``rsm.config.*`` carry over (prefix stripped here): ``storage.s3.bucket.name``
(required), ``storage.s3.endpoint.url``, ``storage.s3.region``,
``storage.aws.access.key.id`` + ``storage.aws.secret.access.key`` (else the AWS default
chain: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, profiles,
instance roles), ``storage.s3.path.style.access.enabled``, ``key.prefix``,
``storage.s3.multipart.upload.part.size`` (25 MiB), ``storage.s3.api.call.attempt.timeout``
and ``storage.s3.api.call.timeout`` (ms; defaults 5 s and 15 s here, so a dead or frozen
store raises RemoteStorageError within seconds), ``storage.aws.checksum.check.enabled``
(false: Kafka's batches carry their own CRCs).

Each file of a segment is one object (multipart above the part size, parts uploaded a few
at a time); the ``.log`` is put LAST, so an object set without it is a partial upload, which delete cleans up.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from moldau.storage.remote.segment import IndexType, LogSegmentData, RemoteLogSegmentMetadata
from moldau.storage.remote.storage_manager import (
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    check_range,
    object_name,
)

DEFAULT_PART_SIZE = 25 * 1024 * 1024
MIN_PART_SIZE = 5 * 1024 * 1024  # S3's minimum for all parts but the last
UPLOAD_CONCURRENCY = 4  # parts of one segment in flight at once
DEFAULT_ATTEMPT_TIMEOUT_MS = 5_000
DEFAULT_CALL_TIMEOUT_MS = 15_000
# Enough connections for the copy and reader pools together to never queue on the pool.
MAX_CONNECTIONS = 64
_NOT_FOUND = {"NoSuchKey", "404", "NotFound"}


def _bool(configs: dict[str, str], key: str) -> bool | None:
    value = configs.get(key)
    if value is None or value == "":
        return None
    if value.lower() not in ("true", "false"):
        raise ValueError(f"rsm.config.{key} must be true or false, not {value!r}")
    return value.lower() == "true"


def _positive_int(configs: dict[str, str], key: str, default: int, minimum: int = 1) -> int:
    value = configs.get(key)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ValueError(f"rsm.config.{key} must be an integer >= {minimum}, not {value!r}")
    return number


class S3RemoteStorageManager(RemoteStorageManager):
    def __init__(self) -> None:
        self._client: Any = None
        self.bucket = ""
        self.key_prefix = ""
        self.part_size = DEFAULT_PART_SIZE

    def configure(self, configs: dict[str, str]) -> None:
        self.bucket = configs.get("storage.s3.bucket.name", "")
        if not self.bucket:
            raise ValueError(
                "the s3 remote storage manager needs rsm.config.storage.s3.bucket.name"
            )
        self.key_prefix = configs.get("key.prefix", "")
        self.part_size = _positive_int(
            configs, "storage.s3.multipart.upload.part.size", DEFAULT_PART_SIZE, MIN_PART_SIZE
        )
        attempt_ms = _positive_int(
            configs, "storage.s3.api.call.attempt.timeout", DEFAULT_ATTEMPT_TIMEOUT_MS
        )
        call_ms = _positive_int(configs, "storage.s3.api.call.timeout", DEFAULT_CALL_TIMEOUT_MS)
        key_id = configs.get("storage.aws.access.key.id") or None
        secret = configs.get("storage.aws.secret.access.key") or None
        if (key_id is None) != (secret is None):
            raise ValueError(
                "rsm.config.storage.aws.access.key.id and rsm.config.storage.aws.secret.access.key "
                "go together"
            )
        path_style = _bool(configs, "storage.s3.path.style.access.enabled")
        checksums = (
            "when_supported"
            if _bool(configs, "storage.aws.checksum.check.enabled")
            else "when_required"
        )
        session = boto3.session.Session()
        region = (
            configs.get("storage.s3.region")
            or session.region_name  # AWS_REGION / AWS_DEFAULT_REGION / profile
            or "us-east-1"
        )
        self._client = session.client(
            "s3",
            endpoint_url=configs.get("storage.s3.endpoint.url") or None,
            region_name=region,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            config=Config(
                # One attempt waits at most this long for a connection or for any bytes;
                # the attempts together stay within the call timeout.
                connect_timeout=attempt_ms / 1000,
                read_timeout=attempt_ms / 1000,
                retries={"mode": "standard", "total_max_attempts": max(1, call_ms // attempt_ms)},
                max_pool_connections=MAX_CONNECTIONS,
                s3={"addressing_style": {None: "auto", True: "path", False: "virtual"}[path_style]},
                request_checksum_calculation=checksums,
                response_checksum_validation=checksums,
            ),
        )

    @property
    def client(self) -> Any:
        if self._client is None:
            raise RemoteStorageError("the s3 remote storage manager is not configured")
        return self._client

    def key(self, metadata: RemoteLogSegmentMetadata, suffix: str) -> str:
        return self.key_prefix + object_name(metadata, suffix)

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """botocore's errors as ours: a missing key is RemoteResourceNotFoundError, any
        other failure (refused, timed out, 5xx, denied) RemoteStorageError."""
        try:
            yield
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in _NOT_FOUND:
                raise RemoteResourceNotFoundError(f"{what}: not found in s3://{self.bucket}") from e
            raise RemoteStorageError(f"{what}: {e}") from e
        except (BotoCoreError, OSError) as e:
            raise RemoteStorageError(f"{what}: {e}") from e

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> bytes | None:
        for index_type in IndexType:
            source = data.index_source(index_type)
            if source is not None:
                self._upload(self.key(metadata, index_type.suffix), source)
        self._upload(self.key(metadata, LOG_SUFFIX), data.log_segment)
        return None

    def _upload(self, key: str, source: os.PathLike[str] | bytes) -> None:
        with self._errors(f"uploading {key}"):
            if isinstance(source, bytes):
                self.client.put_object(Bucket=self.bucket, Key=key, Body=source)
                return
            with open(source, "rb") as f:
                if os.fstat(f.fileno()).st_size <= self.part_size:
                    self.client.put_object(Bucket=self.bucket, Key=key, Body=f.read())
                else:
                    self._multipart(key, f)

    def _multipart(self, key: str, f: Any) -> None:
        """Parts uploaded UPLOAD_CONCURRENCY at a time (so at most that many in memory); an
        upload that fails is aborted (best effort: stores expire abandoned ones too)."""
        upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        try:
            parts: list[dict[str, Any]] = []
            with ThreadPoolExecutor(UPLOAD_CONCURRENCY, thread_name_prefix="s3-part") as pool:
                in_flight: deque[Future[dict[str, Any]]] = deque()
                while chunk := f.read(self.part_size):
                    if len(in_flight) == UPLOAD_CONCURRENCY:
                        parts.append(in_flight.popleft().result())
                    number = len(parts) + len(in_flight) + 1
                    in_flight.append(pool.submit(self._part, key, upload_id, number, chunk))
                parts += [part.result() for part in in_flight]
            self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            )
        except BaseException:
            with contextlib.suppress(Exception):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            raise

    def _part(self, key: str, upload_id: str, number: int, chunk: bytes) -> dict[str, Any]:
        answer = self.client.upload_part(
            Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=chunk
        )
        return {"PartNumber": number, "ETag": answer["ETag"]}

    def _get(self, key: str, byte_range: str | None = None) -> bytes:
        with self._errors(f"reading {key}"):
            kwargs = {"Range": byte_range} if byte_range else {}
            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=key, **kwargs)
            except ClientError as e:
                # A range starting at or past the end: nothing there to read (as a file).
                if byte_range and e.response.get("Error", {}).get("Code") == "InvalidRange":
                    return b""
                raise
            body: bytes = answer["Body"].read()
            return body

    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> bytes:
        check_range(start_position, end_position)
        end = "" if end_position is None else str(end_position)
        return self._get(self.key(metadata, LOG_SUFFIX), f"bytes={start_position}-{end}")

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        return self._get(self.key(metadata, index_type.suffix))

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        # One request for all of them, the .log listed first; missing keys count as deleted.
        keys = [self.key(metadata, suffix) for suffix in SEGMENT_SUFFIXES]
        with self._errors(f"deleting {metadata.segment_id}"):
            answer = self.client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True},
            )
        errors = [e for e in answer.get("Errors", ()) if e.get("Code") not in _NOT_FOUND]
        if errors:
            raise RemoteStorageError(f"deleting {metadata.segment_id}: {errors}")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
