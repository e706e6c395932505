"""Generate codecs from Kafka's JSON message schemas.

Run ``python -m moldau.protocol.codegen`` to rewrite the generated packages from the
schemas vendored in ``moldau/protocol/schemas/`` (see ``TARGETS``): RPCs and the KRaft
control records (``messages/``), KRaft metadata records (``metadata_records/``), the
group/transaction coordinators' records (``coordinator_records/``) and the records of
tiered storage's ``__remote_log_metadata`` (``remote_log_metadata_records/``). Each schema
becomes a module with one dataclass per struct and one straight-line decoder and encoder per
distinct wire layout (versions with identical layouts share a function), so the runtime
does no schema interpretation at all.

Decoders trust nothing: every length and count is checked against the bytes left before
anything is allocated (an array count must fit its elements' minimum encoded size), and a
null where the schema does not allow one is refused, as Kafka's generated readers do.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE_DIR = Path(__file__).parent
SCHEMA_DIR = PACKAGE_DIR / "schemas"

# Generated package -> the vendored schema folders it is generated from. raft/ holds
# QuorumStateData, which Kafka stores as a JSON file, so it gets no binary codec.
TARGETS: dict[str, tuple[str, ...]] = {
    "messages": ("clients",),
    "metadata_records": ("metadata",),
    "coordinator_records": ("group-coordinator", "transaction-coordinator", "share-coordinator"),
    "remote_log_metadata_records": ("storage",),
}
# Packages indexed by api key in a RECORDS table, with their index's docstring.
RECORDS_BY_API_KEY = {
    "metadata_records": "Generated index of KRaft metadata record codecs by api key. Do not edit.",
    "remote_log_metadata_records": (
        "Generated index of __remote_log_metadata record codecs by api key. Do not edit."
    ),
}

FIXED = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}


def load_schema(path: Path) -> dict:
    text = re.sub(r"(?m)^\s*//.*$", "", path.read_text())
    text = re.sub(r"(?m)//[^\"\n]*$", "", text)
    return json.loads(text)


@dataclass(frozen=True)
class Versions:
    low: int
    high: int  # inclusive; large for "N+"

    @classmethod
    def parse(cls, spec: str | None, default: Versions | None = None) -> Versions:
        if spec is None:
            assert default is not None
            return default
        spec = spec.strip()
        if spec == "none":
            return cls(1, 0)
        if spec.endswith("+"):
            return cls(int(spec[:-1]), 1 << 15)
        if "-" in spec:
            lo, hi = spec.split("-")
            return cls(int(lo), int(hi))
        return cls(int(spec), int(spec))

    def __contains__(self, v: int) -> bool:
        return self.low <= v <= self.high


NONE = Versions(1, 0)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


@dataclass
class Field:
    name: str
    attr: str
    type: str  # primitive name, "struct" or "array"
    elem: str | None  # for arrays: primitive or "struct"
    struct: str | None  # struct class name for struct/array-of-struct
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    flexible_override: Versions | None
    default: str | None


@dataclass
class Struct:
    name: str
    fields: list[Field] = field(default_factory=list)


class Message:
    def __init__(self, schema: dict) -> None:
        self.name: str = schema["name"]
        self.kind: str = schema["type"]
        self.api_key: int | None = schema.get("apiKey")
        self.valid = Versions.parse(schema["validVersions"])
        self.flexible = Versions.parse(schema.get("flexibleVersions", "none"))
        self.common = {s["name"]: s["fields"] for s in schema.get("commonStructs", [])}
        self.structs: dict[str, Struct] = {}
        self.order: list[str] = []
        self._build(self.name, schema["fields"])

    def _build(self, name: str, fields: list[dict]) -> Struct:
        if name in self.structs:
            return self.structs[name]
        struct = Struct(name)
        self.structs[name] = struct
        for f in fields:
            struct.fields.append(self._field(f))
        self.order.append(name)
        return struct

    def _field(self, f: dict) -> Field:
        ftype: str = f["type"]
        elem = None
        struct_name = None
        if ftype.startswith("[]"):
            inner = ftype[2:]
            kind = "array"
            if inner in FIXED or inner in ("string", "bytes", "records"):
                elem = inner
            else:
                elem = "struct"
                struct_name = inner
                self._build(inner, f.get("fields") or self.common[inner])
        elif ftype in FIXED or ftype in ("string", "bytes", "records"):
            kind = ftype
        else:
            kind = "struct"
            struct_name = ftype
            self._build(ftype, f.get("fields") or self.common[ftype])
        tagged = Versions.parse(f.get("taggedVersions"), NONE)
        versions = Versions.parse(f.get("versions"), tagged)  # as Kafka: tagged-only fields
        default = f.get("default")
        if "default" in f and default is None:  # JSON null: Kafka's "null" default
            default = "null"
        return Field(
            name=f["name"],
            attr=snake(f["name"]),
            type=kind,
            elem=elem,
            struct=struct_name,
            versions=versions,
            nullable=Versions.parse(f.get("nullableVersions"), NONE),
            tagged=tagged,
            tag=None if f.get("tag") is None else int(f["tag"]),
            flexible_override=(
                Versions.parse(f["flexibleVersions"]) if "flexibleVersions" in f else None
            ),
            default=None if default is None else str(default),
        )


def py_default(f: Field) -> str:
    d = f.default
    if f.type == "array":
        return "None" if d == "null" else "field(default_factory=list)"
    if f.type == "struct":
        return "None" if d == "null" else f"field(default_factory=lambda: {f.struct}())"
    if d == "null":
        return "None"
    if f.type in ("int8", "int16", "uint16", "int32", "int64"):
        return str(int(d, 0)) if d else "0"
    if f.type == "float64":
        return repr(float(d)) if d else "0.0"
    if f.type == "bool":
        return "True" if d == "true" else "False"
    if f.type == "string":
        return repr(d or "")
    if f.type == "uuid":
        return "ZERO_UUID"
    if f.type == "bytes":
        return 'b""'
    return "None"  # records


def local_default(f: Field) -> str:
    """The default as an expression usable inside a function body."""
    d = py_default(f)
    if d == "field(default_factory=list)":
        return "[]"
    if d.startswith("field("):
        return f"{f.struct}()"
    return d


def py_type(f: Field) -> str:
    base = {
        "int8": "int",
        "int16": "int",
        "uint16": "int",
        "int32": "int",
        "int64": "int",
        "float64": "float",
        "bool": "bool",
        "string": "str",
        "uuid": "bytes",
        "bytes": "bytes",
        "records": "Any",
    }
    if f.type == "array":
        inner = f.struct if f.elem == "struct" else base[f.elem or ""]
        t = f"list[{inner}]"
    elif f.type == "struct":
        t = f.struct or ""
    else:
        t = base[f.type]
    # Decoders refuse a null the schema does not allow, so only nullable fields say None.
    nullable = f.nullable.low <= f.nullable.high or f.default == "null"
    return f"{t} | None" if nullable and f.type not in FIXED else t


class Emitter:
    """Emits straight-line decoder/encoder functions for each (struct, version)."""

    def __init__(self, msg: Message) -> None:
        self.msg = msg
        self.structs_fmt: dict[str, str] = {}
        self.funcs: dict[str, str] = {}  # code -> function name
        self.lines: list[str] = []
        self.decoders: dict[tuple[str, int], str] = {}
        self.encoders: dict[tuple[str, int], str] = {}

    def fmt_const(self, fmt: str) -> str:
        name = "_S_" + fmt.replace("?", "o").replace("16s", "u")
        self.structs_fmt[name] = fmt
        return name

    def flexible(self, f: Field | None, v: int) -> bool:
        if f is not None and f.flexible_override is not None:
            return v in f.flexible_override
        return v in self.msg.flexible

    def present(self, s: Struct, v: int) -> list[Field]:
        return [f for f in s.fields if v in f.versions]

    # -- sizes ---------------------------------------------------------------
    def min_size(self, f: Field, kind: str, v: int, nullable: bool) -> int:
        """The fewest bytes one value of ``kind`` can take on the wire."""
        flex = self.flexible(f, v)
        if kind in FIXED:
            return FIXED[kind][1]
        if kind == "string":
            return 1 if flex else 2
        if kind in ("bytes", "records", "array"):
            return 1 if flex else 4
        if nullable:  # a nullable struct may be just its -1 marker
            return 1
        return self.struct_min_size(f.struct or "", v)

    def struct_min_size(self, struct_name: str, v: int) -> int:
        s = self.msg.structs[struct_name]
        fields = [f for f in self.present(s, v) if v not in f.tagged]
        size = sum(self.min_size(f, f.type, v, v in f.nullable) for f in fields)
        return size + (1 if self.flexible(None, v) else 0)  # the tagged-field count

    # -- decoding ------------------------------------------------------------
    def read_expr(self, kind: str, f: Field, v: int, var: str, nullable: bool) -> list[str]:
        """Lines that read one value of ``kind`` into ``var`` and advance pos."""
        flex = self.flexible(f, v)
        if kind in FIXED:
            fmt, size = FIXED[kind]
            c = self.fmt_const(fmt)
            return [f"({var},) = {c}.unpack_from(buf, pos)", f"pos += {size}"]
        fn = "read_" + ("nullable_" if nullable else "") + ("compact_" if flex else "")
        if kind == "string":
            return [f"{var}, pos = {fn}string(buf, pos)"]
        if kind == "bytes":
            lines = [f"{var}, pos = {fn}bytes(buf, pos)"]
            if nullable:
                return [*lines, f"if {var} is not None: {var} = bytes({var})"]
            return [*lines, f"{var} = bytes({var})"]
        if kind == "records":  # zero-copy: a view of the request frame
            return [f"{var}, pos = {fn}bytes(buf, pos)"]
        raise AssertionError(kind)

    def decode_field(self, f: Field, v: int, var: str) -> list[str]:
        flex = self.flexible(f, v)
        nullable = v in f.nullable
        null_error = f"raise ProtocolDecodeError('non-nullable field {f.name} was null')"
        if f.type == "struct":
            fn = self.decoder(f.struct or "", v)
            lines = []
            if nullable:
                lines += [
                    "(_m,) = _S_b.unpack_from(buf, pos)",
                    "pos += 1",
                    f"if _m < 0: {var} = None",
                    f"else: {var}, pos = {fn}(buf, pos)",
                ]
                self.fmt_const("b")
            else:
                lines.append(f"{var}, pos = {fn}(buf, pos)")
            return lines
        if f.type == "array":
            ln = "read_compact_array_len" if flex else "read_array_len"
            size = max(1, self.min_size(f, f.elem or "", v, False))
            head = [f"_n, pos = {ln}(buf, pos, {size})"]
            if f.elem in FIXED and f.elem != "uuid":
                fmt, size = FIXED[f.elem]
                items = [
                    f"{var} = list(struct.unpack_from('>' + '{fmt}' * _n, buf, pos))",
                    f"pos += {size} * _n",
                ]
            else:
                if f.elem == "struct":
                    fn = self.decoder(f.struct or "", v)
                    body = [f"_x, pos = {fn}(buf, pos)"]
                else:  # elements of a string or bytes array are never null
                    body = self.read_expr(f.elem or "", f, v, "_x", False)
                items = [f"{var} = []", "for _ in range(_n):"]
                items += ["    " + b for b in body]
                items.append(f"    {var}.append(_x)")
            if nullable:
                return [*head, f"if _n < 0: {var} = None", "else:", *("    " + i for i in items)]
            return [*head, f"if _n < 0: {null_error}", *items]
        return self.read_expr(f.type, f, v, var, nullable)

    def decoder(self, struct_name: str, v: int) -> str:
        key = (struct_name, v)
        if key in self.decoders:
            return self.decoders[key]
        s = self.msg.structs[struct_name]
        fields = self.present(s, v)
        normal = [f for f in fields if v not in f.tagged]
        tagged = [f for f in fields if v in f.tagged]
        # Locals hold a reader's value before its final form (a view before bytes(), None
        # before a list): Any keeps the generated code checkable by mypy, at no run-time cost.
        body: list[str] = [f"v_{f.attr}: Any" for f in fields if f.type not in FIXED]
        # Group runs of fixed-width fields into one struct unpack.
        i = 0
        while i < len(normal):
            f = normal[i]
            if f.type in FIXED and v not in f.nullable:
                run = [f]
                while i + len(run) < len(normal) and normal[i + len(run)].type in FIXED:
                    run.append(normal[i + len(run)])
                fmt = "".join(FIXED[r.type][0] for r in run)
                size = sum(FIXED[r.type][1] for r in run)
                c = self.fmt_const(fmt)
                names = ", ".join(f"v_{r.attr}" for r in run)
                body.append(f"({names},) = {c}.unpack_from(buf, pos)")
                body.append(f"pos += {size}")
                i += len(run)
                continue
            body += self.decode_field(f, v, f"v_{f.attr}")
            i += 1
        if self.flexible(None, v):
            for f in tagged:
                body.append(f"v_{f.attr} = {local_default(f)}")
            body.append("_tc, pos = read_uvarint(buf, pos)")
            body.append("for _ in range(_tc):")
            body.append("    _tag, pos = read_uvarint(buf, pos)")
            body.append("    _ts, pos = read_uvarint(buf, pos)")
            body.append("    _end = pos + _ts")
            body.append(
                "    if _end > len(buf): raise ProtocolDecodeError('tagged field overruns')"
            )
            for j, f in enumerate(tagged):
                kw = "if" if j == 0 else "elif"
                body.append(f"    {kw} _tag == {f.tag}:")
                body += ["        " + ln for ln in self.decode_field(f, v, f"v_{f.attr}")]
            body.append("    pos = _end")
        args = ", ".join(f"{f.attr}=v_{f.attr}" for f in fields)
        body.append(f"return {struct_name}({args}), pos")
        code = "\n".join("    " + ln for ln in body)
        name = self._intern(
            f"_d_{struct_name}", "(buf: memoryview, pos: int) -> tuple[Any, int]", code
        )
        self.decoders[key] = name
        return name

    # -- encoding ------------------------------------------------------------
    def write_value(self, kind: str, f: Field, v: int, expr: str, out: str) -> list[str]:
        flex = self.flexible(f, v)
        if kind in FIXED:
            c = self.fmt_const(FIXED[kind][0])
            return [f"{out} += {c}.pack({expr})"]
        if kind == "string":
            return [f"{'write_compact_string' if flex else 'write_string'}({out}, {expr})"]
        if kind == "bytes":
            return [f"{'write_compact_bytes' if flex else 'write_bytes'}({out}, {expr})"]
        raise AssertionError(kind)

    def encode_field(self, f: Field, v: int, expr: str, w: str, out: str) -> list[str]:
        """Lines that encode ``expr``; ``w`` is the Writer, ``out`` its current buffer."""
        flex = self.flexible(f, v)
        if f.type == "records":
            if self.msg.kind == "response":
                # Kafka answers an empty record set, never null: librdkafka 2.0.2 fails to
                # parse a null one (MessageSetSize -1).
                expr = f'b"" if {expr} is None else {expr}'
            return [f"{w}.records({expr}, {flex})", f"{out} = {w}.buf"]
        if f.type == "struct":
            fn = self.encoder(f.struct or "", v)
            if v in f.nullable:
                self.fmt_const("b")
                return [
                    f"if {expr} is None: {out}.append(0xff)",
                    "else:",
                    f"    {out}.append(1)",
                    f"    {fn}({expr}, {w})",
                    f"    {out} = {w}.buf",
                ]
            return [f"{fn}({expr}, {w})", f"{out} = {w}.buf"]
        if f.type == "array":
            ln = "write_compact_array_len" if flex else "write_array_len"
            lines = [f"_a = {expr}", f"{ln}({out}, _a)"]
            if f.elem in FIXED and f.elem != "uuid":
                fmt = FIXED[f.elem][0]
                lines.append(f"if _a: {out} += struct.pack('>' + '{fmt}' * len(_a), *_a)")
                return lines
            if f.elem == "struct":
                fn = self.encoder(f.struct or "", v)
                lines += [
                    "if _a:",
                    "    for _x in _a:",
                    f"        {fn}(_x, {w})",
                    f"    {out} = {w}.buf",
                ]
                return lines
            lines += ["if _a:", "    for _x in _a:"]
            lines += ["        " + ln2 for ln2 in self.write_value(f.elem or "", f, v, "_x", out)]
            return lines
        return self.write_value(f.type, f, v, expr, out)

    def encoder(self, struct_name: str, v: int) -> str:
        key = (struct_name, v)
        if key in self.encoders:
            return self.encoders[key]
        s = self.msg.structs[struct_name]
        fields = self.present(s, v)
        normal = [f for f in fields if v not in f.tagged]
        tagged = sorted((f for f in fields if v in f.tagged), key=lambda f: f.tag or 0)
        body = ["out = w.buf"]
        i = 0
        while i < len(normal):
            f = normal[i]
            if f.type in FIXED:
                run = [f]
                while i + len(run) < len(normal) and normal[i + len(run)].type in FIXED:
                    run.append(normal[i + len(run)])
                fmt = "".join(FIXED[r.type][0] for r in run)
                c = self.fmt_const(fmt)
                args = ", ".join(f"o.{r.attr}" for r in run)
                body.append(f"out += {c}.pack({args})")
                i += len(run)
                continue
            body += self.encode_field(f, v, f"o.{f.attr}", "w", "out")
            i += 1
        if self.flexible(None, v):
            if tagged:
                body.append("_tagged = []")
                for f in tagged:
                    default = py_default(f)
                    if default == "field(default_factory=list)":
                        cond = f"o.{f.attr}"
                    elif default == "None":
                        cond = f"o.{f.attr} is not None"
                    elif default.startswith("field("):
                        cond = f"o.{f.attr} is not None and o.{f.attr} != {f.struct}()"
                    else:
                        cond = f"o.{f.attr} != {default}"
                    body.append(f"if {cond}:")
                    body.append("    _tw = Writer()")
                    body += [
                        "    " + ln
                        for ln in self.encode_field(f, v, f"o.{f.attr}", "_tw", "_tw.buf")
                        if not ln.startswith("_tw.buf = ")
                    ]
                    body.append(f"    _tagged.append(({f.tag}, _tw.buf))")
                body.append("write_tagged(out, _tagged)")
            else:
                body.append("out.append(0)")
        if not any("out" in ln for ln in body[1:]):
            body = ["pass"]  # a struct with no fields in this version writes nothing
        code = "\n".join("    " + ln for ln in body)
        name = self._intern(f"_e_{struct_name}", "(o: Any, w: Writer) -> None", code)
        self.encoders[key] = name
        return name

    def _intern(self, prefix: str, sig: str, code: str) -> str:
        """Share one function between versions whose code is identical."""
        key = prefix + "\n" + code
        if key not in self.funcs:
            name = f"{prefix}_{sum(1 for k in self.funcs if k.startswith(prefix + chr(10)))}"
            self.funcs[key] = name
            self.lines.append(f"def {name}{sig}:\n{code}\n")
        return self.funcs[key]


def module_name(msg_name: str) -> str:
    return snake(msg_name)


PRIMITIVES = (
    "ZERO_UUID",
    "ProtocolDecodeError",
    "Writer",
    *(
        f"{op}_{null}{compact}{kind}"
        for op, null in (("read", ""), ("read", "nullable_"), ("write", ""))
        for compact in ("", "compact_")
        for kind in ("string", "bytes")
    ),
    "read_array_len",
    "read_compact_array_len",
    "read_uvarint",
    "write_array_len",
    "write_compact_array_len",
    "write_tagged",
)


def render(msg: Message, source: str) -> str:
    em = Emitter(msg)
    versions = range(msg.valid.low, msg.valid.high + 1)
    dec = {v: em.decoder(msg.name, v) for v in versions}
    enc = {v: em.encoder(msg.name, v) for v in versions}
    classes: list[str] = []
    for name in msg.order:
        s = msg.structs[name]
        classes.append("")
        classes.append("@dataclass(slots=True)")
        classes.append(f"class {name}:")
        if name == msg.name:
            classes.append(f"    API_KEY: ClassVar[int | None] = {msg.api_key}")
            classes.append(f"    MIN_VERSION: ClassVar[int] = {msg.valid.low}")
            classes.append(f"    MAX_VERSION: ClassVar[int] = {msg.valid.high}")
            flex_from = msg.flexible.low if msg.flexible.low <= msg.flexible.high else -1
            classes.append(f"    FLEXIBLE_FROM: ClassVar[int] = {flex_from}  # -1: never")
        seen: set[str] = set()
        for f in s.fields:
            if f.attr in seen:
                continue
            seen.add(f.attr)
            classes.append(f"    {f.attr}: {py_type(f)} = {py_default(f)}")
        if name == msg.name:
            classes += [
                "",
                "    @classmethod",
                f"    def decode(cls, buf: memoryview, version: int, pos: int = 0) -> tuple[{name}, int]:",
                '        """Decode at ``pos``; returns the message and the position after it."""',
                "        try:",
                "            return _DECODERS[version](buf, pos)",
                "        except KeyError:",
                "            raise ProtocolDecodeError(f'unsupported version {version}') from None",
                "        except (struct.error, IndexError, UnicodeDecodeError, OverflowError, TypeError) as e:",
                "            raise ProtocolDecodeError(str(e)) from e",
                "",
                "    def encode(self, version: int) -> list[Any]:",
                '        """Encode as byte chunks, with spilled records objects between them."""',
                "        w = Writer()",
                "        _ENCODERS[version](self, w)",
                "        return w.finish()",
            ]
        if not s.fields and name != msg.name:
            classes.append("    pass")
    code = "\n".join(classes + em.lines)
    used = [p for p in PRIMITIVES if re.search(rf"\b{p}\b", code)]
    out: list[str] = [
        f'"""Generated by moldau.protocol.codegen from Kafka\'s {source}. Do not edit."""',
        "",
        "from __future__ import annotations",
        "",
        "import struct",
        "from dataclasses import dataclass, field",
        "from typing import Any, ClassVar",
        "",
        f"from moldau.protocol.primitives import ({', '.join(sorted(used))})",
        "",
    ]
    for const, fmt in sorted(em.structs_fmt.items()):
        out.append(f"{const} = struct.Struct('>{fmt}')")
    out.append("")
    out += classes
    out.append("")
    out.append("")
    out += em.lines
    out.append(f"_DECODERS = {{{', '.join(f'{v}: {n}' for v, n in dec.items())}}}")
    out.append(f"_ENCODERS = {{{', '.join(f'{v}: {n}' for v, n in enc.items())}}}")
    return "\n".join(out) + "\n"


