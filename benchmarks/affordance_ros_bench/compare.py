"""A scenario run against the figures kept in the repository: every figure of ours that got worse beyond its noise.

    affordance-ros-bench scenario --compare docs/bench/scenario_results.json            (run, then compare)
    affordance-ros-bench scenario --compare docs/bench/scenario_results.json --run R.json   (compare R alone)

Both runs evaluate the same simulated data sets (a seed makes the same trials), so each figure of ours is
compared data set by data set: the differences, oriented so that a positive one is worse, have a mean and a
standard error over the data sets. A figure got worse *beyond its noise* when the mean difference exceeds
the one-sided 5 % quantile of Student's t times that standard error (paired t-test; with 3 data sets the
mean must be 2.92 standard errors out), and more than ``TOLERANCE`` of the reference figure (what another
machine's floating point moves). A run of one data set has no noise to measure: every worsening beyond the
tolerance is shown. A figure the reference has and the run has not is shown too (a setting lost a target).
Only ours is compared: the baselines are there to read the tables, not to be guarded.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import stdtrit

# figures where a larger value is better (the others, the RMSEs and the log-loss, smaller)
HIGHER_IS_BETTER = {"accuracy": True, "log_loss": False, "euclidean_rmse": False, "rmse": False, "log_density": True}
# the one-sided level of the paired t-test
SIGNIFICANCE = 0.05
# a difference within this share of the reference figure (plus 1e-12) is no difference
TOLERANCE = 1e-6


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of ``metric`` (accuracy, log_loss, euclidean_rmse, rmse, rmse_NAME, log_density) is
    better."""
    return HIGHER_IS_BETTER["rmse" if metric.startswith("rmse") else metric]


@dataclass(frozen=True)
class FigureChange:
    """One figure of ours in a setting: its mean over the data sets both runs have, in the reference and in the
    run, the mean difference (positive: worse) and the threshold it had to exceed to count."""

    setting: str
    figure: str              # "Action accuracy", "Effect euclidean_rmse", ...
    reference: float
    run: float
    worse_by: float
    threshold: float         # the noise: t quantile x standard error (inf: one data set); plus the tolerance
    data_sets: int

    @property
    def worse(self) -> bool:
        return self.worse_by > self.threshold

    def line(self) -> str:
        if math.isnan(self.run):
            return f"{self.setting}: {self.figure} {self.reference:.4f}, not in the run"
        noise = (f"noise {self.threshold:.4g} over {self.data_sets} data sets" if self.data_sets > 1
                 else "one data set: no noise to measure")
        return (f"{self.setting}: {self.figure} {self.reference:.4f} -> {self.run:.4f} "
                f"(worse by {self.worse_by:.4g}; {noise})")


def load_results(path: str | Path) -> dict:
    """A ``scenario_results.json`` written by ``affordance-ros-bench scenario``; an error naming the file when it
    is not one."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"affordance-ros-bench scenario: cannot read '{path}': {exc}") from None
    if not (isinstance(doc, dict) and isinstance(doc.get("results"), dict) and isinstance(doc.get("seeds"), dict)):
        raise SystemExit(f"affordance-ros-bench scenario: '{path}' is not the scenario_results.json of a run of "
                         "this version of the bench (no 'results' with the 'seeds' of every setting)")
    return doc


def figure_changes(run: dict, reference: dict) -> list[FigureChange]:
    """Every figure of ours the reference has, compared with the run's on the data sets (seeds) of its setting both
    have."""
    if run["sizes"] != reference["sizes"]:
        raise ValueError(f"the runs are not of the same size: {run['sizes']} against the reference's "
                         f"{reference['sizes']} (compare a --quick run with a --quick reference)")
    changes = []
    for setting, figures in reference["results"].items():
        run_seeds, reference_seeds = run["seeds"].get(setting, []), reference["seeds"][setting]
        seeds = sorted(set(run_seeds) & set(reference_seeds))
        if not seeds and setting in run["results"]:
            raise ValueError(f"no data set of '{setting}' in common: seeds {run_seeds} against the reference's "
                             f"{reference_seeds}")
        for figure, per_seed in figures.items():
            ours_ref = np.array([per_seed[reference_seeds.index(s)]["ours"] for s in seeds or reference_seeds],
                                dtype=float)
            mine = run["results"].get(setting, {}).get(figure)
            if mine is None:
                changes.append(FigureChange(setting, figure, float(ours_ref.mean()), math.nan, math.inf, 0.0, 0))
                continue
            ours_run = np.array([mine[run_seeds.index(s)]["ours"] for s in seeds], dtype=float)
            sign = -1.0 if higher_is_better(figure.split(" ", 1)[1]) else 1.0
            worse = sign * (ours_run - ours_ref)
            tolerance = TOLERANCE * float(np.mean(np.abs(ours_ref))) + 1e-12
            if len(seeds) > 1:
                noise = stdtrit(len(seeds) - 1, 1.0 - SIGNIFICANCE) * worse.std(ddof=1) / math.sqrt(len(seeds))
            else:
                noise = 0.0
            changes.append(FigureChange(setting, figure, float(ours_ref.mean()), float(ours_run.mean()),
                                        float(worse.mean()), float(noise) + tolerance, len(seeds)))
    return changes


def report(changes: list[FigureChange], reference_name: str) -> tuple[list[str], bool]:
    """The lines to print of a comparison, and whether a figure got worse beyond its noise."""
    worse = [c for c in changes if c.worse]
    better = [c for c in changes if -c.worse_by > c.threshold]
    lines = [f"compared with {reference_name}: {len(changes)} figures of ours, {len(worse)} worse beyond their "
             f"noise, {len(better)} better beyond it"]
    lines += ["  worse: " + c.line() for c in worse] + ["  better: " + c.line().replace("worse by -", "better by ")
                                                        for c in better]
    if worse:
        lines.append("  (a trade between uses shows here; if it is meant, say why in docs/benchmarks/pooling.md "
                     "and keep this run's scenario_results.json as the reference)")
    return lines, bool(worse)


__all__ = ["FigureChange", "figure_changes", "higher_is_better", "load_results", "report"]
