"""Broker CPU per GB fetched over SSL against PLAINTEXT, and the floor of TLS in Python.

One broker listens on PLAINTEXT, SSL and SASL_SSL (``benchmarks.security`` starts it).
One topic of ``--mb`` MB of 1 KiB records is produced once over PLAINTEXT, then consumed
in full with confluent-kafka over PLAINTEXT and over SSL, ``--repeat`` times each; the
broker's CPU seconds (from /proc) per GB consumed are reported, best of the rounds (the
machine is shared). PLAINTEXT fetches are sendfile'd; SSL ones must be encrypted in user
space.

The floor: what encrypting the same bytes costs this Python with nothing else around it,
a server ``ssl.SSLObject`` over memory BIOs (what asyncio/uvloop use) writing
``--chunk`` bytes at a time and reading the records out of its BIO. A fetch over TLS
cannot cost the broker less than that plus the plaintext cost.
Results go to benchmarks/results/tls_fetch-*.json.

    python -m benchmarks.tls_fetch [--mb 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import ssl
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.harness import write_result
from benchmarks.produce_consume import make_values
from benchmarks.security import VALUE_BYTES, consume, cpu_seconds, produce, start_broker
from tests.security.certs import Pki

LISTENERS = ("PLAINTEXT", "SSL")


def encryption_floor(pki: Pki, chunk: int, total: int = 1 << 29) -> dict[str, float]:
    """CPU seconds per GB for a server SSLObject to encrypt ``total`` bytes ``chunk`` at a
    time into its outgoing BIO and hand the records out (no sockets, no event loop); the
    best of three passes, as the machine is shared."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(pki.issue("floor", "localhost", server=True).keystore)
    client_ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    bios = [ssl.MemoryBIO() for _ in range(4)]
    server = server_ctx.wrap_bio(bios[0], bios[1], server_side=True)
    client = client_ctx.wrap_bio(bios[2], bios[3], server_hostname="localhost")
    for _ in range(10):  # handshake: shuttle bytes until both sides are done
        for side in (client, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        bios[0].write(bios[3].read())
        bios[2].write(bios[1].read())
    data = memoryview(os.urandom(chunk))
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for _ in range(total // chunk):
            server.write(data)
            bios[1].read()
        best = min(best, time.process_time() - start)
    return {"cipher": server.cipher()[0], "chunk": chunk,
            "cpu_s_per_gb": round(best * 1e9 / total, 3)}  # fmt: skip


def run(args: argparse.Namespace) -> dict:
    records = args.mb * 1_000_000 // VALUE_BYTES
    gb = records * VALUE_BYTES / 1e9
    runs = []
    with tempfile.TemporaryDirectory(prefix="moldau-bench-tls-") as tmp:
        pki = Pki(Path(tmp) / "pki")
        floor = encryption_floor(pki, args.chunk)
        print({"floor": floor}, flush=True)
        process, bootstraps, logins = start_broker(Path(tmp), pki)
        assert process.proc is not None
        pid = process.proc.pid
        try:
            topic = "bench-tls-fetch"
            admin = AdminClient({"bootstrap.servers": bootstraps["PLAINTEXT"]})
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            values = make_values(VALUE_BYTES)
            produce(bootstraps["PLAINTEXT"], {}, topic, values, records)
            for round_ in range(args.repeat):
                for name in LISTENERS:
                    before = cpu_seconds(pid)
                    seconds = consume(bootstraps[name], logins[name], topic, records)
                    cpu = cpu_seconds(pid) - before
                    case = {"listener": name, "round": round_, "mb_s": round(gb * 1000 / seconds, 1),
                            "broker_cpu_s_per_gb": round(cpu / gb, 3),
                            "loadavg_1m": os.getloadavg()[0]}  # fmt: skip
                    runs.append(case)
                    print(case, flush=True)
        finally:
            process.close()
    best = {
        name: min(r["broker_cpu_s_per_gb"] for r in runs if r["listener"] == name)
        for name in LISTENERS
    }
    return {
        "openssl": ssl.OPENSSL_VERSION,
        "floor": floor,
        "best_broker_cpu_s_per_gb": best,
        "ssl_vs_plaintext": round(best["SSL"] / max(best["PLAINTEXT"], 1e-9), 2),
        "floor_vs_plaintext": round(
            (best["PLAINTEXT"] + floor["cpu_s_per_gb"]) / max(best["PLAINTEXT"], 1e-9), 2
        ),
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=200, help="MB of 1 KiB records to fetch")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (the best is reported)")
    parser.add_argument("--chunk", type=int, default=256 * 1024, help="floor: bytes per write")
    parser.add_argument("--label", default="", help="tag for the result file (before/after)")
    args = parser.parse_args()
    results = run(args)
    print({k: v for k, v in results.items() if k != "runs"})
    name = f"tls_fetch-{args.label}" if args.label else "tls_fetch"
    print(f"wrote {write_result(name, args, results)}")


if __name__ == "__main__":
    main()
