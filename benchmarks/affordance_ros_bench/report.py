"""Where a benchmark's results go and how they are written: the machine they ran on, timing, tables, plots."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np


def output_dir(path: str | os.PathLike) -> Path:
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def machine() -> dict:
    """CPU model, cores usable by this process, Python and numpy versions, BLAS threads."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu": cpu,
        "cores_online": os.cpu_count(),
        "cores_usable": usable,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "(unset)"),
        "commit": _git_commit(),
    }


def _git_commit() -> str | None:
    """The commit of the git checkout the command runs in, if any (with '+' when it has local changes)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=5).stdout.strip()
        return head.stdout.strip() + ("+" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def machine_line() -> str:
    m = machine()
    return (f"{m['cpu']}, {m['cores_usable']} of {m['cores_online']} cores usable, Python {m['python']}, "
            f"numpy {m['numpy']}, OPENBLAS_NUM_THREADS={m['openblas_threads']}")


def best_time(fn: Callable[[], object], repeats: int = 3) -> tuple[float, float, object]:
    """Shortest wall time and shortest CPU time of this process over ``repeats`` calls (seconds;
    the least disturbed by other work on a shared machine), and the last call's result."""
    wall, cpu, result = [], [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(wall), min(cpu), result


def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_json(path: Path, doc) -> None:
    """Compact JSON, floats to 6 significant digits (the measurements are not more precise)."""
    path.write_text(json.dumps(_rounded(doc), separators=(",", ":"), default=_jsonable) + "\n")


def write_results(out: Path, name: str, table: str, quick: bool, results: dict) -> None:
    """``NAME_table.md`` and ``NAME_results.json`` (the machine, quick or not, then ``results``) in ``out``;
    the table printed, and where both went."""
    (out / f"{name}_table.md").write_text(table)
    write_json(out / f"{name}_results.json", {"machine": machine(), "quick": quick, **results})
    print()
    print(table)
    print(f"wrote {out / f'{name}_table.md'}")
    print(f"wrote {out / f'{name}_results.json'}")


def _rounded(x):
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_rounded(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(f"{float(x):.6g}")
    return x


def _jsonable(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def pyplot():
    """matplotlib.pyplot with the file-only Agg backend (no display needed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def fmt_seconds(t: float) -> str:
    if t < 1e-5:
        return f"{t * 1e6:.2f} µs"
    if t < 1e-3:
        return f"{t * 1e6:.0f} µs"
    if t < 1:
        return f"{t * 1e3:.1f} ms"
    return f"{t:.2f} s"
