"""`affordance-ros-bench NAME [--quick] [--out DIR]`: one benchmark, or all of them one after the other.

Each benchmark is a module with ``run(args) -> int`` and, for options of its own, ``add_arguments(parser)``;
a module is imported only when its benchmark runs (matplotlib, pgmpy and rclpy are not needed otherwise).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

BENCHMARKS = {
    "paper": ("paper", "the paper's EM-vs-Discrete experiments (boxplots, log-likelihood, table)"),
    "perf": ("performance", "EM time vs cases and nodes, peak memory, predict latency"),
    "pgmpy": ("pgmpy_compare", "pgmpy's EM per iteration against ours on the same network and data"),
    "dds": ("dds", "the node over DDS: cases stored per second from the robot, learn, predict round trip"),
    "beyond": ("beyond", "online EM vs batch EM after one pass; sensor models re-estimated inside EM"),
    "faults": ("faults", "fault injection: kill -9 mid-stream and restart, stops under load, malformed flood"),
    "link": ("link", "a robot on WiFi: two hosts (network namespaces) and a link that loses, delays and cuts frames"),
    "scenario": ("scenario", "every shipped configuration on realistic scenarios: ours against every baseline, "
                             "evaluate's time; --compare: the figures that got worse than a reference's"),
    "em": ("em", "SQUAREM vs plain EM (montesano 10k); a latent variable in asia and alarm (start, n_init)"),
    "scale": ("scale", "~/learn through the node from 10k to 1M stored cases: time and peak memory"),
    "structure": ("structure", "K2 and MCMC on alarm and insurance: structural Hamming distance, time vs pyAgrum"),
    "inference": ("inference", "one query and batches against pyAgrum's LazyPropagation on six standard networks"),
    "exploration": ("exploration", "trials chosen by information gain vs random and round robin: learning curves"),
    "startup": ("startup", "the installed command's start-up: --help and predict, wall and import time, modules"),
    "posterior": ("posterior", "answers' 90 % intervals: coverage of the truth by trials and sensor noise; query cost"),
    "decisions": ("decisions", "choosing actions while learning: regret of rank_actions' strategies, five worlds"),
}
NEEDS_ROS = ("dds", "faults", "link", "scale")
NEEDS_PGMPY = ("pgmpy",)


def module(name: str):
    return importlib.import_module(f"{__package__}.{BENCHMARKS[name][0]}")


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI-sized run: seconds, not minutes")
    parser.add_argument("--out", default="bench-results", help="directory for PNGs, tables and JSON")
    parser.add_argument("--jobs", type=int, default=1, help="processes for the runs that can go in parallel")
    parser.add_argument("--reps", type=int, help="repetitions (seeds); each benchmark has its own default")
    parser.add_argument("--cases", type=int, help="cases or robot trials; each benchmark has its own default")


def benchmark_parser(name: str, prog: str = "affordance-ros-bench") -> argparse.ArgumentParser:
    """The parser of one benchmark: the common options and the module's own."""
    parser = argparse.ArgumentParser(prog=f"{prog} {name}", description=BENCHMARKS[name][1])
    add_common_arguments(parser)
    add_arguments = getattr(module(name), "add_arguments", None)
    if add_arguments is not None:
        add_arguments(parser)
    return parser


def usage() -> str:
    width = max(len(name) for name in BENCHMARKS)
    lines = [f"  {name:<{width}}  {text}" for name, (_, text) in BENCHMARKS.items()]
    lines.append(f"  {'all':<{width}}  every benchmark above, one after the other")
    return ("usage: affordance-ros-bench NAME [--quick] [--out DIR] [options of NAME]\n\n"
            "benchmarks (NAME --help: its options):\n" + "\n".join(lines) + "\n")


def run_all(argv: list) -> int:
    common = argparse.ArgumentParser(prog="affordance-ros-bench all", description="every benchmark")
    add_common_arguments(common)
    args = common.parse_args(argv)
    status = 0
    for name in BENCHMARKS:
        if name in NEEDS_PGMPY and importlib.util.find_spec("pgmpy") is None:
            print(f"bench {name}: skipped, pgmpy is not installed (tools/setup_bench.sh installs it)")
            continue
        if name in NEEDS_ROS and importlib.util.find_spec("rclpy") is None:
            print(f"bench {name}: skipped, rclpy is not importable here")
            continue
        own = benchmark_parser(name).parse_args([])
        for key, value in vars(args).items():
            setattr(own, key, value)
        status = max(status, module(name).run(own))
        print()
    return status


def main(argv: list | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.reconfigure(line_buffering=True)  # a run's progress shows as it happens, also through a pipe
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), end="")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name == "all":
        return run_all(rest)
    if name not in BENCHMARKS:
        print(usage(), end="", file=sys.stderr)
        print(f"affordance-ros-bench: error: no benchmark '{name}'", file=sys.stderr)
        return 2
    try:
        return module(name).run(benchmark_parser(name).parse_args(rest))
    except KeyboardInterrupt:
        print(f"affordance-ros-bench {name}: interrupted", file=sys.stderr)
        return 130
