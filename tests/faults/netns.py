"""Network partitions between cluster nodes with Linux network namespaces.

Each node runs in a namespace of its own with one veth interface on a bridge in the test's
(root) namespace, at an address the test creates (``10.77.N.i``); the test process and its
clients sit on the bridge too and reach every node. A partition between two nodes is a
pair of blackhole routes, one in each node's namespace: their packets to each other are
dropped silently, as a cut cable or a lossy switch would, while clients still reach both.
Needs root (CAP_NET_ADMIN) and the ``ip`` tool; :func:`unavailable` says why not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from itertools import combinations


def _ip(*args: str, check: bool = True) -> str | None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return None if done.returncode == 0 else done.stderr.strip()


class Topology:
    """``nodes`` namespaces on one bridge; node ``i`` (1-based) at ``address(i)``."""

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        tag = os.getpid() % 10_000
        self.subnet = 10 + os.getpid() % 240
        self.bridge = f"mfbr{tag}"
        self.namespaces = [f"moldau-faults-{tag}-{i}" for i in range(1, nodes + 1)]
        self.host_links = [f"mfv{tag}h{i}" for i in range(1, nodes + 1)]
        self.cuts: set[tuple[int, int]] = set()

    def address(self, node: int) -> str:
        return f"10.77.{self.subnet}.{node}"

    def namespace(self, node: int) -> str:
        return self.namespaces[node - 1]

    def create(self) -> None:
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"10.77.{self.subnet}.254/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i in range(1, self.nodes + 1):
                ns, host = self.namespace(i), self.host_links[i - 1]
                _ip("netns", "add", ns)
                _ip("link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("link", "set", host, "master", self.bridge, "up")
                _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except OSError:
            self.destroy()
            raise

    def destroy(self) -> None:
        for host in self.host_links:
            _ip("link", "del", host, check=False)
        for ns in self.namespaces:
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", self.bridge, check=False)

    # -- faults ------------------------------------------------------------------------------
    def cut(self, a: int, b: int) -> None:
        """Drop every packet between nodes ``a`` and ``b``, both ways."""
        _ip("-n", self.namespace(a), "route", "add", "blackhole", f"{self.address(b)}/32")
        _ip("-n", self.namespace(b), "route", "add", "blackhole", f"{self.address(a)}/32")
        self.cuts.add((a, b))

    def isolate(self, node: int) -> None:
        """Cut ``node`` from every other node (clients still reach all of them)."""
        for other in range(1, self.nodes + 1):
            if other != node:
                self.cut(node, other)

    def heal(self) -> None:
        for a, b in self.cuts:
            _ip("-n", self.namespace(a), "route", "del", "blackhole", f"{self.address(b)}/32")
            _ip("-n", self.namespace(b), "route", "del", "blackhole", f"{self.address(a)}/32")
        self.cuts.clear()

    def pairs(self) -> list[tuple[int, int]]:
        return list(combinations(range(1, self.nodes + 1), 2))


def unavailable() -> str | None:
    """Why network namespaces cannot be used here (None: they can)."""
    if shutil.which("ip") is None:
        return "the ip tool (iproute2) is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CAP_NET_ADMIN)"
    probe = Topology(1)
    probe.namespaces = [f"moldau-faults-probe-{os.getpid()}"]
    probe.bridge = f"mfpr{os.getpid() % 10_000}"
    try:
        probe.create()
    except OSError as e:
        return f"network namespaces are not available: {e}"
    finally:
        probe.destroy()
    return None
