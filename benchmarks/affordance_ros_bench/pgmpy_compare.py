"""pgmpy's EM against ours: the same montesano network, the same data, the same start, one run.

pgmpy has no continuous children, so every sensor reading is discretised into bins of width
2.5 (half the distance between two values' means) and each hidden variable V gets a discrete
child V_bin with the known CPD P(bin | v) of the Gaussian sensor N(5v, sigma). Both learners
start from the same CPTs (the Discrete estimate, so that the hidden parts' start is not
symmetric for either), keep the sensor CPDs
fixed (pgmpy would re-estimate them: a small subclass puts the known ones back after each
M-step) and learn the eight hidden variables' CPTs by maximum likelihood. Ours runs on exactly
the same binned evidence (the likelihood P(bin | v) of each case), so after the same number of
iterations the two must agree up to rounding, which is checked and printed.

pgmpy is a benchmark-only extra: tools/setup_bench.sh installs it (requirements-bench.txt).
"""

from __future__ import annotations

import logging
import statistics
import time
import warnings

import numpy as np
from scipy.stats import norm

from affordance_ros.core import benchmark_network, benchmark_structure, fit_discrete, sample_cases
from affordance_ros.core.em import normalise_counts
from affordance_ros.core.evidence import evidence_from_log_likelihoods
from affordance_ros.core.inference import JunctionTree

from .report import fmt_seconds, machine, machine_line, markdown_table, output_dir, write_json

SIGMA = 3.0
BIN_WIDTH = 2.5


def bin_edges(card: int) -> np.ndarray:
    """Inner bin edges from 5 below the first mean to 5 above the last; two open-ended bins outside."""
    return np.arange(-5.0, 5.0 * (card - 1) + 5.0 + 1e-9, BIN_WIDTH)


def bin_probabilities(means: np.ndarray, stddevs: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """P(bin | v) of a Gaussian sensor, (card, bins)."""
    bounds = np.concatenate([[-np.inf], edges, [np.inf]])
    cdf = norm.cdf((bounds[None, :] - means[:, None]) / stddevs[:, None])
    return np.diff(cdf, axis=1)


def binned_data(truth, cases) -> tuple[dict, dict]:
    """{variable: bin index per case}, {variable: P(bin | v) (card, bins)}."""
    bins, probs = {}, {}
    for v in truth.variables:
        edges = bin_edges(v.card)
        bins[v.name] = np.searchsorted(edges, cases.readings[v.sensor.name])
        probs[v.name] = bin_probabilities(v.sensor.means, v.sensor.stddevs, edges)
    return bins, probs


# ------------------------------------------------------------------ ours
def ours_iterations(truth, bins: dict, probs: dict, start: list, iterations: int) -> tuple[list, list]:
    """Our E-step (junction tree over all cases at once) + ML M-step on the binned evidence.
    Returns (CPTs after ``iterations``, seconds of each iteration)."""
    n_cases = len(next(iter(bins.values())))
    log_lik = [np.log(probs[name][:, bins[name]].T) for name in truth.names]
    estep = JunctionTree(truth).estep(evidence_from_log_likelihoods(log_lik, n_cases))
    cpts, times = list(start), []
    for _ in range(iterations):
        t0 = time.perf_counter()
        counts, _ = estep(cpts)
        cpts = [normalise_counts(c, 0.0) for c in counts]
        times.append(time.perf_counter() - t0)
    return cpts, times


# ------------------------------------------------------------------ pgmpy
def _quiet_pgmpy():
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"pgmpy.*")
    warnings.filterwarnings("ignore", category=FutureWarning, message=r".*pgmpy.*")
    logging.getLogger("pgmpy").setLevel(logging.ERROR)


def _pgmpy_cpd(TabularCPD, name: str, parents, table: np.ndarray, states: dict):
    """A TabularCPD from our layout (parents..., child)."""
    card = table.shape[-1]
    values = np.moveaxis(table, -1, 0).reshape(card, -1)
    return TabularCPD(name, card, values, evidence=list(parents) or None,
                      evidence_card=[table.shape[i] for i in range(len(parents))] or None,
                      state_names={n: states[n] for n in [name, *parents]})


def _our_layout(cpd, parents) -> np.ndarray:
    """A TabularCPD's values as our (parents..., child) array."""
    order = list(cpd.variables)
    return np.transpose(cpd.values, [order.index(p) for p in parents] + [0])


