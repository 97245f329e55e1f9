"""`affordance-ros bench startup`: how long the installed command takes to start, and what it imports.

Each command (`--help`, and `predict` on a small model) runs as a user runs it, the installed
`affordance-ros` in a new process: its wall time (the shortest of a few runs: the least disturbed by other
work), and under `python -X importtime` the time its imports take and whether any of the modules only
other commands need (rclpy, rosbags, matplotlib, scipy) was loaded. The peer, measured in the same run:
`python -c "import numpy"`, the least any command that touches an array pays.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ...core import benchmark_network
from .common import fmt_seconds, markdown_table, output_dir, write_results

# Loaded only by the commands that need them (test/test_packaging.py holds it for --help and predict).
HEAVY = ("rclpy", "rosbags", "matplotlib", "scipy")
TARGET = 0.3  # seconds: what --help and predict may take to start (issue 19)


def installed_command() -> str:
    """The `affordance-ros` next to this Python (the install being measured), else the one on PATH."""
    found = shutil.which("affordance-ros", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                                   os.environ.get("PATH", "")]))
    if found is None:
        raise SystemExit("affordance-ros bench startup: error: no affordance-ros command installed next to "
                         f"{sys.executable} or on PATH")
    return found


def wall_time(argv: list[str], repeats: int) -> float:
    """Shortest wall time of ``argv`` over ``repeats`` runs (seconds), each checked to succeed."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


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
        peer = wall_time([sys.executable, "-c", "import numpy"], repeats)
        rows, results = [], {}
        for name, argv in commands.items():
            wall = wall_time(argv, repeats)
            imports, modules = import_profile(argv)
            heavy = sorted(m for m in HEAVY if m in modules)
            results[name] = {"wall": wall, "imports": imports, "heavy_modules_loaded": heavy,
                             "ratio_to_numpy_import": wall / peer}
            rows.append([f"`affordance-ros {name}`", fmt_seconds(wall), fmt_seconds(imports), f"{wall / peer:.2f}",
                         ", ".join(heavy) or "none", "yes" if wall <= TARGET else "NO"])
    print(f"bench startup: {command}, shortest of {repeats} runs; peer `python -c \"import numpy\"` "
          f"{fmt_seconds(peer)}")
    table = markdown_table(["command", "wall", "imports (-X importtime)", "× numpy import",
                            f"of {', '.join(HEAVY)} loaded", f"≤ {TARGET} s"], rows)
    write_results(out, "startup", table, args.quick,
                  {"command": command, "numpy_import": peer, "target": TARGET, "results": results})
    return 0
