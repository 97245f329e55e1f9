#!/usr/bin/env bash
# Build/install (tools/setup_env.sh), lint (ruff, pyproject.toml), then run the
# tests in test/ against the INSTALLED package (.venv, or install/ when ROS 2 is
# sourced). A lint error fails the run before any test.
#   ./test.sh                      lint + all tests
#   ./test.sh -k learn -x          extra pytest arguments
#   ./test.sh test/test_foo.py     only these paths (lint still runs)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"

"$ROOT/tools/setup_env.sh"

# Keep this run's DDS traffic to itself: this host only, a domain of its own.
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
# AFFORDANCE_ROS_TEST_DOMAIN_ID pins it (parallel checkouts on one host, each its own domain).
export ROS_DOMAIN_ID=${AFFORDANCE_ROS_TEST_DOMAIN_ID:-$(( $$ % 101 + 1 ))}
ROS_LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/affordance_ros-test.XXXXXX")"
export ROS_LOG_DIR
# Never put the current directory on sys.path (also for `python -m` in
# subprocesses): the source tree's affordance_ros/ has no .msg/.srv.
export PYTHONSAFEPATH=1

if [[ -n "${ROS_DISTRO:-}" ]] && command -v colcon >/dev/null 2>&1 \
    && [[ "${AFFORDANCE_ROS_FORCE_VENV:-0}" != 1 ]]; then
  set +u
  # shellcheck disable=SC1091
  source "$ROOT/install/setup.bash"
  set -u
  PYTEST=(python3 -P -m pytest)
  RUFF=(python3 -m ruff)
else
  PYTEST=("$ROOT/.venv/bin/pytest")
  RUFF=("$ROOT/.venv/bin/ruff")
fi

if ! "${RUFF[@]}" --version >/dev/null 2>&1; then
  echo "test.sh: ruff is not installed (pip install ruff, or use the .venv tools/setup_env.sh builds)" >&2
  exit 1
fi
if ! "${RUFF[@]}" check --quiet "$ROOT"; then
  echo "test.sh: lint errors (above); fix them, or see what ruff can fix: ruff check --fix ." >&2
  exit 1
fi

# Default to test/ unless paths were given.
have_path=0
for arg in "$@"; do
  if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then have_path=1; fi
done
DEFAULT_PATHS=()
if (( ! have_path )); then DEFAULT_PATHS=(test); fi

rc=0
"${PYTEST[@]}" "${DEFAULT_PATHS[@]}" "$@" || rc=$?
if (( rc == 0 )); then
  rm -rf "$ROS_LOG_DIR"
else
  echo "test.sh: pytest exited with $rc; ROS logs kept in $ROS_LOG_DIR" >&2
fi
exit "$rc"
