"""A follower whose disk fills up: node 3's data lives on a small tmpfs (root; skipped
where it cannot be mounted) that a filler file brings to its last megabyte once the
topic exists. Its appends then fail (ENOSPC): it must drop out of the ISR without losing
or corrupting anything (a torn write must not stay in its log), the leaders must go on
acknowledging on two replicas, and once the filler is removed (node 3 restarted if the
full disk stopped it) it must catch up and rejoin the ISR."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.testing import ClusterProcess
from tests.faults.nemesis import FAST, kill_all, states, timed
from tests.faults.scenario import TOPIC, Scenario
from tests.faults.workload import abort_all

pytestmark = pytest.mark.slow

TMPFS_SIZE = "64m"
LEFT_FREE = 64 << 10


@contextlib.contextmanager
def _tmpfs(path: Path) -> Iterator[None]:
    path.mkdir(parents=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a disk-full follower needs root to mount a small tmpfs")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(path: Path) -> Path:
    """A file taking all but ``LEFT_FREE`` bytes of the file system at ``path``."""
    filler = path / "filler"
    free = shutil.disk_usage(path).free - LEFT_FREE
    with open(filler, "wb") as f:
        chunk = b"\0" * (1 << 20)
        while free > 0:
            free -= f.write(chunk[: min(len(chunk), free)])
    return filler


def test_follower_disk_full(tmp_path: Path) -> None:
    c = ClusterProcess(3, configs=FAST, data_dir=tmp_path / "cluster")
    with _tmpfs(c.layout.nodes[2].data_dir):
        try:
            c.start()
            assignment = [[1, 2, 3], [2, 1, 3]]
            s = Scenario(c, tmp_path / "history", partitions=2, assignment=assignment)
            s.start()
            filler = _fill(c.node(3).data_dir)
            full = time.monotonic()
            s.figures["isr_shrunk_s"] = round(
                timed(
                    lambda: all(3 not in st["isr"] for st in states(c, TOPIC).values()),
                    60,
                    "node 3 out of the ISR",
                ),
                2,
            )
            s.wait_acked_everywhere(30, "on two replicas", since=time.monotonic())
            s.figures["node3_survived_full_disk"] = c.node(3).running
            filler.unlink()
            s.figures["full_s"] = round(time.monotonic() - full, 2)
            if not c.node(3).running:
                c.start_node(3)
            s.finish()
        finally:
            abort_all()
            kill_all(c)
            for node_id, node in c.nodes.items():
                (tmp_path / f"node{node_id}.out").write_text("\n".join(node.output) + "\n")
            c.close()
