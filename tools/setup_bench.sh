#!/usr/bin/env bash
# Opt-in: the benchmark-only extras (requirements-bench.txt: pgmpy, for
# `affordance-ros-bench pgmpy`) on top of tools/setup_env.sh's .venv.
# Never needed to build, run or test the package itself (test_bench.py skips
# the pgmpy comparison when pgmpy is missing). Idempotent; pip runs only when
# requirements-bench.txt or requirements-ros.txt changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"$ROOT/tools/setup_env.sh"

VENV="$ROOT/.venv"
STAMP="$VENV/.affordance_ros-bench-requirements.sha256"
HASH="$(cat requirements-bench.txt requirements-ros.txt | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$STAMP" 2>/dev/null || true)" != "$HASH" ]]; then
  echo "setup_bench: installing requirements-bench.txt into .venv (pip)" >&2
  rm -f "$STAMP"
  mkdir -p "$ROOT/log/setup_env"
  if ! "$VENV/bin/python" -m pip install --no-input --disable-pip-version-check \
      -r requirements-bench.txt -c requirements-ros.txt >"$ROOT/log/setup_env/pip-bench.log" 2>&1; then
    echo "setup_bench: ERROR: pip failed; see log/setup_env/pip-bench.log" >&2
    tail -n 30 "$ROOT/log/setup_env/pip-bench.log" >&2
    exit 1
  fi
  echo "$HASH" >"$STAMP"
fi
"$VENV/bin/python" -c 'import pgmpy, pyagrum; print(f"setup_bench: pgmpy {pgmpy.__version__}, pyAgrum {pyagrum.__version__} ready in .venv", flush=True)' >&2
