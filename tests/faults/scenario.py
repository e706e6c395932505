"""One fault test's run: workload on, fault, heal, drain, check.

The test injects its fault between :meth:`Scenario.start` and :meth:`Scenario.finish`;
``finish`` waits until every replica is back in sync and every producer is acknowledged
again on every partition (no client stuck), stops the producers (flushing what they still
hold), reads every partition in full, waits until the group's consumers have seen it all,
stops the cluster cleanly and runs the checker over the whole history. Figures (failover
times, records checked) go to ``figures`` and into the test's output.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from moldau.testing import ClusterProcess
from tests.faults import nemesis
from tests.faults.checker import Report, check
from tests.faults.workload import Workload, read_final

TOPIC = "faults"
PARTITIONS = 4
WARMUP_S = 3.0


class Scenario:
    def __init__(
        self,
        c: ClusterProcess,
        out_dir: Path,
        *,
        partitions: int = PARTITIONS,
        rate: float = 100.0,
        topic_configs: dict[str, str] | None = None,
        assignment: list[list[int]] | None = None,
    ) -> None:
        self.c = c
        self.out_dir = out_dir
        self.topic = TOPIC
        self.partitions = partitions
        self.topic_configs = topic_configs or {}
        self.assignment = assignment
        self.workload = Workload(c.bootstrap_servers, self.topic, partitions, rate=rate)
        self.figures: dict[str, Any] = {}
        self.t0 = 0.0

    @property
    def history(self) -> Any:
        return self.workload.history

    def start(self) -> None:
        nemesis.create_topic(
            self.c, self.topic, self.partitions, self.topic_configs, self.assignment
        )
        nemesis.wait_full_isr(self.c, self.topic)
        self.t0 = time.monotonic()
        self.workload.start()
        self.wait_acked_everywhere(60.0, "the workload started")
        time.sleep(WARMUP_S)

    # -- observations --------------------------------------------------------------------
    def wait_acked_everywhere(
        self,
        timeout: float,
        what: str,
        partitions: set[int] | None = None,
        since: float | None = None,
    ) -> float:
        """Seconds from ``since`` (default now) until every partition (or the given ones)
        has an acknowledgement of a record sent at that moment or later."""
        since = time.monotonic() if since is None else since
        wanted = set(range(self.partitions)) if partitions is None else partitions
        recorder = self.workload.recorder

        def acked() -> bool:
            return {a.partition for a in recorder.acks_of_sent_since(since)} >= wanted

        nemesis.timed(acked, timeout, f"acks on partitions {sorted(wanted)} ({what})")
        return (
            max(min(a.time for a in recorder.acks_of_sent_since(since, {p})) for p in wanted)
            - since
        )

    def longest_ack_gap(self, t1: float, t2: float) -> float:
        """The longest time without any acknowledgement between ``t1`` and ``t2``."""
        times = sorted(a.time for a in self.workload.recorder.acks_since(t1) if a.time < t2)
        edges = [t1, *times, t2]
        return max(b - a for a, b in zip(edges, edges[1:], strict=False))

    def acks_between(self, t1: float, t2: float) -> int:
        return sum(1 for a in self.workload.recorder.acks_since(t1) if a.time < t2)

    # -- the end ---------------------------------------------------------------------------
    def finish(
        self,
        *,
        settle_timeout: float = 90.0,
        tolerate: frozenset[str] = frozenset(),
        producers_may_die: bool = False,
    ) -> Report:
        """Heal is done: converge, drain, check. Returns the report, asserted valid but for
        the anomalies named in ``tolerate`` (an unclean election loses data by design, and
        an idempotent producer that sees the gap fails fatally: ``producers_may_die``)."""
        self.figures["isr_restored_s"] = round(
            nemesis.wait_full_isr(self.c, self.topic, settle_timeout), 2
        )
        if not producers_may_die:
            self.figures["progress_after_heal_s"] = round(
                self.wait_acked_everywhere(settle_timeout, "after the heal"), 2
            )
        self.workload.stop_producers()
        fatal = [p.fatal for p in self.workload.producers if p.fatal]
        undelivered = sum(max(p.flushed_left, 0) for p in self.workload.producers)
        final, hws = read_final(self.c.bootstrap_servers, self.topic, self.partitions)
        history = self.workload.history
        history.final, history.final_high_watermarks = final, hws
        consumed = self.workload.wait_consumed(hws, 60.0)
        self.workload.stop_consumers()
        nemesis.wait_full_isr(self.c, self.topic, settle_timeout)
        nemesis.kill_all(self.c)
        history.replica_logs = nemesis.replica_logs(self.c, self.topic, self.partitions)
        report = check(history)
        self.figures.update(
            records_sent=len(history.sent),
            records_acked=report.acked,
            acks_without_offset=sum(1 for a in history.acks if a.offset is None),
            records_failed=report.failed,
            records_in_log=report.final_records,
            records_polled=report.polled,
            failures_by_error=_count(f.error for f in history.failures),
            anomalies={n: len(getattr(report, n)) for n in report.ANOMALIES if getattr(report, n)},
        )
        self._save(report)
        print(f"\nfigures: {json.dumps(self.figures)}")
        problems = []
        if fatal:
            self.figures["fatal_producer_errors"] = fatal
            if not producers_may_die:
                problems.append(f"producers failed fatally: {fatal}")
        if undelivered:
            problems.append(
                f"{undelivered} record(s) neither acknowledged nor failed (stuck producer)"
            )
        if not consumed:
            problems.append(
                "the consumers did not reach the end of every partition (stuck consumer); "
                f"their last errors: {self.workload.recorder.errors[-5:]}"
            )
        found = [name for name in report.ANOMALIES if getattr(report, name)]
        problems += [f"{name} is not tolerated here" for name in found if name not in tolerate]
        assert not problems, "\n".join([report.summary(), *problems])
        return report

    def _save(self, report: Report) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        history = self.workload.history
        (self.out_dir / "history.json").write_text(
            json.dumps(
                {
                    "sent": history.sent,
                    "acks": [asdict(a) for a in history.acks],
                    "failures": [asdict(f) for f in history.failures],
                    "polls": [asdict(p) for p in history.polls],
                    "final": history.final,
                    "figures": self.figures,
                }
            )
        )
        (self.out_dir / "report.txt").write_text(report.summary(examples=50) + "\n")


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out
