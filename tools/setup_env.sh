#!/usr/bin/env bash
# Build and install affordance_ros (messages, services, Python package,
# executables). Idempotent; quick when nothing changed. Status goes to stderr.
#
#   tools/setup_env.sh          .venv (below), or colcon when ROS 2 is sourced
#   tools/setup_env.sh colcon   colcon against .venv's ROS 2 wheels (no ROS install)
#   tools/setup_env.sh --print-inputs   what decides whether the venv's install is up to date (below), and exit
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
# - colcon: the same .venv (without the plain CMake build), colcon from
#   requirements-colcon.txt into it, then `colcon build` into install/ as on a
#   ROS 2 machine (then: export AMENT_PREFIX_PATH=$PWD/.venv; source
#   install/setup.bash). What CI checks the colcon build with (test.sh).
#
# Environment: PYTHON (default python3) picks the interpreter for a new .venv;
# AFFORDANCE_ROS_FORCE_VENV=1 uses .venv even when ROS 2 is sourced.
set -euo pipefail
MODE="${1:-venv}"
case "$MODE" in
  venv|colcon|--print-inputs) ;;
  *) echo "usage: tools/setup_env.sh [colcon | --print-inputs]" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
BUILD="$ROOT/build"
LOGDIR="$ROOT/log/setup_env"
JOBS="$(nproc 2>/dev/null || echo 2)"
START=$SECONDS

say() { echo "setup_env: $*" >&2; }
die() { echo "setup_env: ERROR: $*" >&2; exit 1; }

