"""Mutations of captured request frames: what broken or hostile clients send.

Each mutator takes a captured request payload (header + body, no size prefix) and a seeded
``random.Random`` and returns the bytes to put on the wire. They know nothing of the
schemas: "huge counts" go where a small int32/int16/varint sits (mostly array counts and
string lengths), and topic names are found by their own bytes behind their length prefix.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
HEADER_FIXED = 8  # api key, api version, correlation id
INTERNAL_TOPICS = ("__consumer_offsets", "__cluster_metadata", "__transaction_state")
#: CreateTopics, CreatePartitions: a mutated partition count asks for millions of
#: partitions. Limits on those are issue 15's "huge or quadratic requests" (another
#: engineer's); test_replay covers them in their own test, not in the mixed replay.
PARTITION_COUNT_APIS = frozenset({19, 37})
# Mutators that may change a partition count (the other ones keep every value).
_COUNT_CHANGING = frozenset({"bit-flips", "huge-count", "random-api"})


@dataclass(frozen=True)
class Case:
    kind: str
    source: int  # index of the captured request it came from
    wire: bytes  # exactly what is sent
    answerable: bool = True  # False: the broker must wait for bytes that never come

    @property
    def correlation_id(self) -> int | None:
        """The correlation id of the first frame, if the frame as sized holds one."""
        if len(self.wire) < 4 + HEADER_FIXED:
            return None
        (size,) = _I32.unpack_from(self.wire)
        return _I32.unpack_from(self.wire, 8)[0] if size >= HEADER_FIXED else None


def api_key(wire: bytes) -> int | None:
    return _I16.unpack_from(wire, 4)[0] if len(wire) >= 6 else None


def framed(payload: bytes | bytearray) -> bytes:
    return _I32.pack(len(payload)) + bytes(payload)


def bit_flips(payload: bytes, rnd: random.Random) -> bytes:
    data = bytearray(payload)
    for _ in range(rnd.randint(1, 8)):
        i = rnd.randrange(len(data))
        data[i] ^= 1 << rnd.randrange(8)
    return framed(data)


def truncation(payload: bytes, rnd: random.Random) -> bytes:
    return framed(payload[: rnd.randrange(len(payload))])


def lying_length(payload: bytes, rnd: random.Random) -> bytes:
    """A size prefix that does not match: shorter (the rest reads as the next frame) or
    longer (the broker waits for bytes that never come)."""
    if rnd.random() < 0.5 and len(payload) > 1:
        return _I32.pack(rnd.randrange(len(payload))) + payload
    return _I32.pack(len(payload) + rnd.choice([1, 7, 1000, 1 << 20])) + payload


_HUGE_I32 = (0x7FFFFFFF, 0x7FFFFFF0, 0x10000000, -1, -2, 1 << 24)
_HUGE_I16 = (0x7FFF, -1, -2, 0x4000)
_HUGE_VARINTS = (b"\xff\xff\xff\xff\x07", b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x10")


def huge_count(payload: bytes, rnd: random.Random) -> bytes:
    """Put a huge or negative value where a small count or length sits."""
    data = bytearray(payload)
    body = range(HEADER_FIXED, len(data) - 1)
    for _ in range(rnd.randint(1, 3)):
        i = rnd.choice(body)
        kind = rnd.randrange(3)
        if kind == 0 and i + 4 <= len(data) and 0 <= _I32.unpack_from(data, i)[0] < 10_000:
            _I32.pack_into(data, i, rnd.choice(_HUGE_I32))
        elif kind == 1 and 0 <= _I16.unpack_from(data, i)[0] < 300:
            _I16.pack_into(data, i, rnd.choice(_HUGE_I16))
        elif 0 < data[i] < 0x80:  # a one-byte (compact) varint
            data[i : i + 1] = rnd.choice(_HUGE_VARINTS)
    return framed(data)


def random_api(payload: bytes, rnd: random.Random) -> bytes:
    """Another API key and/or version in front of the same body."""
    data = bytearray(payload)
    api_key = rnd.choice([rnd.randrange(0, 80), rnd.randrange(-5, 1000), _I16.unpack(data[:2])[0]])
    version = rnd.choice([rnd.randrange(0, 18), rnd.randrange(-3, 200)])
    _I16.pack_into(data, 0, api_key)
    _I16.pack_into(data, 2, version)
    return framed(data)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string_encodings(name: str) -> list[bytes]:
    raw = name.encode()
    return [_I16.pack(len(raw)) + raw, _uvarint(len(raw) + 1) + raw]


def retarget(payload: bytes, names: Sequence[str], target: str) -> bytes | None:
    """Every ``names`` string in the payload renamed ``target`` (length prefix included),
    or None when the payload names none of them."""
    out, found = payload, False
    for name in names:
        for old, new in zip(_string_encodings(name), _string_encodings(target), strict=True):
            found = found or old in out
            out = out.replace(old, new)
    return framed(out) if found else None


MUTATORS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "bit-flips": bit_flips,
    "truncation": truncation,
    "lying-length": lying_length,
    "huge-count": huge_count,
    "random-api": random_api,
}


def cases(captured: Sequence[bytes], topics: Sequence[str], n: int, seed: int) -> list[Case]:
    """``n`` cases, evenly over the mutators plus retargeting to other (non-internal)
    topics, each from a randomly chosen captured request (none that may ask for a huge
    number of partitions: see ``PARTITION_COUNT_APIS``)."""
    rnd = random.Random(seed)
    kinds = [*MUTATORS, "retarget"]
    out: list[Case] = []
    naming = [i for i, p in enumerate(captured) if retarget(p, topics, "x") is not None]
    while len(out) < n:
        kind = kinds[len(out) % len(kinds)]
        if kind == "retarget":
            source = rnd.choice(naming)
            target = rnd.choice([*topics, "replay-new", "", "x" * 249, "bad/../name", "a" * 300])
            wire = retarget(captured[source], topics, target)
            assert wire is not None
        else:
            source = rnd.randrange(len(captured))
            wire = MUTATORS[kind](captured[source], rnd)
            if kind in _COUNT_CHANGING and api_key(wire) in PARTITION_COUNT_APIS:
                continue
        (size,) = _I32.unpack_from(wire)
        out.append(Case(kind, source, wire, answerable=size <= len(wire) - 4))
    return out
