"""Draw the top-level packages of src/moldau and their imports, from the code.

Writes docs/packages.svg (one row per layer of scripts/import_graph.py, the top layer on
top; an arrow where a package imports another, left out where a path of arrows already
leads there) and docs/packages.mmd (the same graph in Mermaid). Run after moving code between packages: `python3 scripts/package_graph.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import import_graph  # noqa: E402

DOCS = Path(__file__).resolve().parent.parent / "docs"
BOX_W, BOX_H = 1.5, 0.42


def reduced(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The arrows no longer path implies (the graph is acyclic: the suite checks it)."""

    def reachable(start: str, skip: str) -> set[str]:
        seen, todo = set(), [t for t in edges.get(start, ()) if t != skip]
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
        return seen

    return {s: {t for t in ts if t not in reachable(s, t)} for s, ts in edges.items()}


def short(package: str) -> str:
    return package.removeprefix("moldau.")


def positions(packages: set[str]) -> dict[str, tuple[float, float]]:
    """Each package at (x, y): its layer's row, spread out along it."""
    rows = [[p for p in layer if p in packages] for layer in import_graph.LAYERS]
    rows = [row for row in rows if row]
    placed = {}
    for depth, row in enumerate(rows):
        for i, package in enumerate(row):
            placed[package] = ((i - (len(row) - 1) / 2) * 2.2, -depth)
    return placed


def draw(edges: dict[str, set[str]], path: Path) -> None:
    where = positions(set(edges))
    fig, ax = plt.subplots(figsize=(8, 0.62 * len({y for _, y in where.values()}) + 0.6))
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            if source not in where or target not in where:
                continue
            (x1, y1), (x2, y2) = where[source], where[target]
            bend = 0.0 if y1 - y2 <= 1 else (0.25 if x2 >= x1 else -0.25)
            ax.add_patch(
                FancyArrowPatch(
                    (x1, y1 - BOX_H / 2),
                    (x2, y2 + BOX_H / 2),
                    connectionstyle=f"arc3,rad={bend}",
                    arrowstyle="-|>",
                    mutation_scale=8,
                    linewidth=0.6,
                    color="#5b6b82",
                    alpha=0.55,
                    zorder=1,
                )
            )
    for package, (x, y) in where.items():
        ax.add_patch(
            FancyBboxPatch(
                (x - BOX_W / 2, y - BOX_H / 2),
                BOX_W,
                BOX_H,
                boxstyle="round,pad=0.02,rounding_size=0.08",
                facecolor="#e8eef7",
                edgecolor="#2d4a77",
                linewidth=0.9,
                zorder=2,
            )
        )
        ax.text(
            x, y, short(package), ha="center", va="center", fontsize=8, family="monospace", zorder=3
        )
    xs = [x for x, _ in where.values()]
    ys = [y for _, y in where.values()]
    ax.set_xlim(min(xs) - 1.2, max(xs) + 1.2)
    ax.set_ylim(min(ys) - 0.5, max(ys) + 0.5)
    ax.axis("off")
    ax.set_title(
        "moldau: packages and their imports (arrows point down; those a path implies left out)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(
        path, format=path.suffix[1:], metadata={"Date": None} if path.suffix == ".svg" else None
    )
    plt.close(fig)


def mermaid(edges: dict[str, set[str]]) -> str:
    lines = ["flowchart TD"]
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            lines.append(f"    {short(source)} --> {short(target)}")
    return "\n".join(lines) + "\n"


def main() -> None:
    edges = import_graph.package_edges(import_graph.graph())
    edges = reduced({p: deps for p, deps in edges.items() if p != "moldau.__main__"})
    draw(edges, DOCS / "packages.svg")
    (DOCS / "packages.mmd").write_text(mermaid(edges))


if __name__ == "__main__":
    main()