# The inputs of the build: every file of the checkout (git's tracked and untracked-but-not-ignored files; without
# git, every file but the build's own folders and __pycache__) except those below, which CMakeLists.txt, setup.py
# and setup.cfg never read or install, and the top-level hidden ones (.ci/, .git*). So a new file or folder counts
# without being listed here. (Kept: README.md, setup.cfg's long_description; pyproject.toml, read by setuptools.)
NOT_BUILT=(test docs test.sh demo.sh benchmarks requirements-bench.txt requirements-colcon.txt tools/setup_bench.sh)
# input_digests: "sha256  path" of each input (relative to the root, C-sorted): their names and contents.
input_digests() {
  local x excluded=()
  if command -v git >/dev/null 2>&1 \
      && [[ "$(git rev-parse --show-toplevel 2>/dev/null)" == "$(pwd -P)" ]]; then
    for x in "${NOT_BUILT[@]}" '.*'; do excluded+=(":(exclude)$x"); done
    git ls-files -z -co --exclude-standard -- . "${excluded[@]}"
  else  # not a git checkout (an unpacked tarball) or inside another one's folder
    for x in "${NOT_BUILT[@]}" '.*' build install log; do excluded+=(-path "./$x" -o); done
    find . \( "${excluded[@]}" -name __pycache__ -o -name '*.egg-info' \) -prune -o -type f -print0 \
      | sed -z 's|^\./||'
  fi | while IFS= read -r -d '' x; do  # (git lists tracked files deleted since)
    [[ -f "$x" && "$x" != */__pycache__/* && "$x" != __pycache__/* ]] && printf '%s\0' "$x"
  done | LC_ALL=C sort -z | xargs -0 -r sha256sum --
}
if [[ "$MODE" == --print-inputs ]]; then input_digests; exit 0; fi

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

# colcon_build BUILD_BASE [CMAKE ARGS...]: this package into install/.
# --paths: exactly this package (a recursive search would also find the
# package.xml files inside .venv/share).
colcon_build() {
  local build_base=$1; shift
  run_step colcon-build colcon --log-base "$ROOT/log/colcon" build --paths "$ROOT" \
    --build-base "$build_base" --install-base "$ROOT/install" \
    --event-handlers console_direct- console_stderr- status- \
    --cmake-args -DCMAKE_BUILD_TYPE=Release "$@"
}

if use_colcon; then
  colcon_build "$BUILD"
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

# pip only when requirements-ros.txt (or this set-up) changed since last time; one resolve of pinned
# versions. --no-compile: Python compiles a module when it is first imported, so that pip need not
# compile all of the ~100 packages' modules, most of which are never imported (it halves pip's time).
STAMP="$VENV/.affordance_ros-requirements.sha256"
REQ_HASH="$(cat requirements-ros.txt tools/fix_wheel_cmake_paths.py | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$STAMP" 2>/dev/null || true)" != "$REQ_HASH" ]]; then
  say "installing requirements-ros.txt into .venv (pip; about a minute)"
  rm -f "$STAMP"
  run_step pip-install "$VENV/bin/python" -m pip install --no-input --no-compile \
    --disable-pip-version-check -r requirements-ros.txt
  # The wheels' CMake exports name the wheel builder's include dirs.
  run_step fix-cmake-paths "$VENV/bin/python" tools/fix_wheel_cmake_paths.py "$VENV"
  echo "$REQ_HASH" >"$STAMP"
fi

# The benchmarks (benchmarks/: not part of the package, a distribution of their own, `affordance-ros-bench`) into
# .venv whenever a file of theirs changed; their dependency, matplotlib, is in requirements-ros.txt already.
BENCH_STAMP="$VENV/.affordance_ros-bench-sources.sha256"
BENCH_HASH="$(find benchmarks -type f -not -path '*/__pycache__/*' -not -path '*.egg-info*' -not -path 'benchmarks/build/*' \
  | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$BENCH_STAMP" 2>/dev/null || true)" != "$BENCH_HASH" ]]; then
  rm -f "$BENCH_STAMP"
  run_step pip-install-benchmarks "$VENV/bin/python" -m pip install --no-input --no-compile --disable-pip-version-check \
    --no-deps "$ROOT/benchmarks"
  rm -rf "$ROOT/benchmarks/build" "$ROOT/benchmarks/"*.egg-info
  echo "$BENCH_HASH" >"$BENCH_STAMP"
fi

export AMENT_PREFIX_PATH="$VENV"
export CMAKE_PREFIX_PATH="$VENV"

if [[ "$MODE" == colcon ]]; then
  STAMP="$VENV/.affordance_ros-colcon-requirements.sha256"
  HASH="$(cat requirements-colcon.txt requirements-ros.txt | sha256sum | cut -d' ' -f1)"
  if [[ "$(cat "$STAMP" 2>/dev/null || true)" != "$HASH" ]]; then
    say "installing requirements-colcon.txt into .venv (pip)"
    rm -f "$STAMP"
    run_step pip-install-colcon "$VENV/bin/python" -m pip install --no-input --no-compile --disable-pip-version-check \
      -r requirements-colcon.txt -c requirements-ros.txt
    echo "$HASH" >"$STAMP"
  fi
  # colcon and the CMake it runs find this venv's Python and ROS 2 packages through a link outside the
  # source tree: CMake refuses to install an exported target whose include directories (numpy's, here)
  # lie in the source tree but not in the install prefix, which a venv in the checkout would be.
  LINK="${TMPDIR:-/tmp}/affordance_ros-venv-$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)"
  ln -sfn "$VENV" "$LINK"
  export AMENT_PREFIX_PATH="$LINK" CMAKE_PREFIX_PATH="$LINK" VIRTUAL_ENV="$LINK" PATH="$LINK/bin:$PATH"
  colcon_build "$BUILD/colcon" -DPython3_EXECUTABLE="$LINK/bin/python" -DPython3_FIND_VIRTUALENV=ONLY \
    -DBUILD_TESTING=OFF
  say "built with colcon against .venv's ROS 2 in $((SECONDS - START)) s; use it with: "\
"export AMENT_PREFIX_PATH=$VENV; source install/setup.bash"
  exit 0
fi

# A build/ configured elsewhere (moved checkout) or for another prefix starts over.
if [[ -f "$BUILD/CMakeCache.txt" ]] && ! grep -qxF "CMAKE_INSTALL_PREFIX:PATH=$VENV" "$BUILD/CMakeCache.txt"; then
  say "build/ was configured for another location; starting it over"
  rm -rf "$BUILD"
fi

# Nothing to do when no input of the build changed since the last install here (their names and contents
# hashed: input_digests, above) and every file it installed is still there: a rerun of the demo starts at once.
# Else configure + build + install: incremental, and it picks up edits to the Python sources and new files of
# setup.cfg's data files.
INSTALLED="$BUILD/.affordance_ros-installed.sha256"
INPUT_HASH="$(input_digests | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$INSTALLED" 2>/dev/null || true)" == "$INPUT_HASH" && -s "$BUILD/install_manifest.txt" ]] \
    && grep -qxF "CMAKE_INSTALL_PREFIX:PATH=$VENV" "$BUILD/CMakeCache.txt" 2>/dev/null \
    && xargs -d '\n' -a "$BUILD/install_manifest.txt" ls -d >/dev/null 2>&1; then
  say "affordance_ros in .venv is up to date (no input of its build changed since it was installed)"
  exit 0
fi
rm -f "$INSTALLED"

# Without the C++ type support: the venv has no rclcpp to use it (half the build).
run_step cmake-configure cmake -S "$ROOT" -B "$BUILD" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$VENV" \
  -DCMAKE_PREFIX_PATH="$VENV" \
  -DPython3_EXECUTABLE="$VENV/bin/python" \
  -DPython3_FIND_VIRTUALENV=ONLY \
  -DAFFORDANCE_ROS_CXX_INTERFACES=OFF \
  -DBUILD_TESTING=OFF
run_step cmake-build cmake --build "$BUILD" -j "$JOBS"
run_step cmake-install cmake --install "$BUILD"

# `cmake --install` never deletes: drop installed files of this package that
# this install did not write (modules renamed or deleted in the source tree,
# the C++ type support of an earlier build), and directories left with nothing
# but __pycache__ (they would still import as namespace packages).
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
MANIFEST="$BUILD/install_manifest.txt"
if [[ -s "$MANIFEST" ]]; then
  for dir in "$SITE/affordance_ros" "$VENV/lib/affordance_ros" "$VENV/share/affordance_ros" \
             "$VENV/include/affordance_ros"; do
    [[ -d "$dir" ]] || continue
    comm -23 <(find "$dir" -type f -not -path '*/__pycache__/*' | LC_ALL=C sort) \
             <(LC_ALL=C sort "$MANIFEST") \
      | while IFS= read -r stale; do rm -f -- "$stale"; done
  done
  comm -23 <(find "$VENV/lib" -maxdepth 1 -name 'libaffordance_ros__*' | LC_ALL=C sort) \
           <(LC_ALL=C sort "$MANIFEST") \
    | while IFS= read -r stale; do rm -f -- "$stale"; done
  find "$VENV/include/affordance_ros" -depth -type d -empty -delete 2>/dev/null || true
  find "$SITE/affordance_ros" -depth -mindepth 1 -type d -not -name __pycache__ -print0 \
    | while IFS= read -r -d '' d; do
        if [[ -z "$(find "$d" -mindepth 1 -not -path '*/__pycache__*' -print -quit)" ]]; then
          rm -rf -- "$d"
        fi
      done
fi

echo "$INPUT_HASH" >"$INSTALLED"  # (hashed before the build read them: an edit made meanwhile is seen next time)
say "affordance_ros installed into .venv in $((SECONDS - START)) s (. .venv/bin/activate, or run .venv/bin/python)"
