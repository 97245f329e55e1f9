"""`affordance-ros show`: a picture of a model (PNG, SVG or PDF, by the file's extension).

The variables stand in three columns, actions, object features, effects (the paper's picture),
each box with the variable's name, its values and its sensor. Boxes are measured before they
are placed, so that none touches another. Arcs point from parent to child and are routed
around the boxes: out of the parent's side, along a lane of their own in the gap between two
columns, across a column only through the channel between two of its boxes (or above or below
them), and into the child's side; an arc within one column loops through the gap beside it.
When the model averages over a sample of structures (structure 'average'), or was learned by
MCMC (metadata ``learned.arc_probabilities``), every arc is labelled with its posterior
probability (the weight of the structures that have it), each label placed where it
overlaps no box and no other label; arcs that the most probable structure lacks but the sample
often holds (>= ``min_probability``) are drawn dashed. ``cpts`` adds a heat map of every CPT below the
network: a row per parent configuration, labelled with the parents' values (every k-th row of
a long table), a column per value. Uses matplotlib's Agg backend: no display needed.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402
from matplotlib.path import Path as CurvePath  # noqa: E402

from ..core import GROUPS, AffordanceNetwork  # noqa: E402

COLUMN_TITLES = {"action": "actions", "object": "object features", "effect": "effects"}
COLORS = {"action": "#f6d8a8", "object": "#b9d7f0", "effect": "#c8e6c0"}
# Sizes in inches (the network is laid out in inches: one data unit of its axes is one inch).
FONT, LABEL_FONT = 7.5, 6.5
BOX_PAD = 0.07          # between a box's text and its border
BOX_GAP = 0.45          # least space between two boxes of a column (a channel arcs may cross)
COLUMN_GAP = 1.1        # least space between two columns (the lanes of the arcs)
LANE = 0.09             # between two arcs side by side in a gap or a channel
STUB = 0.12             # straight run of an arc out of and into a box's side
CORNER = 0.1            # radius of an arc's rounded corners
MARGIN = 0.35
DPI = 110               # of a PNG
TITLE_SPACE = 0.9       # above the boxes: the figure's title and the column titles
DETAIL_CHARACTERS = 34  # of a box's line of values or sensor names
# The CPT heat maps
ROW_HEIGHT, MIN_MAP_HEIGHT, MAX_MAP_HEIGHT = 0.13, 0.8, 6.0
MAP_WIDTH, MAP_COLUMNS, MAP_TITLE, CELL_GAP = 2.0, 3, 0.35, 0.4  # a map, maps side by side, room for title, between
MAX_LABEL_WIDTH = 2.2                                           # of the row labels left of a map
TICK_FONT, TICK_SPACE = 5.5, 0.1                                # tick labels, and the least room one needs
PICTURE_SUFFIXES = (".png", ".svg", ".pdf")


@dataclass
class Arc:
    """One arc: its ``points`` (a polyline with rounded corners), whether the model has it (else: sampled
    by MCMC only, dashed), its MCMC probability (None: unknown) and where that label sits (x0, y0, x1, y1)."""

    parent: str
    child: str
    in_model: bool
    probability: float | None
    points: np.ndarray
    label: tuple | None = None


@dataclass
class Layout:
    """Where everything of the network goes, in inches: the ``boxes`` (x0, y0, x1, y1) and their text, the
    ``arcs``, the column titles, and the size of the whole."""

    width: float
    height: float
    boxes: dict = field(default_factory=dict)
    texts: dict = field(default_factory=dict)
    arcs: list = field(default_factory=list)
    titles: list = field(default_factory=list)


def box_text(v) -> str:
    """A variable's box: its name, its values (or how many) and its sensor's reading names, each line short."""
    if not v.values:
        values = "(values to fit)"
    else:
        values = ", ".join(v.values)
        if len(values) > DETAIL_CHARACTERS:
            values = f"{len(v.values)} values: " + values
            values = values[:DETAIL_CHARACTERS - 3] + "..."
    lines = [v.name, values]
    if v.sensor is not None:
        lines += textwrap.wrap("sensor: " + ", ".join(v.sensor.names), DETAIL_CHARACTERS)
    return "\n".join(lines)


def measure(texts: dict, fontsize: float) -> dict:
    """The size (width, height) in inches of every text of ``texts`` in a box: measured at a high resolution
    (close to the true size of SVG and PDF text), with a little room for the hinted widths of a PNG."""
    fig = plt.figure(dpi=200)
    renderer = fig.canvas.get_renderer()
    sizes = {}
    for key, text in texts.items():
        extent = fig.text(0, 0, text, fontsize=fontsize, ha="center", va="center").get_window_extent(renderer)
        sizes[key] = (1.04 * extent.width / fig.dpi + 2 * BOX_PAD, extent.height / fig.dpi + 2 * BOX_PAD)
    plt.close(fig)
    return sizes


def arc_probabilities(model: AffordanceNetwork) -> dict:
    """{(parent, child): probability}: of the model's sample of structures, else from its MCMC metadata ({} if it
    has neither).
    """
    if model.structures:
        return model.arc_probabilities()
    raw = (model.metadata.get("learned") or {}).get("arc_probabilities") or {}
    out = {}
    for key, p in raw.items():
        parent, _, child = key.partition("->")
        if parent in model.names and child in model.names:
            out[(parent, child)] = float(p)
    return out


def layout(model: AffordanceNetwork, min_probability: float = 0.3) -> Layout:
    """Boxes in columns, arcs routed around them, labels apart."""
    texts = {v.name: box_text(v) for v in model.variables}
    sizes = measure(texts, FONT)
    columns = [list(model.group(g)) for g in GROUPS]
    probabilities = arc_probabilities(model)
    arcs = [(a, b, True) for a, b in model.arcs] if model.structure_known else []
    arcs += [(a, b, False) for (a, b), p in probabilities.items() if p >= min_probability and (a, b) not in model.arcs]
    column_of = {name: k for k, names in enumerate(columns) for name in names}
    # Gap k is right of column k; how many arcs run through each (a lane each).
    lanes_in_gap = {k: 0 for k in range(len(columns))}
    for parent, child, _ in arcs:
        for gap in _gaps(column_of[parent], column_of[child]):
            lanes_in_gap[gap] += 1
    gap_width = {k: max(COLUMN_GAP, 2 * STUB + (n + 1) * LANE) for k, n in lanes_in_gap.items()}
    # above and below the columns: a channel with a lane for every arc that crosses a column
    crossing = sum(max(0, abs(column_of[a] - column_of[b]) - 1) for a, b, _ in arcs)
    channel = max(BOX_GAP, (crossing + 2) * LANE)
    widths = [max((sizes[n][0] for n in names), default=1.0) for names in columns]
    stack = [sum(sizes[n][1] for n in names) + BOX_GAP * (len(names) - 1) for names in columns]
    height = MARGIN + channel + max(stack) + channel + TITLE_SPACE
    middle = MARGIN + channel + max(stack) / 2
    out = Layout(0.0, height, texts=texts)
    x = MARGIN
    right = []
    for k, names in enumerate(columns):
        right.append(x + widths[k])
        top = middle + stack[k] / 2
        for name in names:
            w, h = sizes[name]
            center = x + widths[k] / 2
            out.boxes[name] = (center - w / 2, top - h, center + w / 2, top)
            top -= h + BOX_GAP
        out.titles.append((x + widths[k] / 2, height - TITLE_SPACE + 0.2, COLUMN_TITLES[GROUPS[k]]))
        x += widths[k] + gap_width[k]
    out.width = (x if lanes_in_gap[len(columns) - 1] else right[-1]) + MARGIN  # (arcs within the last column)
    gap_middles = [right[k] + gap_width[k] / 2 for k in range(len(columns))]
    router = _Router(out.boxes, columns, gap_middles, channel, _ports(out.boxes, arcs, column_of))
    for parent, child, in_model in arcs:
        out.arcs.append(Arc(parent, child, in_model, probabilities.get((parent, child)),
                            router.route(parent, child)))
    _place_labels(out)
    return out


def _gaps(a: int, b: int) -> list:
    """The gaps an arc from column ``a`` to column ``b`` runs through (an arc within a column: the one right of
    it)."""
    if a == b:
        return [a]
    if a < b:
        return list(range(a, b))
    return list(range(b, a))[::-1]


def _ports(boxes: dict, arcs: list, column_of: dict) -> dict:
    """{(parent, child, end): y}: where every arc leaves its parent's side (end 0) and enters its child's (end 1),
    spread evenly over the middle of the side, the arc to the highest other end at the top."""
    sides = {}
    for parent, child, _ in arcs:
        a, b = column_of[parent], column_of[child]
        sides.setdefault((parent, "left" if b < a else "right"), []).append((parent, child, 0, child))
        sides.setdefault((child, "right" if b <= a else "left"), []).append((parent, child, 1, parent))
    out = {}
    for (name, _), ends in sides.items():
        x0, y0, x1, y1 = boxes[name]
        step = min(LANE, (y1 - y0) * 0.8 / len(ends))
        ends.sort(key=lambda end: -(boxes[end[3]][1] + boxes[end[3]][3]))
        for i, (parent, child, end, _) in enumerate(ends):
            out[(parent, child, end)] = (y0 + y1) / 2 + ((len(ends) - 1) / 2 - i) * step
    return out


class _Router:
    """Routes arcs: ports spread along the boxes' sides, a lane of its own for every arc in every gap and
    channel, so that no two arcs run on top of each other and none crosses a box. ``boxes`` in ``columns`` (the
    variables' names of each), ``gap_middles``: the x of the middle of the gap right of each column; ``channel``:
    the height of the channels above and below the columns; ``ports``: where each arc leaves and enters a box."""

    def __init__(self, boxes, columns, gap_middles, channel, ports):
        self.boxes = boxes
        self.columns = columns
        self.column_of = {name: k for k, names in enumerate(columns) for name in names}
        self.gap_middles = gap_middles
        self.channel = channel
        self.ports = ports
        self._next_lane = {}
        self._taken = {}

    def route(self, parent: str, child: str) -> np.ndarray:
        a, b = self.column_of[parent], self.column_of[child]
        out_side = "left" if b < a else "right"
        in_side = "right" if b <= a else "left"
        start = (self.boxes[parent][2 if out_side == "right" else 0], self.ports[(parent, child, 0)])
        end = (self.boxes[child][2 if in_side == "right" else 0], self.ports[(parent, child, 1)])
        step = 1 if out_side == "right" else -1
        points = [start, (start[0] + step * STUB, start[1])]
        y = start[1]
        if a == b:
            x = self._lane_x(a)
            points += [(x, y), (x, end[1])]
        else:
            for gap, crossed in zip(_gaps(a, b), self._crossed(a, b) + [None]):
                x = self._lane_x(gap)
                if crossed is None:
                    points += [(x, y), (x, end[1])]
                else:
                    y_channel = self._channel_y(crossed, y, end[1])
                    points += [(x, y), (x, y_channel)]
                    y = y_channel
        points += [(end[0] - (step if a != b else -step) * STUB, end[1]), end]
        return _rounded(np.array(points, dtype=float))

    def _crossed(self, a: int, b: int) -> list:
        return list(range(a + 1, b)) if a < b else list(range(a - 1, b, -1))

    def _lane_x(self, gap: int) -> float:
        """The x of the next free lane in ``gap`` (right of column ``gap``), from its middle outwards."""
        return self.gap_middles[gap] + _outwards(self._take(("gap", gap))) * LANE

    def _channel_y(self, column: int, y_from: float, y_to: float) -> float:
        """The y of a free lane through ``column``: in the channel with room left (between two of its boxes, or
        above or below them) nearest the way from ``y_from`` to ``y_to``; of its free lanes the one nearest its
        middle that no arc leaves or enters a box at (so that no two arcs run side by side into a gap)."""
        spans = sorted((self.boxes[n][1], self.boxes[n][3]) for n in self.columns[column])
        if not spans:  # (a group without variables: nothing to go around)
            return y_to
        channels = [(spans[-1][1], spans[-1][1] + self.channel), (spans[0][0] - self.channel, spans[0][0])]
        channels += [(low[1], high[0]) for low, high in zip(spans, spans[1:])]
        free = {c: [y for y in self._lanes_across(c) if all(abs(y - taken) >= LANE * 0.99 for taken
                                                               in self._taken.get((column, c), ()))]
                for c in channels}
        best = min((c for c in channels if free[c]),
                   key=lambda c: abs(sum(c) / 2 - y_from) + abs(sum(c) / 2 - y_to))
        y = max(free[best], key=lambda y: min([abs(y - port) for port in self.ports.values()] + [LANE]))
        self._taken.setdefault((column, best), []).append(y)
        return y

    @staticmethod
    def _lanes_across(channel) -> list:
        """Where lanes may run through a channel: half a lane apart from its middle outwards, a lane from its
        sides."""
        middle, half = sum(channel) / 2, (channel[1] - channel[0]) / 2 - LANE
        return [middle + _outwards(n) * LANE / 2 for n in range(2 * max(0, int(2 * half / LANE)) + 1)
                if abs(_outwards(n) * LANE / 2) <= half]

    def _take(self, key) -> int:
        n = self._next_lane.get(key, 0)
        self._next_lane[key] = n + 1
        return n


def _outwards(n: int) -> int:
    """0, 1, -1, 2, -2, ...: the n-th lane, from the middle outwards."""
    return (n + 1) // 2 * (1 if n % 2 else -1)


def _rounded(points: np.ndarray, samples: int = 8) -> np.ndarray:
    """The polyline ``points`` with every corner rounded (a quadratic curve of radius CORNER), sampled."""
    keep = [points[0]]
    for p in points[1:]:  # (drop repeated points: zero-length segments have no direction)
        if np.hypot(*(p - keep[-1])) > 1e-9:
            keep.append(p)
    points = np.array(keep)
    out = [points[0]]
    for before, corner, after in zip(points, points[1:], points[2:]):
        into, out_of = corner - before, after - corner
        r = min(CORNER, np.hypot(*into) / 2, np.hypot(*out_of) / 2)
        p0 = corner - into / np.hypot(*into) * r
        p2 = corner + out_of / np.hypot(*out_of) * r
        t = np.linspace(0.0, 1.0, samples)[:, None]
        out.extend((1 - t) ** 2 * p0 + 2 * (1 - t) * t * corner + t ** 2 * p2)
    out.append(points[-1])
    return np.array(out)


def _place_labels(out: Layout) -> None:
    """Put every arc's probability label on the arc where it overlaps no box, no label placed before and
    no other arc (the first such point from the middle of the arc outwards; failing that, one that overlaps
    no box and no label; failing that, the middle)."""
    size = measure({"p": "0.00"}, LABEL_FONT)["p"]
    placed = list(out.boxes.values())
    for arc in out.arcs:
        if arc.probability is None:
            continue
        along = _evenly(arc.points, 0.05)
        n = len(along)
        middle_first = sorted(range(n), key=lambda i: (not n // 6 <= i < n - n // 6, abs(i - n / 2)))
        candidates = [_around(along[i], size) for i in middle_first]
        others = [other.points for other in out.arcs if other is not arc]
        free = [c for c in candidates if not any(_overlap(c, p) for p in placed)]
        arc.label = next((c for c in free if not any(crosses(c, points) for points in others)),
                         free[0] if free else _around(along[n // 2], size))
        placed.append(arc.label)


def _evenly(points: np.ndarray, spacing: float) -> np.ndarray:
    """Points along the polyline ``points``, ``spacing`` inches apart."""
    lengths = np.hypot(*np.diff(points, axis=0).T)
    at = np.concatenate([[0.0], np.cumsum(lengths)])
    steps = np.arange(0.0, at[-1], spacing)
    return np.column_stack([np.interp(steps, at, points[:, 0]), np.interp(steps, at, points[:, 1])])


def crosses(rect, points: np.ndarray) -> bool:
    """Whether the polyline ``points`` passes through the rectangle ``rect`` (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = rect
    for (ax, ay), (bx, by) in zip(points, points[1:]):
        # clip the segment to the rectangle (Liang-Barsky): it crosses if something is left
        low, high = 0.0, 1.0
        for p, q in ((-(bx - ax), ax - x0), (bx - ax, x1 - ax), (-(by - ay), ay - y0), (by - ay, y1 - ay)):
            if p == 0:
                if q < 0:
                    break
            elif p < 0:
                low = max(low, q / p)
            else:
                high = min(high, q / p)
        else:
            if low < high:
                return True
    return False


def _around(center, size) -> tuple:
    return (center[0] - size[0] / 2, center[1] - size[1] / 2, center[0] + size[0] / 2, center[1] + size[1] / 2)


def _overlap(a, b, gap: float = 0.02) -> bool:
    """Whether rectangles ``a`` and ``b`` (x0, y0, x1, y1) come closer than ``gap``."""
    return a[0] < b[2] + gap and b[0] < a[2] + gap and a[1] < b[3] + gap and b[1] < a[3] + gap


def draw_network(ax, model: AffordanceNetwork, where: Layout) -> None:
    """The boxes, arcs and labels of ``where`` (``layout(model)``) on ``ax``, whose data units are inches."""
    for v in model.variables:
        x0, y0, x1, y1 = where.boxes[v.name]
        ax.add_patch(FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0,rounding_size=0.06",
                                    fc=COLORS[v.group], ec="#555555", lw=0.8, zorder=2))
        ax.text((x0 + x1) / 2, (y0 + y1) / 2, where.texts[v.name], ha="center", va="center", fontsize=FONT, zorder=3)
    for arc in where.arcs:
        ax.add_patch(FancyArrowPatch(path=CurvePath(arc.points), arrowstyle="-|>", mutation_scale=10, lw=1.1,
                                     color="#333333" if arc.in_model else "#999999",
                                     linestyle="-" if arc.in_model else "--", zorder=1))
        if arc.label is not None:
            x0, y0, x1, y1 = arc.label
            ax.text((x0 + x1) / 2, (y0 + y1) / 2, f"{arc.probability:.2f}", fontsize=LABEL_FONT, ha="center",
                    va="center", zorder=4, bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"})
    for x, y, title in where.titles:
        ax.text(x, y, title, ha="center", va="bottom", fontsize=10, fontweight="bold")
    ax.set_xlim(0, where.width)
    ax.set_ylim(0, where.height)
    ax.set_axis_off()


def parent_configurations(model: AffordanceNetwork, v) -> list:
    """The label of every row of ``v``'s CPT table: its parents' values, in the table's (C) order (none without
    parents: the table is one row)."""
    if not v.parents:
        return []
    values = [model[p].values for p in v.parents]
    codes = np.indices([len(vals) for vals in values]).reshape(len(values), -1).T
    return [", ".join(values[j][c] for j, c in enumerate(row)) for row in codes]


@dataclass
class HeatMap:
    """One CPT's heat map: its size in inches, the labels of its rows (parent configurations) and columns
    (values), which of them are shown (every k-th when they would touch), and the room its value labels need."""

    variable: str
    table: np.ndarray
    title: str
    rows: list
    columns: list
    shown_rows: list
    shown_columns: list
    height: float
    below: float
    rotation: int


def heat_maps(model: AffordanceNetwork) -> list:
    maps = []
    for v in model.variables:
        table = v.cpt.reshape(-1, v.card)
        rows = parent_configurations(model, v)
        height = min(MAX_MAP_HEIGHT, max(MIN_MAP_HEIGHT, ROW_HEIGHT * len(table)))
        rotation = 90 if v.card > 6 else 45
        longest = max(measure({"x": x}, TICK_FONT)["x"][0] for x in v.values) - 2 * BOX_PAD
        maps.append(HeatMap(v.name, table, f"p({v.name} | {', '.join(v.parents)})" if v.parents else f"p({v.name})",
                            rows, list(v.values), _every(len(rows), height), _every(v.card, MAP_WIDTH), height,
                            0.2 + longest * (1.0 if rotation == 90 else 0.72), rotation))
    return maps


def _every(n: int, length: float) -> list:
    """Which of ``n`` ticks along ``length`` inches to label: all, or every k-th so that labels do not touch."""
    return list(range(0, n, max(1, math.ceil(n * TICK_SPACE / length))))


def _label_width(maps: list) -> float:
    """Room left of a heat map for its row labels (and the axis label naming the parents)."""
    widest = max([measure({"y": m.rows[i]}, TICK_FONT)["y"][0] for m in maps for i in m.shown_rows] or [0.0])
    return min(MAX_LABEL_WIDTH, widest + 0.3)


def _map_rows(maps: list) -> list:
    return [maps[s:s + MAP_COLUMNS] for s in range(0, len(maps), MAP_COLUMNS)]


def cpts_size(maps: list) -> tuple:
    """Width and height in inches of the heat maps, MAP_COLUMNS side by side."""
    cell = _label_width(maps) + MAP_WIDTH + CELL_GAP
    height = sum(MAP_TITLE + max(m.height for m in row) + max(m.below for m in row) for row in _map_rows(maps))
    return MARGIN + MAP_COLUMNS * cell + 0.6, height


def draw_cpts(fig, maps: list, top: float) -> None:
    """The heat maps, MAP_COLUMNS side by side, from ``top`` (inches above the figure's bottom) down."""
    width, height = fig.get_size_inches()
    labels = _label_width(maps)
    cell = labels + MAP_WIDTH + CELL_GAP
    image, first_row = None, top
    for row in _map_rows(maps):
        top -= MAP_TITLE
        for k, m in enumerate(row):
            ax = fig.add_axes([(MARGIN + k * cell + labels) / width, (top - m.height) / height, MAP_WIDTH / width,
                               m.height / height])
            image = ax.imshow(m.table, aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
            ax.set_title(m.title, fontsize=7)
            ax.set_xticks(m.shown_columns, [m.columns[i] for i in m.shown_columns], fontsize=TICK_FONT,
                          rotation=m.rotation, ha="center" if m.rotation == 90 else "right")
            ax.set_yticks(m.shown_rows, [m.rows[i] for i in m.shown_rows], fontsize=TICK_FONT)
            if len(m.shown_rows) < len(m.rows):
                ax.set_ylabel(f"every {m.shown_rows[1]}th of {len(m.rows)} parent configurations", fontsize=6)
        top -= max(m.height for m in row) + max(m.below for m in row)
    if image is not None:
        bar = fig.add_axes([(MARGIN + MAP_COLUMNS * cell) / width, (first_row - MAP_TITLE - 1.5) / height,
                            0.12 / width, 1.5 / height])
        fig.colorbar(image, cax=bar)
        bar.tick_params(labelsize=6)


def draw_model(model: AffordanceNetwork, out: str | Path, cpts: bool = False, title: str | None = None,
               min_probability: float = 0.3) -> Path:
    """Draw ``model`` into ``out`` (.png, .svg, .pdf); returns the path written."""
    out = Path(out)
    if out.suffix.lower() not in PICTURE_SUFFIXES:
        raise ValueError(f"'{out}': write a .png, .svg or .pdf file")
    if cpts and not model.parameterised:
        raise ValueError("the model has no CPTs to show (a configuration?): leave out --cpts")
    where = layout(model, min_probability)
    maps = heat_maps(model) if cpts else []
    maps_width, below = cpts_size(maps) if cpts else (0.0, 0.0)
    width, height = max(where.width, maps_width), where.height + below
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes([(width - where.width) / 2 / width, below / height, where.width / width, where.height / height])
    draw_network(ax, model, where)
    if cpts:
        draw_cpts(fig, maps, below)
    learned = model.metadata.get("learned") or {}
    how = (f"the most probable of {len(model.members)} structures, each arc with its probability" if model.structures
           else f"{learned.get('structure', '?')} structure")
    fig.suptitle(title or (f"learned from {learned['num_cases']} cases ({how})" if "num_cases" in learned
                           else "affordance network"),
                 fontsize=11, y=1 - 0.12 / height, va="top")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return out
