#!/usr/bin/env bash
# Build and install affordance_ros (messages, services, Python package,
# executables). Idempotent; quick when nothing changed. Status goes to stderr.
#
# - ROS 2 sourced (ROS_DISTRO set and colcon on PATH): `colcon build` into
#   install/ (then: source install/setup.bash).
# - Otherwise: ROS 2 "kilted" from PyPI wheels in .venv/ at the repository
#   root (requirements-ros.txt; pip runs only when that file changed), then
#   plain CMake builds and installs the package into .venv itself, so that
#   .venv/bin/python imports affordance_ros (with .msg/.srv/.action) from anywhere.
#   Why each step is there: the wheels' metadata does not pull in every build
#   tool (requirements-ros.txt lists them), their CMake exports name the wheel
#   builder's include dirs (tools/fix_wheel_cmake_paths.py rewrites them), and
#   plain CMake needs no sourced environment (AMENT_PREFIX_PATH is set below).
#
# Environment: PYTHON (default python3) picks the interpreter for a new .venv;
# AFFORDANCE_ROS_FORCE_VENV=1 uses .venv even when ROS 2 is sourced.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
BUILD="$ROOT/build"
LOGDIR="$ROOT/log/setup_env"
JOBS="$(nproc 2>/dev/null || echo 2)"
START=$SECONDS

say() { echo "setup_env: $*" >&2; }
die() { echo "setup_env: ERROR: $*" >&2; exit 1; }

# run_step NAME CMD...: run quietly, output to log/setup_env/NAME.log;
# on failure show the end of that log and stop.
run_step() {
  local name=$1; shift
  local log="$LOGDIR/$name.log"
  mkdir -p "$LOGDIR"
  if ! "$@" >"$log" 2>&1; then
    echo "setup_env: ERROR: step '$name' failed: $*" >&2
    echo "----- last lines of $log -----" >&2
    tail -n 60 "$log" >&2
    echo "----- (full log: $log) -----" >&2
    exit 1
  fi
}

# One set-up at a time per checkout (parallel ./test.sh runs share build/).
if command -v flock >/dev/null 2>&1; then
  LOCK="${TMPDIR:-/tmp}/affordance_ros-setup-$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1).lock"
  exec 9>"$LOCK"
  flock 9
fi

use_colcon() {
  [[ -n "${ROS_DISTRO:-}" ]] && command -v colcon >/dev/null 2>&1 \
    && [[ "${AFFORDANCE_ROS_FORCE_VENV:-0}" != 1 ]]
}

if use_colcon; then
  # --paths: exactly this package (a recursive search would also find the
  # package.xml files inside .venv/share).
  run_step colcon-build colcon build --paths "$ROOT" \
    --build-base "$BUILD" --install-base "$ROOT/install" \
    --event-handlers console_direct- console_stderr- status- \
    --cmake-args -DCMAKE_BUILD_TYPE=Release
  say "built with colcon for ROS 2 $ROS_DISTRO in $((SECONDS - START)) s; use it with: source install/setup.bash"
  exit 0
fi

# ---------------------------------------------------------------------------
# venv + PyPI wheels
# ---------------------------------------------------------------------------
PY="${PYTHON:-python3}"
command -v cmake >/dev/null 2>&1 || die "cmake not found (Debian: apt-get install cmake)"
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 \
  || die "no C++ compiler found (Debian: apt-get install build-essential)"

# A .venv whose interpreter no longer runs (moved repo, removed Python) is rebuilt.
if [[ -e "$VENV" ]] && ! "$VENV/bin/python" -c '' >/dev/null 2>&1; then
  say "existing .venv is broken; recreating it"
  rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  command -v "$PY" >/dev/null 2>&1 || die "$PY not found (set PYTHON=/path/to/python3.11+)"
  "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "$PY is $("$PY" -V 2>&1); Python >= 3.11 is needed"
  "$PY" -c 'import ensurepip, venv' >/dev/null 2>&1 \
    || die "$PY cannot create a venv (Debian: apt-get install python3-venv)"
  say "creating .venv with $("$PY" -V 2>&1)"
  run_step venv "$PY" -m venv "$VENV"
fi

# pip only when requirements-ros.txt (or this set-up) changed since last time.
STAMP="$VENV/.affordance_ros-requirements.sha256"
REQ_HASH="$(cat requirements-ros.txt tools/fix_wheel_cmake_paths.py | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$STAMP" 2>/dev/null || true)" != "$REQ_HASH" ]]; then
  say "installing requirements-ros.txt into .venv (pip; about half a minute)"
  rm -f "$STAMP"
  run_step pip-install "$VENV/bin/python" -m pip install --no-input \
    --disable-pip-version-check -r requirements-ros.txt
  # The wheels' CMake exports name the wheel builder's include dirs.
  run_step fix-cmake-paths "$VENV/bin/python" tools/fix_wheel_cmake_paths.py "$VENV"
  echo "$REQ_HASH" >"$STAMP"
fi

# A build/ configured elsewhere (moved checkout) or for another prefix starts over.
if [[ -f "$BUILD/CMakeCache.txt" ]] && ! grep -qxF "CMAKE_INSTALL_PREFIX:PATH=$VENV" "$BUILD/CMakeCache.txt"; then
  say "build/ was configured for another location; starting it over"
  rm -rf "$BUILD"
fi

# Always configure + build + install: incremental and quick, and it picks up
# edits to the Python sources and new launch/ or config/ directories.
export AMENT_PREFIX_PATH="$VENV"
export CMAKE_PREFIX_PATH="$VENV"
run_step cmake-configure cmake -S "$ROOT" -B "$BUILD" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$VENV" \
  -DCMAKE_PREFIX_PATH="$VENV" \
  -DPython3_EXECUTABLE="$VENV/bin/python" \
  -DPython3_FIND_VIRTUALENV=ONLY \
  -DBUILD_TESTING=OFF
run_step cmake-build cmake --build "$BUILD" -j "$JOBS"
run_step cmake-install cmake --install "$BUILD"

# `cmake --install` never deletes: drop installed files of this package that
# this install did not write (modules renamed or deleted in the source tree),
# and directories left with nothing but __pycache__ (they would still import
# as namespace packages).
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
MANIFEST="$BUILD/install_manifest.txt"
if [[ -s "$MANIFEST" ]]; then
  for dir in "$SITE/affordance_ros" "$VENV/lib/affordance_ros" "$VENV/share/affordance_ros"; do
    [[ -d "$dir" ]] || continue
    comm -23 <(find "$dir" -type f -not -path '*/__pycache__/*' | LC_ALL=C sort) \
             <(LC_ALL=C sort "$MANIFEST") \
      | while IFS= read -r stale; do rm -f -- "$stale"; done
  done
  find "$SITE/affordance_ros" -depth -mindepth 1 -type d -not -name __pycache__ -print0 \
    | while IFS= read -r -d '' d; do
        if [[ -z "$(find "$d" -mindepth 1 -not -path '*/__pycache__*' -print -quit)" ]]; then
          rm -rf -- "$d"
        fi
      done
fi

say "affordance_ros installed into .venv in $((SECONDS - START)) s (. .venv/bin/activate, or run .venv/bin/python)"
