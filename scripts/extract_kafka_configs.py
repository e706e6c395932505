"""Extract Apache Kafka's broker and topic config facts into src/moldau/config/kafka_configs.json.

Kafka's build renders its config definitions (``KafkaConfig.configDef``, i.e. the merged
``*Configs`` ConfigDefs of server, server-common, storage, group-coordinator, raft ...,
with ``DynamicBrokerConfig``'s update modes; and ``LogConfig``'s topic ConfigDef with each
key's server default property) into ``generated/kafka_config.html`` and
``generated/topic_config.html``, published per release in the apache/kafka-site
repository. Reading that rendering gives exactly what the Java/Scala definitions
evaluate to (constants folded, validators printed) without compiling Kafka.

Only facts are kept: name, type, default, valid values (as printed and parsed into
minimum / maximum / choices), importance, update mode, server default property. No prose.

The replication throttles (``leader.replication.throttled.rate`` ...) are dynamic-only
broker configs: not in KafkaConfig, so not on the page; they are read from
``QuotaConfig.brokerQuotaConfigs()`` in an apache/kafka checkout (``--kafka``).

Usage (refresh after a Kafka release):
    python3 scripts/extract_kafka_configs.py SITE KAFKA [--version 39] [--ref 3.9]
SITE and KAFKA are checkouts or bare git directories of apache/kafka-site and apache/kafka.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/moldau/config/kafka_configs.json"
_ITEM = re.compile(r'<li>\s*<h4><a id="([^"]+)"></a>.*?</h4>(.*?)</li>', re.S)
_FIELD = re.compile(r"<tr><th>([^<]+):</th><td>(.*?)</td></tr>", re.S)
_RANGE = re.compile(r"^\[(?P<lo>-?[0-9.]+)?,\.\.\.(?:,(?P<hi>-?[0-9.]+))?\](?: or (?P<or>-?\d+))?$")
_HUMAN_SUFFIX = re.compile(r"^(-?\d+) \([^)]*\)$")  # "604800000 (7 days)"


_QUOTA_FILE = "server-common/src/main/java/org/apache/kafka/server/config/QuotaConfig.java"
_CONST = re.compile(r"public static final \w+ (\w+) = ([^;]+);")
_DEFINE = re.compile(
    r"\.define\(QuotaConfig\.(\w+),\s*ConfigDef\.Type\.(\w+),\s*QuotaConfig\.(\w+),"
    r"\s*ConfigDef\.Range\.atLeast\((-?\d+)\),\s*ConfigDef\.Importance\.(\w+)"
)
_JAVA_VALUES = {"Long.MAX_VALUE": str(2**63 - 1)}


def read(repo: Path, rel: str, ref: str = "HEAD") -> str:
    if (repo / rel).is_file():
        return (repo / rel).read_text()
    out = subprocess.run(
        ["git", "--git-dir", str(repo), "show", f"{ref}:{rel}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def parse_default(text: str) -> str | None:
    text = html.unescape(text).strip()
    if text == "null":
        return None
    if text == '""':
        return ""
    m = _HUMAN_SUFFIX.match(text)
    return m[1] if m else text


def parse_valid(text: str) -> dict[str, object]:
    """Kafka's printed validators: ranges, choice lists, non-empty/non-null checks."""
    text = html.unescape(text).strip()
    out: dict[str, object] = {"valid_values": text}
    m = _RANGE.match(text)
    if m:
        if m["lo"] is not None:
            out["minimum"] = _number(m["lo"])
        if m["hi"] is not None:
            out["maximum"] = _number(m["hi"])
        if m["or"] is not None:
            out["also"] = [m["or"]]
    elif text.startswith("[") and text.endswith("]") and "..." not in text:
        out["choices"] = [c.strip() for c in text[1:-1].split(",")]
    elif text in ("non-empty list", "non-empty string"):
        out["non_empty"] = True
    elif text == "non-null string":
        out["non_null"] = True
    return out


def parse(page: str, kind: str) -> list[dict[str, object]]:
    rows = []
    for name, body in _ITEM.findall(page):
        f = {k: v.strip() for k, v in _FIELD.findall(body)}
        row: dict[str, object] = {
            "name": name,
            "type": f["Type"],
            "default": parse_default(f["Default"]),
            **parse_valid(f.get("Valid Values", "")),
            "importance": f["Importance"],
        }
        if kind == "broker":
            row["update_mode"] = f["Update Mode"]
        else:
            server = f.get("Server Default Property", "null")
            row["server_default_property"] = None if server == "null" else server
        rows.append(row)
    if not rows:
        raise SystemExit(f"no {kind} configs found: has the page layout changed?")
    return sorted(rows, key=lambda r: str(r["name"]))


# Kafka's internal broker configs (ConfigDef.defineInternal, so not in the rendered docs)
# that Moldau acts upon, as Kafka's KRaftConfigs defines them.
INTERNAL_BROKER_CONFIGS: list[dict[str, object]] = [
    {
        "name": "server.max.startup.time.ms",
        "type": "long",
        "default": "9223372036854775807",
        "valid_values": "[0,...]",
        "minimum": 0,
        "importance": "medium",
        "update_mode": "read-only",
    }
]


def broker_quota_configs(kafka: Path, ref: str) -> list[dict[str, object]]:
    """The dynamic-only replication throttles of ``QuotaConfig.brokerQuotaConfigs()``."""
    source = read(kafka, _QUOTA_FILE, ref)
    consts = {k: v.strip() for k, v in _CONST.findall(source)}
    block = source[source.index("brokerQuotaConfigs()") :]
    rows = []
    for name, type_, default, minimum, importance in _DEFINE.findall(block):
        raw = consts[default]
        rows.append(
            {
                "name": consts[name].strip('"'),
                "type": type_.lower(),
                "default": _JAVA_VALUES.get(raw, raw),
                "valid_values": f"[{minimum},...]",
                "minimum": int(minimum),
                "importance": importance.lower(),
                "update_mode": "cluster-wide",
                "dynamic_only": True,
            }
        )
    if not rows:
        raise SystemExit(f"no broker quota configs found in {_QUOTA_FILE}")
    return rows


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site", type=Path, help="kafka-site checkout or bare git dir")
    ap.add_argument("kafka", type=Path, help="kafka checkout or bare git dir")
    ap.add_argument("--ref", default="HEAD", help="kafka git ref to read QuotaConfig from")
    ap.add_argument("--version", default="39", help="kafka-site docs folder (39 = Kafka 3.9)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    page = f"{args.version}/generated/{{}}"
    broker = parse(read(args.site, page.format("kafka_config.html")), "broker")
    broker += broker_quota_configs(args.kafka, args.ref) + INTERNAL_BROKER_CONFIGS
    data = {
        "kafka_version": f"{args.version[0]}.{args.version[1:]}",
        "source": f"apache/kafka-site {args.version}/generated/{{kafka,topic}}_config.html; "
        f"apache/kafka {_QUOTA_FILE} brokerQuotaConfigs(); server.max.startup.time.ms: "
        "KRaftConfigs (an internal config, not in the rendered docs)",
        "broker": sorted(broker, key=lambda r: str(r["name"])),
        "topic": parse(read(args.site, page.format("topic_config.html")), "topic"),
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{args.out}: {len(data['broker'])} broker, {len(data['topic'])} topic configs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
