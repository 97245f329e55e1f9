"""`affordance-ros show`: a picture of a model (PNG, SVG or PDF, by the file's extension).

The variables stand in three columns, actions, object features, effects (the paper's
picture), each box with the variable's name, its values and its sensor. Arcs point from
parent to child; an arc between two variables of one column bends around it. When the model
was learned by MCMC (metadata ``learned.arc_probabilities``) every arc is labelled with the
fraction of sampled structures that have it, and arcs that the best structure lacks but
the samples often hold (>= ``min_probability``) are drawn dashed. ``cpts`` adds a heat map of
every CPT below the network (rows: parent configurations, columns: values).
Uses matplotlib's Agg backend: no display needed.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch  # noqa: E402

from ..core import GROUPS, AffordanceNetwork  # noqa: E402

COLUMN_TITLES = {"action": "actions", "object": "object features", "effect": "effects"}
COLORS = {"action": "#f6d8a8", "object": "#b9d7f0", "effect": "#c8e6c0"}
BOX_W, BOX_H = 0.62, 0.5  # in column units


def positions(model: AffordanceNetwork) -> dict:
    """(x, y) of every variable: its group's column, top to bottom in the model's order."""
    rows = max(len(model.group(g)) for g in GROUPS)
    out = {}
    for x, group in enumerate(GROUPS):
        names = model.group(group)
        top = (rows - len(names)) / 2
        for k, name in enumerate(names):
            out[name] = (x * 1.6, -(top + k) * 1.1)
    return out


def arc_probabilities(model: AffordanceNetwork) -> dict:
    """{(parent, child): probability} from the model's MCMC metadata ({} if it has none)."""
    raw = (model.metadata.get("learned") or {}).get("arc_probabilities") or {}
    out = {}
    for key, p in raw.items():
        parent, _, child = key.partition("->")
        if parent in model.names and child in model.names:
            out[(parent, child)] = float(p)
    return out


