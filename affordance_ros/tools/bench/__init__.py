"""`affordance-ros bench`: the paper's experiments, performance figures and the pgmpy comparison.

    affordance-ros bench paper [--quick] [--out DIR]   EM vs Discrete as in the paper, boxplots, table
    affordance-ros bench perf  [--quick] [--out DIR]   EM/predict timings, growth with cases and nodes, memory
    affordance-ros bench pgmpy [--quick] [--out DIR]   pgmpy's EM per iteration vs ours (needs tools/setup_bench.sh)
    affordance-ros bench dds   [--quick] [--out DIR]   the node over DDS: store rate, predict round trip
    affordance-ros bench beyond [--quick] [--out DIR]  online EM vs batch; sensors learned inside EM
    affordance-ros bench faults [--quick] [--out DIR]  kill -9 + restart, stops, malformed flood (over DDS)
    affordance-ros bench scenario [--quick] [--out DIR] tools/hands scenarios: ours vs evaluate's baselines
    affordance-ros bench em    [--quick] [--out DIR]   SQUAREM vs plain EM; latent variable: start, n_init
    affordance-ros bench scale [--quick] [--out DIR]   ~/learn on 10k .. 1M stored cases: time, peak RSS
    affordance-ros bench structure [--quick] [--out DIR]  K2/MCMC vs pyAgrum's K2 and greedy (alarm, insurance)
    affordance-ros bench inference [--quick] [--out DIR]  one query / batches vs pyAgrum (six networks)
    affordance-ros bench exploration [--quick] [--out DIR]  active vs random vs round-robin trials: learning curves
    affordance-ros bench startup [--quick] [--out DIR]  how long --help and predict take to start, what they import
    affordance-ros bench all   [--quick] [--out DIR]   all of them

Modules are imported only when their subcommand runs (matplotlib and pgmpy are not needed otherwise).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util

SUBCOMMANDS = {
    "paper": ("paper", "reproduce the paper's EM-vs-Discrete experiments (boxplots, log-likelihood, table)"),
    "perf": ("performance", "EM time vs cases and nodes, peak memory, predict latency"),
    "pgmpy": ("pgmpy_compare", "pgmpy's EM per iteration against ours on the same network and data"),
    "dds": ("dds", "the node over DDS: cases stored per second from the robot, learn, predict round trip"),
    "beyond": ("beyond", "online EM vs batch EM after one pass; sensor models re-estimated inside EM"),
    "faults": ("faults", "fault injection: kill -9 mid-stream and restart, stops under load, malformed flood"),
    "scenario": ("scenario", "the tools and hands scenarios: ours against every baseline; evaluate's time"),
    "em": ("em", "SQUAREM vs plain EM (montesano 10k); a latent variable in asia and alarm (start, n_init, pyAgrum)"),
    "scale": ("scale", "~/learn through the node from 10k to 1M stored cases: time and peak memory"),
    "structure": ("structure", "K2 and MCMC on alarm and insurance: structural Hamming distance and time vs pyAgrum"),
    "inference": ("inference", "one query and batches against pyAgrum's LazyPropagation on six standard networks"),
    "exploration": ("exploration", "trials chosen by information gain vs random and round robin: learning curves "
                                   "(montesano, tools); the time of a ranking"),
    "startup": ("startup", "the installed command's start-up: --help and predict, wall and import time, modules"),
}


def _module(name: str):
    return importlib.import_module(f"{__name__}.{SUBCOMMANDS[name][0]}")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register `bench` and its subcommands on the CLI's subparsers."""
    bench = subparsers.add_parser("bench", help="benchmarks: the paper's experiments, performance, pgmpy",
                                  description=__doc__.split("\n\n")[1], formatter_class=argparse.RawTextHelpFormatter)
    sub = bench.add_subparsers(dest="bench", required=True)
    for name, (_, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        _add_common(p)
        p.set_defaults(run=lambda args, name=name: _module(name).run(args))
    every = sub.add_parser("all", help="every benchmark above, one after the other")
    _add_common(every)
    every.set_defaults(run=run_all)
    return bench


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="CI-sized run: seconds, not minutes")
    p.add_argument("--out", default="bench-results", help="directory for PNGs, tables and JSON")
    p.add_argument("--jobs", type=int, default=1,
                   help="processes for the paper's repetitions and the scenarios' evaluations")
    p.add_argument("--reps", type=int, help="paper: repetitions (default 30, quick 2)")
    p.add_argument("--alpha", type=float, default=1.0,
                   help="paper: ground-truth CPT rows ~ Dirichlet(alpha) (networks.yaml: 1)")
    p.add_argument("--em-init", choices=("uniform", "discrete"), default="uniform",
                   help="paper: EM's starting CPTs: uniform (fit_em's default) or the Discrete estimate")
    p.add_argument("--discrete-map", choices=("true", "uniform", "fitted"), default="true",
                   help="paper: p(v) in Discrete's MAP assignment: the true marginal (networks.yaml), "
                        "uniform (nearest mean) or mixture weights fitted to the readings")
    p.add_argument("--cases", type=int,
                   help="pgmpy: number of cases (default 300, quick 6); dds: robot trials (default 5000, quick 200)")
    p.add_argument("--iterations", type=int, help="pgmpy: EM iterations to time (default 2, quick 1)")
    p.add_argument("--resume", metavar="RESULTS_JSON",
                   help="exploration: keep the runs of an earlier exploration_results.json, run only the seeds it "
                        "lacks (the same checkpoints and settings)")


def run_all(args) -> int:
    status = 0
    for name in SUBCOMMANDS:
        if name == "pgmpy" and importlib.util.find_spec("pgmpy") is None:
            print("bench pgmpy: skipped, pgmpy is not installed (tools/setup_bench.sh installs it)")
            continue
        if name in ("dds", "faults", "scale") and importlib.util.find_spec("rclpy") is None:
            print(f"bench {name}: skipped, rclpy is not importable here")
            continue
        status = max(status, _module(name).run(args))
        print()
    return status