def pgmpy_iterations(truth, bins: dict, probs: dict, start: list, iterations: int):
    """pgmpy's DiscreteEM for ``iterations`` iterations from ``start``; (CPTs, total seconds, unique rows)."""
    _quiet_pgmpy()
    import pandas as pd
    from pgmpy.factors.discrete import TabularCPD
    from pgmpy.models import DiscreteBayesianNetwork
    from pgmpy.parameter_estimator import DiscreteEM

    class KnownSensorsEM(DiscreteEM):
        """DiscreteEM that keeps the sensors' CPDs fixed (ours are known, not learned)."""

        known: dict = {}

        def _fit_parameters(self, model, data, sample_weight=None):
            fitted = super()._fit_parameters(model, data, sample_weight)
            return [self.known.get(c.variable, c) if set(c.scope()) == set(self.known.get(c.variable, c).scope())
                    else c for c in fitted]

    sensor = {name: f"{name}_bin" for name in truth.names}
    states = {name: list(range(truth[name].card)) for name in truth.names}
    states.update({sensor[n]: list(range(probs[n].shape[1])) for n in truth.names})
    model = DiscreteBayesianNetwork([*truth.arcs, *[(n, sensor[n]) for n in truth.names]],
                                    latents=set(truth.names))
    known = {sensor[n]: _pgmpy_cpd(TabularCPD, sensor[n], [n], probs[n], states) for n in truth.names}
    init = {v.name: _pgmpy_cpd(TabularCPD, v.name, v.parents, start[i], states)
            for i, v in enumerate(truth.variables)}
    init.update(known)
    data = pd.DataFrame({sensor[n]: bins[n] for n in truth.names})
    em = KnownSensorsEM(state_names=states, latent_card={n: truth[n].card for n in truth.names},
                        max_iter=iterations, atol=0.0, init_cpds=init, show_progress=False, seed=0)
    em.known = known
    t0 = time.perf_counter()
    em.fit(model, data)
    seconds = time.perf_counter() - t0
    learned = {c.variable: c for c in em.parameters_}
    cpts = [_our_layout(learned[v.name], v.parents) for v in truth.variables]
    return cpts, seconds, int(data.drop_duplicates().shape[0])


# ------------------------------------------------------------------ command
def compare(n_cases: int, iterations: int, seed: int = 0) -> dict:
    truth = benchmark_network("montesano", SIGMA, seed=seed)
    cases, _ = sample_cases(truth, n_cases, np.random.default_rng(seed))
    bins, probs = binned_data(truth, cases)
    start = [v.cpt for v in fit_discrete(benchmark_structure("montesano", SIGMA), cases, 1.0).variables]
    theirs, pgmpy_seconds, unique_rows = pgmpy_iterations(truth, bins, probs, start, iterations)
    ours, _ = ours_iterations(truth, bins, probs, start, iterations)
    # Our per-iteration time, measured over more iterations (each is far below a millisecond).
    _, times = ours_iterations(truth, bins, probs, start, max(20, iterations))
    ours_per_iteration = statistics.median(times)
    pgmpy_per_iteration = pgmpy_seconds / iterations
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, theirs))
    return {"network": "montesano", "sigma": SIGMA, "cases": n_cases, "unique_rows": unique_rows,
            "bins": {n: int(probs[n].shape[1]) for n in truth.names}, "iterations": iterations,
            "pgmpy_seconds_per_iteration": pgmpy_per_iteration, "ours_seconds_per_iteration": ours_per_iteration,
            "ratio": pgmpy_per_iteration / ours_per_iteration, "max_abs_cpt_difference": diff,
            "pgmpy_version": _pgmpy_version()}


def _pgmpy_version() -> str:
    import pgmpy
    return pgmpy.__version__


def add_arguments(parser) -> None:
    parser.add_argument("--iterations", type=int, help="EM iterations to time (default 2, quick 1)")


def run(args) -> int:
    try:
        import pgmpy  # noqa: F401
    except ImportError:
        print("affordance-ros-bench pgmpy: error: pgmpy is not installed; run tools/setup_bench.sh "
              "(a benchmark-only extra, requirements-bench.txt)")
        return 2
    out = output_dir(args.out)
    n_cases = args.cases or (6 if args.quick else 300)
    iterations = args.iterations or (1 if args.quick else 2)
    print(f"bench pgmpy{' (quick)' if args.quick else ''}: montesano network, sigma {SIGMA:g}, {n_cases} cases, "
          f"{iterations} EM iteration(s) each")
    print(f"machine: {machine_line()}")
    result = compare(n_cases, iterations)
    table = markdown_table(
        ["learner", "one EM iteration", "per case", "ratio"],
        [[f"pgmpy {result['pgmpy_version']} DiscreteEM", fmt_seconds(result["pgmpy_seconds_per_iteration"]),
          fmt_seconds(result["pgmpy_seconds_per_iteration"] / n_cases), f"{result['ratio']:,.0f} times slower"],
         ["affordance_ros (junction tree)", fmt_seconds(result["ours_seconds_per_iteration"]),
          fmt_seconds(result["ours_seconds_per_iteration"] / n_cases), "1"]])
    note = (f"\nSame network, data ({n_cases} cases, {result['unique_rows']} distinct binned rows) and start; "
            f"largest difference between the two learners' CPT entries after {iterations} iteration(s): "
            f"{result['max_abs_cpt_difference']:.1e}.\n")
    (out / "pgmpy_table.md").write_text(table + note)
    write_json(out / "pgmpy_results.json", {"machine": machine(), "quick": args.quick, **result})
    print()
    print(table + note)
    print(f"pgmpy/ours per EM iteration: {result['ratio']:,.0f}")
    print(f"wrote {out / 'pgmpy_table.md'}")
    print(f"wrote {out / 'pgmpy_results.json'}")
    return 0
