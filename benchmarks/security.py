"""Produce and consume throughput over TLS and SASL_SSL against PLAINTEXT.

One broker listens on PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-256), with certificates made
for the run. For each listener: produce N records of 1 KiB (confluent-kafka, tuned as in
``produce_consume``), then consume them back with confluent-kafka and with kcat. Besides
the rates it reports the broker's CPU seconds per GB moved (from /proc), which is what TLS
costs the broker: PLAINTEXT fetches are sendfile'd, TLS ones read and encrypted in user
space in 256 KiB chunks. Results go to benchmarks/results/security-*.json.

    python -m benchmarks.security [--quick] [--records N] [--repeat K]
"""

from __future__ import annotations

import argparse
import os
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from rich.console import Console
from rich.table import Table

from benchmarks.harness import write_result
from benchmarks.produce_consume import CONSUMER_TUNING, POOL, PRODUCER_TUNING, STALL_S, make_values
from moldau.testing import BrokerProcess
from tests.security.certs import Pki  # certificates are made by the run, never committed

VALUE_BYTES = 1024
LISTENERS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_SSL": "SASL_SSL"}
USER, PASSWORD = "bench", "bench-secret"


def start_broker(
    directory: Path, pki: Pki
) -> tuple[BrokerProcess, dict[str, str], dict[str, dict[str, str]]]:
    server = pki.issue("broker", "localhost", server=True)
    process = BrokerProcess(
        directory / "data",
        {
            "listeners": ",".join(f"{n}://127.0.0.1:0" for n in LISTENERS),
            "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in LISTENERS.items()),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(server.keystore),
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        },
    ).start()
    deadline = time.monotonic() + 10
    while True:
        process.settle_output()
        ports = [
            line.rsplit(":", 1)[1] for line in process.output if line.startswith("listening on")
        ]
        if len(ports) == len(LISTENERS) or time.monotonic() > deadline:
            break
    bootstraps = {n: f"127.0.0.1:{p}" for n, p in zip(LISTENERS, ports, strict=True)}
    tls = {"ssl.ca.location": str(pki.ca_file)}
    logins = {
        "PLAINTEXT": {},
        "SSL": {"security.protocol": "SSL", **tls},
        "SASL_SSL": {"security.protocol": "SASL_SSL", **tls, "sasl.mechanisms": "SCRAM-SHA-256",
                     "sasl.username": USER, "sasl.password": PASSWORD},
    }  # fmt: skip

    admin = AdminClient({"bootstrap.servers": bootstraps["PLAINTEXT"]})
    upsert = UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), PASSWORD.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    return process, bootstraps, logins


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(
    bootstrap: str, login: dict[str, str], topic: str, values: list[bytes], records: int
) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **PRODUCER_TUNING, **login})
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, values[i % POOL])
                break
            except BufferError:
                producer.poll(0.001)
    assert producer.flush(120) == 0, "records left unacknowledged"
    return time.perf_counter() - start


def consume(bootstrap: str, login: dict[str, str], topic: str, records: int) -> float:
    """Seconds from the first batch to the last record (librdkafka's start-up excluded)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER_TUNING, **login})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    received, first, start = 0, 0, 0.0
    last = time.perf_counter()
    while received < records and time.perf_counter() - last < STALL_S:
        batch = consumer.consume(num_messages=10_000, timeout=1.0)
        if batch:
            if not received:
                first, start = len(batch), time.perf_counter()
            received += len(batch)
            last = time.perf_counter()
    consumer.close()
    assert received >= records, f"consumed {received} of {records}"
    return (last - start) * records / max(records - first, 1)


def consume_kcat(bootstrap: str, login: dict[str, str], topic: str, records: int) -> float:
    settings = [
        f"-X{k}={v}" for k, v in {**CONSUMER_TUNING, **login}.items() if k != "enable.partition.eof"
    ]
    command = [
        "kcat",
        "-C",
        "-q",
        "-e",
        "-o",
        "beginning",
        "-c",
        str(records),
        "-b",
        bootstrap,
        "-t",
        topic,
    ]
    start = time.perf_counter()
    done = subprocess.run(
        [*command, *settings], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600
    )
    if done.returncode:
        raise RuntimeError(done.stderr.decode()[-2000:])
    return time.perf_counter() - start


def measure(process: BrokerProcess, step: Callable[[], float]) -> tuple[float, float]:
    """What ``step`` reports (its seconds) and the broker's CPU seconds meanwhile."""
    assert process.proc is not None
    before = cpu_seconds(process.proc.pid)
    seconds = step()
    return seconds, cpu_seconds(process.proc.pid) - before


