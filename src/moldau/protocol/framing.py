"""Request and response framing shared by the broker's server side and its clients.

A request is a size prefix, a header (v1; v2 for flexible versions) and the body; a
response is a size prefix, a header (v0; v1 for flexible versions, except ApiVersions)
and the body.
"""

from __future__ import annotations

import struct
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages import RESPONSES
from moldau.protocol.messages.request_header import RequestHeader
from moldau.protocol.messages.response_header import ResponseHeader
from moldau.protocol.primitives import INT32


def is_flexible(cls: Any, version: int) -> bool:
    return 0 <= cls.FLEXIBLE_FROM <= version


def encode_request(message: Any, version: int, correlation_id: int, client_id: str) -> bytes:
    """Size prefix + header + body, ready to write. The header after its correlation id
    (client id, tagged fields) is encoded once per API, version and client id."""
    key = (message.API_KEY, version, client_id)
    tail = _HEADER_TAILS.get(key)
    if tail is None:
        header = RequestHeader(message.API_KEY, version, 0, client_id)
        encoded = b"".join(header.encode(2 if is_flexible(type(message), version) else 1))
        if len(_HEADER_TAILS) >= _MAX_HEADER_TAILS:
            _HEADER_TAILS.clear()
        tail = _HEADER_TAILS[key] = encoded[_REQUEST_HEAD.size :]
    body = b"".join(p if isinstance(p, bytes) else bytes(p) for p in message.encode(version))
    size = _REQUEST_HEAD.size + len(tail) + len(body)
    return b"".join(
        (INT32.pack(size), _REQUEST_HEAD.pack(message.API_KEY, version, correlation_id), tail, body)
    )


_REQUEST_HEAD = struct.Struct(">hhi")  # api key, version, correlation id
_HEADER_TAILS: dict[tuple[int, int, str], bytes] = {}
_MAX_HEADER_TAILS = 1024


def response_correlation_id(frame: memoryview) -> int:
    (correlation_id,) = INT32.unpack_from(frame, 0)
    return int(correlation_id)


def decode_response(api_key: int, version: int, frame: memoryview) -> Any:
    """The body of a response frame (without its size prefix)."""
    cls = RESPONSES[api_key]
    flexible = is_flexible(cls, version) and api_key != ApiKey.API_VERSIONS
    _, pos = ResponseHeader.decode(frame, 1 if flexible else 0)
    response, _ = cls.decode(frame, version, pos)
    return response
