"""`affordance-ros-bench startup`: how long the installed command takes to start, and what it imports.

Each command (`--help`, and `predict` on a small model) runs as a user runs it, the installed
`affordance-ros` in a new process: its wall and CPU time (the shortest of a few runs: the least disturbed
by other work), and under `python -X importtime` the time its imports take and whether any of the modules only
other commands need (rclpy, rosbags, matplotlib, scipy) was loaded. The peer, measured in the same run:
`python -c "import numpy"`, the least any command that touches an array pays.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from affordance_ros.core import benchmark_network

from .report import fmt_seconds, markdown_table, output_dir, write_results

# Loaded only by the commands that need them (test/test_packaging.py holds it for --help and predict).
HEAVY = ("rclpy", "rosbags", "matplotlib", "scipy")
TARGET = 0.3  # seconds: what --help and predict may take to start


def installed_command() -> str:
    """The `affordance-ros` next to this Python (the install being measured), else the one on PATH."""
    found = shutil.which("affordance-ros", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                                   os.environ.get("PATH", "")]))
    if found is None:
        raise SystemExit("affordance-ros-bench startup: error: no affordance-ros command installed next to "
                         f"{sys.executable} or on PATH")
    return found


def run_times(argv: list[str], repeats: int) -> tuple[float, float]:
    """Shortest wall time and shortest CPU time (user + system) of ``argv`` over ``repeats`` runs (seconds),
    each run checked to succeed. On a busy machine the wall time also holds what other work took; the CPU
    time is about what the start-up takes on an idle core."""
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeats):
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = min(wall, time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = min(cpu, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall, cpu


def import_profile(argv: list[str]) -> tuple[float, set[str]]:
    """Total import time (seconds) and the top-level modules imported, from `python -X importtime`."""
    result = subprocess.run([sys.executable, "-X", "importtime", *argv], check=True, capture_output=True,
                            text=True)
    # (the venv of the PyPI ROS 2 wheels starts Python twice: ros_wheels_bootstrapper re-executes it with
    # LD_LIBRARY_PATH set; each process prints its own header line: count the last process only)
    lines = result.stderr.splitlines()
    headers = [k for k, line in enumerate(lines) if line.startswith("import time:") and "cumulative" in line]
    total, modules = 0.0, set()
    for line in lines[headers[-1] + 1:]:
        if not line.startswith("import time:"):
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        name = name.removeprefix(" ")
        if not name.startswith(" "):  # a top-level import (nested ones are indented) counts once
            total += int(cumulative) * 1e-6
        modules.add(name.strip().split(".")[0])
    return total, modules


def run(args) -> int:
    out = output_dir(args.out)
    repeats = 3 if args.quick else 10
    command = installed_command()
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model.json"
        benchmark_network("montesano", 1.0, 0).save(model)
        commands = {
            "--help": [command, "--help"],
            "predict": [command, "predict", "--model", str(model), "--query", "action", "--sensor", "obj_vel=7.2"],
        }
        peer_wall, peer_cpu = run_times([sys.executable, "-c", "import numpy"], repeats)
        rows, results = [], {}
        for name, argv in commands.items():
            wall, cpu = run_times(argv, repeats)
            imports, modules = import_profile(argv)
            heavy = sorted(m for m in HEAVY if m in modules)
            results[name] = {"wall": wall, "cpu": cpu, "imports": imports, "heavy_modules_loaded": heavy,
                             "ratio_to_numpy_import": wall / peer_wall}
            rows.append([f"`affordance-ros {name}`", fmt_seconds(wall), fmt_seconds(cpu), fmt_seconds(imports),
                         f"{wall / peer_wall:.2f}", ", ".join(heavy) or "none", "yes" if cpu <= TARGET else "NO"])
    print(f"bench startup: {command}, shortest of {repeats} runs; peer `python -c \"import numpy\"` "
          f"{fmt_seconds(peer_wall)} wall, {fmt_seconds(peer_cpu)} CPU")
    table = markdown_table(["command", "wall", "CPU", "imports (-X importtime)", "wall × numpy import's",
                            f"of {', '.join(HEAVY)} loaded", f"CPU ≤ {TARGET} s"], rows)
    write_results(out, "startup", table, args.quick,
                  {"command": command, "numpy_import": peer_wall, "numpy_import_cpu": peer_cpu, "target": TARGET,
                   "results": results})
    return 0