def measure_listener(
    process: BrokerProcess,
    bootstrap: str,
    login: dict[str, str],
    topic: str,
    values: list[bytes],
    records: int,
) -> dict[str, float]:
    mb = records * VALUE_BYTES / 1e6
    p_s, p_cpu = measure(process, lambda: produce(bootstrap, login, topic, values, records))
    c_s, c_cpu = measure(process, lambda: consume(bootstrap, login, topic, records))
    case = {"produce_mb_s": round(mb / p_s, 1), "produce_broker_cpu_s_per_gb": round(p_cpu / mb * 1000, 1),
            "consume_mb_s": round(mb / c_s, 1), "consume_broker_cpu_s_per_gb": round(c_cpu / mb * 1000, 1)}  # fmt: skip
    if shutil.which("kcat"):
        k_s, k_cpu = measure(process, lambda: consume_kcat(bootstrap, login, topic, records))
        case |= {"kcat_consume_mb_s": round(mb / k_s, 1),
                 "kcat_consume_broker_cpu_s_per_gb": round(k_cpu / mb * 1000, 1)}  # fmt: skip
    return case


def run(args: argparse.Namespace) -> list[dict]:
    values = make_values(VALUE_BYTES)
    results = []
    with tempfile.TemporaryDirectory(prefix="moldau-bench-security-") as tmp:
        process, bootstraps, logins = start_broker(Path(tmp), Pki(Path(tmp) / "pki"))
        try:
            admin = AdminClient({"bootstrap.servers": bootstraps["PLAINTEXT"]})
            for round_ in range(args.repeat):
                for name in LISTENERS:
                    topic = f"bench-{name.lower()}-{round_}"
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    rates = measure_listener(
                        process, bootstraps[name], logins[name], topic, values, args.records
                    )
                    case = {"listener": name, "round": round_, "records": args.records, **rates}
                    results.append(case)
                    print(case, flush=True)
        finally:
            process.close()
    return results


def summary(results: list[dict]) -> list[dict]:
    """Per listener: the best of the rounds (the machine is shared), and its cost relative
    to PLAINTEXT."""
    best: dict[str, dict] = {}
    for r in results:
        b = best.setdefault(r["listener"], dict(r))
        for k, v in r.items():
            if k.endswith("_mb_s"):
                b[k] = max(b[k], v)
            elif k.endswith("_per_gb"):
                b[k] = min(b[k], v)
    base = best["PLAINTEXT"]
    for b in best.values():
        for k in [k for k in b if k.endswith("_mb_s")]:
            b[k.replace("_mb_s", "_vs_plaintext")] = round(b[k] / base[k], 2)
    return list(best.values())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=300_000, help="1 KiB records per listener")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (the best is summarized)")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    args = parser.parse_args()
    if args.quick:
        args.records, args.repeat = 20_000, 1
    results = run(args)
    best = summary(results)
    table = Table("listener", "produce MB/s", "consume MB/s", "kcat consume MB/s",
                  "broker CPU s/GB (produce, consume, kcat)")  # fmt: skip
    for b in best:
        table.add_row(
            b["listener"],
            f"{b['produce_mb_s']} ({b['produce_vs_plaintext']}x)",
            f"{b['consume_mb_s']} ({b['consume_vs_plaintext']}x)",
            f"{b.get('kcat_consume_mb_s', '-')} ({b.get('kcat_consume_vs_plaintext', '-')}x)",
            f"{b['produce_broker_cpu_s_per_gb']}, {b['consume_broker_cpu_s_per_gb']}, "
            f"{b.get('kcat_consume_broker_cpu_s_per_gb', '-')}",
        )
    Console().print(table)
    environment = {"openssl": ssl.OPENSSL_VERSION, "ktls": ktls_report()}
    path = write_result(
        "security", args, {"environment": environment, "summary": best, "runs": results}
    )
    print(f"wrote {path}")


def ktls_report() -> str:
    """Whether kernel TLS could carry TLS fetches (it cannot here: see docs/internals.md)."""
    ulp = Path("/proc/sys/net/ipv4/tcp_available_ulp")
    kernel = ulp.read_text().strip() if ulp.exists() else "unknown"
    return (
        f"kernel ULPs: {kernel!r}; Python {ssl.OPENSSL_VERSION} ssl module exposes OP_ENABLE_KTLS: "
        f"{hasattr(ssl, 'OP_ENABLE_KTLS')}; asyncio/uvloop TLS runs OpenSSL over memory BIOs, "
        "so the socket never sees kTLS and sendfile cannot be used"
    )


if __name__ == "__main__":
    main()
