"""The paper's experiments (Osorio et al., section "Results"): EM against Discrete on simulated data.

Per repetition and setting (shared/benchmarks/networks.yaml): draw Dirichlet(1) ground-truth
CPTs, sample N cases of sensor readings N(5v, sigma), learn the CPTs with

- Discrete: the MAP value of each hidden variable, argmax_v p(reading | v) p(v) with the TRUE
  marginal p(v), then counting;
- EM: sensor readings as soft evidence, stopped when the RMS change of all parameters is below
  0.001 or after 100 iterations;

each both in the paper's plain maximum-likelihood form (prior 0) and with a Dirichlet prior of 1
per CPT entry, and score them by the RMS difference between learned and true CPT entries.
A diagnostic run of maximum-likelihood EM started at the true CPTs tells apart a bad start
(local optimum) from the estimator itself.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from affordance_ros.core import (
    LearningOptions,
    benchmark_structure,
    fit_discrete,
    fit_em,
    log_likelihood,
    predict_batch,
    sample_cases,
)
from affordance_ros.core.em import rms_difference
from affordance_ros.core.ground_truth import parent_weights, random_cpts, weighted_rms

from .report import machine, machine_line, markdown_table, output_dir, pyplot, write_json

TOL, MAX_ITER = 1e-3, 100
RARE_CASES = 10   # a CPT row is "rare" when its parent configuration is expected in fewer cases
NETWORK_INDEX = {"simple": 0, "montesano": 1}

# Method key -> (label, colour); the first four are compared, the last is a diagnostic.
METHODS = {
    "discrete_ml": ("Discrete (ML)", "#d62728"),
    "em_ml": ("EM (ML)", "#1f77b4"),
    "discrete_p1": ("Discrete (prior 1)", "#ff9896"),
    "em_p1": ("EM (prior 1)", "#aec7e8"),
    "em_ml_truth_start": ("EM (ML) from truth", "#7f7f7f"),
}
COMPARED = ("discrete_ml", "em_ml", "discrete_p1", "em_p1")


@dataclass(frozen=True)
class Setting:
    network: str
    sigma: float
    paper_cases: int   # the paper's database size
    cases: int         # what this run uses (paper_cases unless --quick)
    paper_reduction: str
    alpha: float = 1.0            # ground-truth CPT rows ~ Dirichlet(alpha) (networks.yaml: 1)
    em_init: str = "uniform"      # EM's start: "uniform" (the default em_init) or "discrete"
    discrete_map: str = "true"    # p(v) in Discrete's MAP: the "true" marginal, "uniform" or "fitted" weights

    @property
    def key(self) -> str:
        return f"{self.network}_sigma{self.sigma:g}_n{self.cases}"


# The paper's reported EM-vs-Discrete reduction of the median RMS error (networks.yaml).
PAPER = (
    ("simple", 1.0, 300, "< 2 %"),
    ("simple", 1.0, 3000, "< 2 %"),
    ("simple", 3.0, 300, "58.5 %"),
    ("simple", 3.0, 3000, "84.6 %"),
    ("montesano", 3.0, 300, "negative (Discrete better)"),
    ("montesano", 3.0, 3000, "7.7 %"),
    ("montesano", 3.0, 10000, "43.1 %"),
)
TRACE_SETTING = ("montesano", 3.0, 300)   # the paper's log-likelihood figure


def settings(quick: bool, alpha: float = 1.0, em_init: str = "uniform", discrete_map: str = "true") -> list[Setting]:
    """The paper's seven settings; --quick divides the database sizes by 10."""
    return [Setting(net, sigma, n, n // 10 if quick else n, reported, alpha, em_init, discrete_map)
            for net, sigma, n, reported in PAPER]


# ------------------------------------------------------------------ one repetition
def map_priors(truth, how: str) -> list | None:
    """p(v) for Discrete's MAP assignment: the ground truth's marginals (networks.yaml), uniform
    (the nearest mean), or None: the core's default, mixture weights fitted to the readings."""
    if how == "true":
        return [predict_batch(truth, [name]).marginals[name][0] for name in truth.names]
    if how == "uniform":
        return [np.full(v.card, 1.0 / v.card) for v in truth.variables]
    return None


def split_rms(learned, truth, weights, n_cases: int, threshold: float = RARE_CASES) -> tuple:
    """(RMS over rows whose parent configuration is expected in >= ``threshold`` of the n cases,
    RMS over the other, rare rows, share of CPT entries in rare rows); NaN for an empty part."""
    sq = {True: 0.0, False: 0.0}
    count = {True: 0, False: 0}
    for a, b, w in zip(learned, truth, weights):
        common = np.broadcast_to(n_cases * w >= threshold, a.shape[:-1])
        row_sq = ((a - b) ** 2).sum(axis=-1)
        for part in (True, False):
            sq[part] += float(row_sq[common == part].sum())
            count[part] += int((common == part).sum()) * a.shape[-1]
    rms = {part: float(np.sqrt(sq[part] / count[part])) if count[part] else float("nan") for part in sq}
    return rms[True], rms[False], count[False] / (count[True] + count[False])


def rare_row_shapes(learned, weights, n_cases: int, threshold: float = RARE_CASES) -> tuple:
    """Of the learned CPT rows that are rare (see split_rms): the share with an entry above 0.95
    (driven to a corner) and the share left exactly uniform; NaN when there are no rare rows."""
    corner = uniform = total = 0
    for a, w in zip(learned, weights):
        rare = np.broadcast_to(n_cases * w < threshold, a.shape[:-1])
        rows = a[rare]
        corner += int((rows.max(axis=-1) > 0.95).sum())
        uniform += int(np.all(np.abs(rows - 1.0 / a.shape[-1]) < 1e-12, axis=-1).sum())
        total += rows.shape[0]
    return (corner / total, uniform / total) if total else (float("nan"), float("nan"))


def run_repetition(setting: Setting, rep: int) -> dict:
    """All methods on one ground truth and one database; numbers only (picklable)."""
    structure = benchmark_structure(setting.network, setting.sigma)
    # With alpha 1 this is benchmark_network(network, sigma, seed=rep).
    truth = random_cpts(structure, np.random.default_rng(rep), setting.alpha)
    rng = np.random.default_rng([rep, setting.cases, int(setting.sigma * 1000), NETWORK_INDEX[setting.network]])
    cases, _ = sample_cases(truth, setting.cases, rng)
    true_cpts = [v.cpt for v in truth.variables]
    weights = parent_weights(truth)
    marginals = map_priors(truth, setting.discrete_map)
    out = {"rep": rep, "truth_log_lik": log_likelihood(truth, cases), "methods": {}}

    def record(key, fit):
        start = time.perf_counter()
        model, em = fit()
        seconds = time.perf_counter() - start
        cpts = [v.cpt for v in model.variables]
        common, rare, out["rare_entries"] = split_rms(cpts, true_cpts, weights, setting.cases)
        out["methods"][key] = {
            "rms": rms_difference(cpts, true_cpts),
            "weighted_rms": weighted_rms(cpts, true_cpts, weights),
            "rms_common_rows": common,
            "rms_rare_rows": rare,
            **dict(zip(("rare_rows_corner", "rare_rows_uniform"),
                       rare_row_shapes(cpts, weights, setting.cases))),
            "log_lik": em.log_likelihood if em else log_likelihood(model, cases),
            "iterations": em.iterations if em else 0,
            "converged": em.converged if em else True,
            "seconds": seconds,
            "trace": list(em.log_likelihoods) if em and _traced(setting) else None,
        }

    record("discrete_ml", lambda: (fit_discrete(structure, cases, prior=0.0, priors=marginals), None))
    record("discrete_p1", lambda: (fit_discrete(structure, cases, prior=1.0, priors=marginals), None))
    init = setting.em_init
    plain = LearningOptions(tol=TOL, max_iter=MAX_ITER, em_init=init, em_acceleration="none")
    record("em_ml", lambda: fit_em(structure, cases, plain.replace(prior=0.0)))
    record("em_p1", lambda: fit_em(structure, cases, plain.replace(prior=1.0)))
    record("em_ml_truth_start", lambda: fit_em(truth, cases, plain.replace(prior=0.0),
                                               initial_cpts=[v.cpt for v in truth.variables]))
    return out


def _traced(setting: Setting) -> bool:
    return (setting.network, setting.sigma, setting.paper_cases) == TRACE_SETTING


def _run_task(task):
    setting, rep = task
    return setting.key, run_repetition(setting, rep)


def run_all(all_settings: list[Setting], reps: int, jobs: int, log=print) -> dict:
    """{setting key: [repetition results]} for every setting, repetitions 0..reps-1."""
    tasks = [(s, r) for s in all_settings for r in range(reps)]
    results = {s.key: [] for s in all_settings}
    start = time.perf_counter()
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            done = pool.map(_run_task, tasks, chunksize=1)
            for key, rep in done:
                results[key].append(rep)
    else:
        for setting in all_settings:
            t0 = time.perf_counter()
            results[setting.key] = [run_repetition(setting, r) for r in range(reps)]
            log(f"  {setting.key}: {reps} repetitions in {time.perf_counter() - t0:.1f} s")
    log(f"  all settings: {time.perf_counter() - start:.1f} s")
    return results


# ------------------------------------------------------------------ summaries
def values(reps: list, method: str, field: str = "rms") -> np.ndarray:
    return np.array([r["methods"][method][field] for r in reps], dtype=float)


def median(reps: list, method: str, field: str = "rms") -> float:
    """Median over repetitions (NaN ones, e.g. no rare rows, left out; NaN if all are)."""
    x = values(reps, method, field)
    x = x[~np.isnan(x)]
    return float(np.median(x)) if x.size else float("nan")


def reduction(reps: list, em: str, discrete: str) -> float:
    """1 - median RMS(EM) / median RMS(Discrete): positive when EM is better."""
    return 1.0 - median(reps, em) / median(reps, discrete)


def summary_rows(all_settings: list[Setting], results: dict) -> list[dict]:
    rows = []
    for s in all_settings:
        reps = results[s.key]
        rows.append({
            "network": s.network, "sigma": s.sigma, "cases": s.cases, "paper_cases": s.paper_cases,
            "repetitions": len(reps), "paper_reduction": s.paper_reduction,
            "median_rms": {m: median(reps, m) for m in METHODS},
            "median_weighted_rms": {m: median(reps, m, "weighted_rms") for m in METHODS},
            "median_rms_common_rows": {m: median(reps, m, "rms_common_rows") for m in METHODS},
            "median_rms_rare_rows": {m: median(reps, m, "rms_rare_rows") for m in METHODS},
            "median_rare_entries": float(np.median([r["rare_entries"] for r in reps])),
            "median_rare_rows_corner": {m: median(reps, m, "rare_rows_corner") for m in COMPARED},
            "median_rare_rows_uniform": {m: median(reps, m, "rare_rows_uniform") for m in COMPARED},
            "reduction_ml": reduction(reps, "em_ml", "discrete_ml"),
            "reduction_p1": reduction(reps, "em_p1", "discrete_p1"),
            "reduction_p1_vs_discrete_ml": reduction(reps, "em_p1", "discrete_ml"),
            "em_wins_ml": float(np.mean(values(reps, "em_ml") < values(reps, "discrete_ml"))),
            "median_log_lik_minus_truth": {
                m: float(np.median(values(reps, m, "log_lik") - np.array([r["truth_log_lik"] for r in reps])))
                for m in METHODS},
            "median_iterations": {m: median(reps, m, "iterations") for m in METHODS if m.startswith("em")},
            "converged": {m: float(np.mean(values(reps, m, "converged"))) for m in METHODS if m.startswith("em")},
            "median_seconds": {m: median(reps, m, "seconds") for m in METHODS},
        })
    return rows


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def main_table(rows: list[dict]) -> str:
    header = ["network", "σ", "cases", "Discrete (ML)", "EM (ML)", "reduction (ML, paper's form)",
              "paper's reduction", "Discrete (prior 1)", "EM (prior 1)", "reduction (prior 1)"]
    body = [[r["network"], f"{r['sigma']:g}", r["cases"],
             f"{r['median_rms']['discrete_ml']:.4f}", f"{r['median_rms']['em_ml']:.4f}", _pct(r["reduction_ml"]),
             (r["paper_reduction"] if r["cases"] == r["paper_cases"]
              else f"{r['paper_reduction']} (at {r['paper_cases']})"),
             f"{r['median_rms']['discrete_p1']:.4f}", f"{r['median_rms']['em_p1']:.4f}", _pct(r["reduction_p1"])]
            for r in rows]
    return markdown_table(header, body)


def _pair(d: dict, a: str = "discrete_ml", b: str = "em_ml") -> str:
    if np.isnan(d[a]):
        return "–"
    return f"{d[a]:.3f} / {d[b]:.3f}"


def _drop(d: dict, a: str = "discrete_ml", b: str = "em_ml") -> str:
    return _pct(1.0 - d[b] / d[a]) if d[a] > 0 else "n/a"


def _shares(d: dict, a: str = "discrete_ml", b: str = "em_ml") -> str:
    if np.isnan(d[a]):
        return "–"
    return f"{100 * d[a]:.0f} % / {100 * d[b]:.0f} %"


def where_table(rows: list[dict]) -> str:
    """Where the error is: rare CPT rows (parent configuration expected in < RARE_CASES cases) or not."""
    header = ["network", "σ", "cases", f"CPT entries in rare rows (< {RARE_CASES} expected cases)",
              "rare rows: Discrete (ML) / EM (ML)", "rare rows with an entry > 0.95", "rare rows left uniform",
              "other rows: Discrete (ML) / EM (ML)", "reduction",
              "weighted by p(parents): Discrete (ML) / EM (ML)", "reduction"]
    body = [[r["network"], f"{r['sigma']:g}", r["cases"], f"{100 * r['median_rare_entries']:.0f} %",
             _pair(r["median_rms_rare_rows"]), _shares(r["median_rare_rows_corner"]),
             _shares(r["median_rare_rows_uniform"]),
             _pair(r["median_rms_common_rows"]), _drop(r["median_rms_common_rows"]),
             _pair(r["median_weighted_rms"]), _drop(r["median_weighted_rms"])] for r in rows]
    return markdown_table(header, body)


def start_table(rows: list[dict]) -> str:
    """EM's start and the likelihood each method reaches, relative to the true CPTs'."""
    header = ["network", "σ", "cases", "EM (ML) RMS / the same started at the true CPTs",
              "log-lik − truth's: Discrete (ML)", "EM (ML)", "EM (prior 1)", "EM (ML) iterations (converged)"]
    body = []
    for r in rows:
        ll = r["median_log_lik_minus_truth"]
        body.append([r["network"], f"{r['sigma']:g}", r["cases"], _pair(r["median_rms"], "em_ml", "em_ml_truth_start"),
                     f"{ll['discrete_ml']:+.1f}", f"{ll['em_ml']:+.1f}", f"{ll['em_p1']:+.1f}",
                     f"{r['median_iterations']['em_ml']:.0f} ({100 * r['converged']['em_ml']:.0f} %)"])
    return markdown_table(header, body)


# ------------------------------------------------------------------ figures
FIGURES = (("simple", 1.0), ("simple", 3.0), ("montesano", 3.0))


def boxplot_figure(all_settings: list[Setting], results: dict, network: str, sigma: float, path: Path) -> None:
    """RMS error per database size, one box per method (as the paper's figures)."""
    plt = pyplot()
    chosen = [s for s in all_settings if (s.network, s.sigma) == (network, sigma)]
    fig, ax = plt.subplots(figsize=(1.9 + 1.9 * len(chosen), 3.6), dpi=100)
    width = 0.18
    for j, method in enumerate(COMPARED):
        label, colour = METHODS[method]
        data = [values(results[s.key], method) for s in chosen]
        pos = [g + (j - 1.5) * width * 1.15 for g in range(len(chosen))]
        box = ax.boxplot(data, positions=pos, widths=width, patch_artist=True, showfliers=True,
                         flierprops={"markersize": 3}, medianprops={"color": "black"})
        for patch in box["boxes"]:
            patch.set_facecolor(colour)
        ax.plot([], [], "s", color=colour, label=label)
    ax.set_xticks(range(len(chosen)), [f"{s.cases} cases" for s in chosen])
    ax.set_ylabel("RMS error of the CPT entries")
    reps = len(results[chosen[0].key])
    ax.set_title(f"{network} network, sensor σ = {sigma:g} ({reps} repetitions)", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def loglik_figure(setting: Setting, reps: list, path: Path) -> None:
    """Left: log-likelihood per EM iteration for the first repetition (the paper's figure), with
    the truth's and Discrete's; right: every repetition's ML-EM trace relative to the truth."""
    plt = pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8), dpi=100)
    first = reps[0]
    for method in ("em_ml", "em_p1"):
        trace = first["methods"][method]["trace"]
        ax.plot(range(len(trace)), trace, marker=".", label=METHODS[method][0], color=METHODS[method][1])
    ax.axhline(first["truth_log_lik"], color="green", ls="--", label="true CPTs")
    for method in ("discrete_ml", "discrete_p1"):
        ax.axhline(first["methods"][method]["log_lik"], color=METHODS[method][1], ls=":", label=METHODS[method][0])
    ax.set_xlabel("EM iteration")
    ax.set_ylabel("log-likelihood of the parameters")
    ax.set_title(f"{setting.network}, σ = {setting.sigma:g}, {setting.cases} cases (repetition 0)", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    for rep in reps:
        trace = np.array(rep["methods"]["em_ml"]["trace"]) - rep["truth_log_lik"]
        ax2.plot(range(len(trace)), trace, color=METHODS["em_ml"][1], alpha=0.35, lw=0.8)
    ax2.axhline(0, color="green", ls="--", label="true CPTs")
    ax2.set_xlabel("EM iteration")
    ax2.set_ylabel("log-likelihood − true CPTs' log-likelihood")
    ax2.set_title(f"EM (ML), all {len(reps)} repetitions", fontsize=10)
    ax2.set_yscale("symlog", linthresh=10)
    ax2.legend(fontsize=7)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ------------------------------------------------------------------ command

def add_arguments(parser) -> None:
    parser.add_argument("--alpha", type=float, default=1.0,
                        help="ground-truth CPT rows ~ Dirichlet(alpha) (networks.yaml: 1)")
    parser.add_argument("--em-init", choices=("uniform", "discrete"), default="uniform",
                        help="EM's starting CPTs: uniform (fit_em's default) or the Discrete estimate")
    parser.add_argument("--discrete-map", choices=("true", "uniform", "fitted"), default="true",
                        help="p(v) in Discrete's MAP assignment: the true marginal (networks.yaml), "
                             "uniform (nearest mean) or mixture weights fitted to the readings")


def run(args) -> int:
    out = output_dir(args.out)
    reps = args.reps or (2 if args.quick else 30)
    all_settings = settings(args.quick, args.alpha, args.em_init, args.discrete_map)
    print(f"bench paper: {len(all_settings)} settings x {reps} repetitions{' (quick)' if args.quick else ''}; "
          f"ground truth Dirichlet({args.alpha:g}), EM started from {args.em_init}, "
          f"Discrete's MAP with the {args.discrete_map} p(v)")
    print(f"machine: {machine_line()}")
    results = run_all(all_settings, reps, max(1, args.jobs))
    rows = summary_rows(all_settings, results)

    figures = []
    for network, sigma in FIGURES:
        path = out / f"paper_rms_{network}_sigma{sigma:g}.png"
        boxplot_figure(all_settings, results, network, sigma, path)
        figures.append(path)
    traced = next(s for s in all_settings if _traced(s))
    path = out / f"paper_loglik_{traced.network}_{traced.cases}.png"
    loglik_figure(traced, results[traced.key], path)
    figures.append(path)

    table = main_table(rows)
    diagnostics = where_table(rows) + "\n" + start_table(rows)
    (out / "paper_table.md").write_text(
        f"Median RMS error of the learned CPT entries against the ground truth ({reps} repetitions; "
        f"ground-truth CPT rows ~ Dirichlet({args.alpha:g}); EM started from {args.em_init} CPTs; "
        f"Discrete's MAP assignment with the {args.discrete_map} p(v)).\n"
        "Reduction = 1 - median(EM) / median(Discrete); positive: EM better.\n\n" + table +
        "\nWhere the error is (medians): CPT rows whose parent configuration is rare, the other rows, and the "
        "RMS with every row weighted by the true p(parents).\n\n" + where_table(rows) +
        "\nEM's start and the log-likelihood reached, minus the true CPTs' (medians).\n\n" + start_table(rows))
    write_json(out / "paper_results.json", {
        "machine": machine(), "repetitions": reps, "quick": args.quick, "tol": TOL, "max_iter": MAX_ITER,
        "alpha": args.alpha, "em_init": args.em_init, "discrete_map": args.discrete_map,
        "summary": rows, "results": results})
    print()
    print(table)
    print(diagnostics)
    for path in figures:
        print(f"wrote {path}")
    print(f"wrote {out / 'paper_table.md'}")
    print(f"wrote {out / 'paper_results.json'}")
    return 0