_LAZY_INDEX = [
    "import importlib",
    "from collections.abc import Iterator, Mapping",
    "from typing import Any",
    "",
    "",
    "class _Index(Mapping[int, Any]):",
    '    """Classes by API key, each module imported when first looked up: a broker uses',
    '    a few dozen of the codecs, and importing them all was most of its start-up."""',
    "",
    "    def __init__(self, where: dict[int, tuple[str, str]]) -> None:",
    "        self._where = where  # API key -> (module, class)",
    "        self._classes: dict[int, Any] = {}",
    "",
    "    def __getitem__(self, api_key: int) -> Any:",
    "        try:",
    "            return self._classes[api_key]",
    "        except KeyError:",
    "            module, name = self._where[api_key]",
    '            cls = getattr(importlib.import_module(f"{__name__}.{module}"), name)',
    "            self._classes[api_key] = cls",
    "            return cls",
    "",
    "    def __iter__(self) -> Iterator[int]:",
    "        return iter(self._where)",
    "",
    "    def __len__(self) -> int:",
    "        return len(self._where)",
]


def render_index(package: str, messages: list[tuple[str, str, Message]]) -> str:
    """The package's ``__init__``: RPCs by API key (imported lazily), metadata and remote
    log metadata records by api key, and coordinator (key, value) classes by record type
    (the key's version)."""
    if package == "messages":
        lines = [
            '"""Generated index of message codecs by API key. Do not edit."""',
            "",
            "from __future__ import annotations",
            "",
            *_LAZY_INDEX,
        ]
        for table, kind in (("REQUESTS", "request"), ("RESPONSES", "response")):
            keyed = sorted(
                (m.api_key or 0, mod, m.name) for _, mod, m in messages if m.kind == kind
            )
            lines += ["", f"{table}: Mapping[int, Any] = _Index(", "    {"]
            lines += [f'        {k}: ("{mod}", "{name}"),' for k, mod, name in keyed]
            lines += ["    }", ")"]
        return "\n".join(lines) + "\n"
    tables: dict[str, list[tuple[int, str]]] = {}
    imported: set[str] = set()
    if package in RECORDS_BY_API_KEY:
        doc = RECORDS_BY_API_KEY[package]
        tables["RECORDS"] = [(m.api_key or 0, m.name) for _, _, m in messages]
        imported = {m.name for _, _, m in messages}
    else:
        doc = "Generated index of coordinator record codecs by record type. Do not edit."
        for folder, _, m in messages:
            if m.name.endswith("Key"):
                value = m.name[: -len("Key")] + "Value"
                types = tables.setdefault(f"{folder.split('-')[0].upper()}_RECORD_TYPES", [])
                types += [(v, f"({m.name}, {value})") for v in range(m.valid.low, m.valid.high + 1)]
                imported |= {m.name, value}
    lines = [
        f'"""{doc}"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any",
        "",
    ]
    lines += [
        f"from moldau.protocol.{package}.{mod} import {m.name}"
        for _, mod, m in messages
        if m.name in imported
    ]
    for table, rows in tables.items():
        lines += ["", f"{table}: dict[int, Any] = {{"]
        lines += [f"    {k}: {n}," for k, n in sorted(rows)]
        lines.append("}")
    return "\n".join(lines) + "\n"


def generate(out_root: Path = PACKAGE_DIR) -> list[str]:
    """Write every target package under ``out_root``; returns the module paths written."""
    written: list[str] = []
    for package, folders in TARGETS.items():
        out_dir = out_root / package
        out_dir.mkdir(parents=True, exist_ok=True)
        for old in out_dir.glob("*.py"):
            old.unlink()
        messages: list[tuple[str, str, Message]] = []
        for folder in folders:
            for path in sorted((SCHEMA_DIR / folder).glob("*.json")):
                msg = Message(load_schema(path))
                mod = module_name(msg.name)
                (out_dir / f"{mod}.py").write_text(render(msg, f"{folder}/{path.name}"))
                messages.append((folder, mod, msg))
                written.append(f"{package}/{mod}.py")
        (out_dir / "__init__.py").write_text(render_index(package, messages))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "ruff",
                "format",
                "--quiet",
                "--isolated",
                "--line-length",
                "100",
                str(out_dir),
            ],
            check=True,
        )
    return written


if __name__ == "__main__":
    mods = generate()
    print(f"generated {len(mods)} modules under {PACKAGE_DIR}")
