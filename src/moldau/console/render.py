"""How keys, values, timestamps and sizes read on a page: pure functions for the templates."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from datetime import UTC, datetime

FORMATS = ("auto", "text", "json", "hex")
# Longer payloads are cut on the page (the browser should not choke on a 10 MB value).
SHOWN_BYTES = 8192
PREVIEW_CHARS = 160
_CONTROL = {chr(c) for c in range(32)} - {"\t", "\n", "\r"}


@dataclass(frozen=True)
class Shown:
    """A key or value as displayed: `kind` is null, text, json or hex."""

    kind: str
    text: str
    size: int
    truncated: bool = False
    note: str = ""

    @property
    def preview(self) -> str:
        """One line for the table: whitespace collapsed, cut at PREVIEW_CHARS."""
        line = " ".join(self.text.split()) if "\n" in self.text else self.text
        return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"

    @property
    def expandable(self) -> bool:
        """Whether the full rendering says more than the preview."""
        return self.truncated or self.preview != self.text


def show(data: bytes | None, fmt: str = "auto", limit: int = SHOWN_BYTES) -> Shown:
    """Render bytes as text, pretty JSON or hex; `auto` picks JSON, then UTF-8 text, then hex."""
    if data is None:
        return Shown("null", "null", 0)
    size = len(data)
    if fmt == "hex":
        return _hex(data, limit)
    if fmt in ("auto", "json"):
        parsed = _json(data) if size <= limit else None
        if parsed is not None:
            return Shown("json", parsed, size)
        if fmt == "json":
            fallback = _text(data, limit) or _hex(data, limit)
            return Shown(fallback.kind, fallback.text, size, fallback.truncated, "not JSON")
    text = _text(data, limit)
    if text is not None:
        return text
    return _hex(data, limit, note="not UTF-8 text" if fmt == "text" else "")


def _json(data: bytes) -> str | None:
    if data.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        return json.dumps(json.loads(data), indent=2, ensure_ascii=False)
    except ValueError:
        return None


def _text(data: bytes, limit: int) -> Shown | None:
    try:
        text = data[:limit].decode()
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the limit is fine; anything else is not text.
        if len(data) <= limit or exc.start < limit - 3:
            return None
        text = data[: exc.start].decode()
    if any(c in _CONTROL for c in text):
        return None
    return Shown("text", text, len(data), len(data) > limit)


def _hex(data: bytes, limit: int, note: str = "") -> Shown:
    return Shown("hex", data[:limit].hex(" "), len(data), len(data) > limit, note)


def timestamp(ms: int | None) -> str:
    """Milliseconds since the epoch as UTC, e.g. 2026-11-22 05:59:34.123Z."""
    if ms is None or ms < 0:
        return "-"
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_timestamp(text: str) -> int:
    """An ISO-8601 date-time (UTC unless it names a zone) or epoch milliseconds, as ms."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    moment = datetime.fromisoformat(text.removesuffix("Z").replace("T", " "))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def size(n: int | float | None) -> str:
    """Bytes in binary units: 0 B, 1.5 KiB, 12.0 MiB."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def count(n: int | float | None) -> str:
    """A number with thousands separators (1,234,567); '-' when unknown."""
    if n is None:
        return "-"
    return f"{n:,.0f}" if isinstance(n, int) or float(n).is_integer() else f"{n:,.1f}"


def compact(n: float) -> str:
    """Short axis labels: 950, 1.2k, 3.4M."""
    for threshold, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= threshold:
            return f"{n / threshold:.3g}{suffix}"
    return f"{n:.3g}"


def pretty_schema(text: str, schema_type: str) -> str:
    """A schema as people read it: Avro and JSON Schema indented, Protobuf as given."""
    if schema_type == "PROTOBUF":
        return text
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def diff(old: str, new: str, old_name: str, new_name: str) -> list[tuple[str, str]]:
    """A unified diff of two texts as (kind, line) pairs, kind being file, hunk, add, del or
    same (for the page's colours)."""
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), old_name, new_name, n=3, lineterm=""
    )
    kinds = {"+++": "file", "---": "file", "@@": "hunk", "+": "add", "-": "del"}
    shown = []
    for line in lines:
        prefix = next((p for p in kinds if line.startswith(p)), "")
        shown.append((kinds.get(prefix, "same"), line))
    return shown
