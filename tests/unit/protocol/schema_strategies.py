"""Hypothesis strategies for the generated codecs, built from the vendored schemas.

Each strategy fills every field present in one version with a value of the field's wire
type (nulls only where that version allows them), so encode/decode round trips and
mutated frames cover real layouts, not just defaults.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from hypothesis import strategies as st

from moldau.protocol import codegen

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


@cache
def models() -> dict[str, tuple[Any, codegen.Message]]:
    """Message name -> (generated module, parsed schema), for every generated package."""
    out: dict[str, tuple[Any, codegen.Message]] = {}
    for package, folders in codegen.TARGETS.items():
        for folder in folders:
            for path in sorted((codegen.SCHEMA_DIR / folder).glob("*.json")):
                msg = codegen.Message(codegen.load_schema(path))
                module = importlib.import_module(
                    f"moldau.protocol.{package}.{codegen.module_name(msg.name)}"
                )
                out[msg.name] = (module, msg)
    return out


def _primitive(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INT_BITS:
        half = 1 << (_INT_BITS[kind] - 1)
        return st.integers(-half, half - 1)
    return {
        "uint16": st.integers(0, 0xFFFF),
        "float64": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "uuid": st.binary(min_size=16, max_size=16),
        "string": st.text(max_size=6),
        "bytes": st.binary(max_size=6),
        "records": st.binary(max_size=12),
    }[kind]


def _field(module: Any, msg: codegen.Message, f: codegen.Field, v: int) -> st.SearchStrategy[Any]:
    if f.type == "array":
        elem = (
            _struct(module, msg, f.struct or "", v)
            if f.elem == "struct"
            else _primitive(f.elem or "")
        )
        strategy: st.SearchStrategy[Any] = st.lists(elem, max_size=3)
    elif f.type == "struct":
        strategy = _struct(module, msg, f.struct or "", v)
    else:
        strategy = _primitive(f.type)
    return st.none() | strategy if v in f.nullable else strategy


def _struct(module: Any, msg: codegen.Message, name: str, v: int) -> st.SearchStrategy[Any]:
    fields = {
        f.attr: _field(module, msg, f, v) for f in msg.structs[name].fields if v in f.versions
    }
    return st.builds(getattr(module, name), **fields)


@cache
def message_strategy(name: str, version: int) -> st.SearchStrategy[Any]:
    """Instances of the generated top-level class ``name`` for ``version``."""
    module, msg = models()[name]
    return _struct(module, msg, name, version)


def joined(parts: list[Any]) -> bytes:
    return b"".join(bytes(p) for p in parts)


_ONE = {
    "uint16": 1,
    "float64": 1.5,
    "bool": True,
    "uuid": bytes(range(16)),
    "string": "ab",
    "bytes": b"xy",
    "records": b"rec",
}


def _one(module: Any, msg: codegen.Message, f: codegen.Field, kind: str, v: int) -> Any:
    if kind == "struct":
        return full_struct(module, msg, f.struct or "", v)
    return _ONE.get(kind, 1)  # 1 for every int type


def full_struct(module: Any, msg: codegen.Message, name: str, v: int) -> Any:
    """An instance with every field of version ``v`` set and every array holding one
    element, so that every length and count of the layout is on the wire."""
    values = {}
    for f in msg.structs[name].fields:
        if v in f.versions:
            if f.type == "array":
                values[f.attr] = [_one(module, msg, f, f.elem or "", v)]
            else:
                values[f.attr] = _one(module, msg, f, f.type, v)
    return getattr(module, name)(**values)


def full_message(name: str, version: int) -> Any:
    module, msg = models()[name]
    return full_struct(module, msg, name, version)