def draw_network(ax, model: AffordanceNetwork, min_probability: float = 0.3) -> None:
    """The boxes and arcs of ``model`` on ``ax``."""
    where = positions(model)
    boxes = {}
    for v in model.variables:
        x, y = where[v.name]
        values = ", ".join(v.values) if v.values else "(values to fit)"
        detail = values if len(values) <= 34 else values[:31] + "..."
        sensor = f"\nsensor: {v.sensor.name}" if v.sensor is not None else ""
        boxes[v.name] = ax.text(x, y, f"{v.name}\n{detail}{sensor}", ha="center", va="center", fontsize=7.5,
                                zorder=2, bbox={"boxstyle": "round,pad=0.4", "fc": COLORS[v.group], "ec": "#555555"})
    ax.set_xlim(-0.8, 2 * 1.6 + 0.8)  # (before measuring the boxes in data coordinates)
    ax.set_ylim(min(y for _, y in where.values()) - 0.8, 1.3)
    ax.set_axis_off()
    half = box_sizes(ax, boxes)
    probabilities = arc_probabilities(model)
    arcs = [(a, b, True) for a, b in model.arcs if model.structure_known]
    arcs += [(a, b, False) for (a, b), p in probabilities.items() if p >= min_probability and (a, b) not in model.arcs]
    for parent, child, in_model in arcs:
        (x0, y0), (x1, y1) = where[parent], where[child]
        columns = round(abs(x1 - x0) / 1.6)
        # same column: bend around it; over a column: bow, so as to pass between its boxes
        rad = 0.5 if columns == 0 else (0.25 if columns == 2 else 0.06)
        start = border((x0, y0), (x1, y1) if columns else (x0 + 1.0, (y0 + y1) / 2), half[parent])
        end = border((x1, y1), (x0, y0) if columns else (x1 + 1.0, (y0 + y1) / 2), half[child])
        ax.add_patch(FancyArrowPatch(
            start, end, arrowstyle="-|>", mutation_scale=12, connectionstyle=f"arc3,rad={rad}", shrinkA=1, shrinkB=1,
            lw=1.2, color="#333333" if in_model else "#999999", linestyle="-" if in_model else "--", zorder=1))
        if (parent, child) in probabilities:
            t = 0.74 if columns == 2 else 0.5  # between the columns: clear of the boxes
            mx, my = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
            bend = rad * 2 * t * (1 - t)  # where the arc3 curve is at t, roughly
            mx, my = mx + bend * (y1 - y0), my - bend * (x1 - x0)
            ax.text(mx, my, f"{probabilities[(parent, child)]:.2f}", fontsize=7, ha="center", va="center",
                    zorder=3, bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
    for x, group in enumerate(GROUPS):
        ax.text(x * 1.6, 0.9, COLUMN_TITLES[group], ha="center", va="bottom", fontsize=10, fontweight="bold")


def box_sizes(ax, boxes) -> dict:
    """Half the width and height of every variable's box, in data coordinates (after a draw)."""
    ax.figure.canvas.draw()
    to_data = ax.transData.inverted()
    half = {}
    for name, text in boxes.items():
        (x0, y0), (x1, y1) = to_data.transform(text.get_bbox_patch().get_window_extent())
        half[name] = (abs(x1 - x0) / 2, abs(y1 - y0) / 2)
    return half


def border(center, toward, half) -> tuple:
    """Where the line from ``center`` toward ``toward`` leaves a box of half sizes ``half``."""
    dx, dy = toward[0] - center[0], toward[1] - center[1]
    t = min(half[0] / abs(dx) if dx else float("inf"), half[1] / abs(dy) if dy else float("inf"))
    return center[0] + t * dx, center[1] + t * dy


def draw_cpts(fig, grid, model: AffordanceNetwork) -> None:
    """A heat map of every CPT in the cells of ``grid`` (a GridSpec region)."""
    cells = grid.subgridspec((len(model) + 3) // 4, 4, hspace=0.9, wspace=0.5)
    for k, v in enumerate(model.variables):
        ax = fig.add_subplot(cells[k // 4, k % 4])
        table = v.cpt.reshape(-1, v.card)
        image = ax.imshow(table, aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
        ax.set_title(f"p({v.name} | {', '.join(v.parents)})" if v.parents else f"p({v.name})", fontsize=7)
        ax.set_xticks(range(v.card), v.values, fontsize=6, rotation=45, ha="right")
        ax.set_yticks([])
        ax.set_ylabel(f"{table.shape[0]} parent configs" if v.parents else "", fontsize=6)
    fig.colorbar(image, ax=fig.axes[-1], fraction=0.08)


def draw_model(model: AffordanceNetwork, out: str | Path, cpts: bool = False, title: str | None = None,
               min_probability: float = 0.3) -> Path:
    """Draw ``model`` into ``out`` (.png, .svg, .pdf); returns the path written."""
    out = Path(out)
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ValueError(f"'{out}': write a .png, .svg or .pdf file")
    if cpts and not model.parameterised:
        raise ValueError("the model has no CPTs to show (a configuration?): leave out --cpts")
    rows = max(len(model.group(g)) for g in GROUPS)
    height, maps = 1.1 * rows + 1.2, 2.2 * ((len(model) + 3) // 4)
    fig = plt.figure(figsize=(9, height + (maps if cpts else 0)))
    grid = fig.add_gridspec(2 if cpts else 1, 1, height_ratios=[height, maps] if cpts else None)
    draw_network(fig.add_subplot(grid[0]), model, min_probability)
    if cpts:
        draw_cpts(fig, grid[1], model)
    learned = model.metadata.get("learned") or {}
    fig.suptitle(title or (f"learned from {learned['num_cases']} cases ({learned.get('structure', '?')} structure)"
                           if "num_cases" in learned else "affordance network"), fontsize=11)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out
