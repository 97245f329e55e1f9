#!/usr/bin/env bash
# Build/install, lint (ruff, pyproject.toml), then run the tests in test/ against an INSTALLED package.
# ./test.sh --help says what it runs and how long each part takes (usage() below).
#
# Which install the tests run against: AFFORDANCE_ROS_TEST_INSTALL (docs/install.md)
#   venv    (the default with arguments) .venv: ROS 2 from the PyPI wheels and the package built by plain CMake
#           (tools/setup_env.sh); with ROS 2 sourced, colcon into install/ instead. All tests.
#   pip     a throwaway venv without ROS: `pip install .`, then `pip install ".[bags,eval]"`; the tests that
#           need no ROS (the packaging and command-line tests on the first, the other core, data and tools
#           tests on the second).
#   colcon  `colcon build` against .venv's ROS 2 wheels into install/, `source install/setup.bash`;
#           the node, interface and packaging tests.
#   all     (the default without arguments) venv, pip, colcon one after the other: what CI runs (.ci/run).
#           Each test runs once, against the install it is about: pip and colcon their tests above, .venv
#           the others (the docs' examples, the layers, and the core, data and tools tests that need ROS);
#           the packaging tests against each. Running every test on every install took CI past 90 min.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"

# The tests a change to the core or data layers needs (and the layers' rules): no DDS, no node started.
QUICK_PATHS=(test/core test/data test/test_layers.py)

usage() {
  cat <<'EOF'
usage: ./test.sh [--quick] [PATH ...] [PYTEST OPTION ...]
       ./test.sh --help

Builds and installs the package (tools/setup_env.sh: .venv, ROS 2 from PyPI wheels; quick when nothing
changed), lints it (ruff: a lint error fails the run before any test), then runs the tests in test/ with
pytest against the installed package, never the source tree.

  ./test.sh                 everything, on every install, one after the other: what CI runs (.ci/run).
                            About 30 min on the 2-core CI machine (22 min quiet, 45 min loaded):
                              venv    ~10 min  the docs' examples, the layers, packaging, the core, data
                                               and tools tests that need ROS, the benchmarks' own tests
                              pip     ~7 min   `pip install .` in a new venv without ROS: the packaging,
                                               command-line, core, data and tools tests that need no ROS
                              colcon  ~10 min  `colcon build`: the nodes end to end over DDS (test/nodes,
                                               about 8 min of it), the interfaces, packaging
  ./test.sh --quick         ~5 min: what a change to the core or data layers needs (lint, then
                            test/core, test/data and test/test_layers.py on .venv; no DDS, no node)
  ./test.sh PATH...         only these tests (files, folders, file::test), on .venv; e.g.
                            ./test.sh test/nodes/test_end_to_end.py -x   (about 1 min)
  ./test.sh -k learn -x     extra pytest options go to pytest (on .venv, every test unless paths are given)

Environment:
  AFFORDANCE_ROS_TEST_INSTALL      venv, pip, colcon or all: which install the tests run against
                                   (default: all without arguments, else venv)
  AFFORDANCE_ROS_TEST_DOMAIN_ID    the ROS domain of this run (parallel checkouts on one host: one each)
  AFFORDANCE_ROS_TEST_RUN_LIMIT    seconds one pytest run may take before it is ended with every stack
                                   (default 3000)
EOF
}

QUICK=0
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --quick) QUICK=1; shift ;;
esac

if (( QUICK )); then INSTALL=venv
elif [ $# -eq 0 ]; then INSTALL="${AFFORDANCE_ROS_TEST_INSTALL:-all}"; else INSTALL="${AFFORDANCE_ROS_TEST_INSTALL:-venv}"; fi
case "$INSTALL" in
  venv|pip|colcon) KINDS=("$INSTALL") ;;
  all) KINDS=(venv pip colcon) ;;
  *) echo "test.sh: AFFORDANCE_ROS_TEST_INSTALL=$INSTALL: use venv, pip, colcon or all" >&2; exit 2 ;;
esac

# Keep this run's DDS traffic to itself: this host only, a domain of its own.
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
# AFFORDANCE_ROS_TEST_DOMAIN_ID pins it (parallel checkouts on one host, each its own domain).
export ROS_DOMAIN_ID=${AFFORDANCE_ROS_TEST_DOMAIN_ID:-$(( $$ % 101 + 1 ))}
ROS_LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/affordance_ros-test.XXXXXX")"
export ROS_LOG_DIR
# Never put the current directory on sys.path (also for `python -m` in
# subprocesses): the source tree's affordance_ros/ has no .msg/.srv.
export PYTHONSAFEPATH=1

# Paths given on the command line replace each install's default ones.
have_path=0
for arg in "$@"; do
  if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then have_path=1; fi
done

ros_sourced() {
  [[ -n "${ROS_DISTRO:-}" ]] && command -v colcon >/dev/null 2>&1 && [[ "${AFFORDANCE_ROS_FORCE_VENV:-0}" != 1 ]]
}

linted=0
lint() {  # lint PYTHON: ruff of that interpreter, once per run
  (( linted )) && return 0
  if ! "$1" -m ruff --version >/dev/null 2>&1; then
    echo "test.sh: ruff is not installed (pip install ruff, or use the .venv tools/setup_env.sh builds)" >&2
    exit 1
  fi
  if ! "$1" -m ruff check --quiet "$ROOT"; then
    echo "test.sh: lint errors (above); fix them, or see what ruff can fix: ruff check --fix ." >&2
    exit 1
  fi
  linted=1
}

# pytest_on KIND PREFIX PYTHON DEFAULT_PATHS... -- OPTIONS...: the tests against the install in PREFIX
# (test/test_packaging.py checks that they really import it), with this script's arguments.
USER_ARGS=("$@")
pytest_on() {
  local kind=$1 prefix=$2 python=$3; shift 3
  local defaults=()
  while [[ "$1" != -- ]]; do defaults+=("$1"); shift; done
  shift
  if (( have_path )); then defaults=(); fi
  echo "test.sh: $kind install ($prefix): pytest ${defaults[*]} $* ${USER_ARGS[*]}" >&2
  # Each run's temporary files in its own folder: pytest's shared /tmp/pytest-of-$USER keeps the last three
  # sessions' only, so a second ./test.sh (another checkout) would remove a running one's files. A hang that
  # got past pytest.ini's timeouts ends the run after RUN_LIMIT seconds, with SIGABRT: Python's faulthandler
  # then prints every thread's stack.
  AFFORDANCE_ROS_TEST_INSTALL=$kind AFFORDANCE_ROS_TEST_PREFIX=$prefix \
    timeout --signal=ABRT --kill-after=30 "$RUN_LIMIT" "$python" -X faulthandler -m pytest --durations=10 \
    --basetemp "$ROS_LOG_DIR/pytest-$kind-$((++pytest_runs))" "${defaults[@]}" "$@" "${USER_ARGS[@]}"
}
rc=0
pytest_runs=0
RUN_LIMIT=${AFFORDANCE_ROS_TEST_RUN_LIMIT:-3000}  # seconds one pytest run may take (all tests in one: ~30 min)

test_venv() {
  "$ROOT/tools/setup_env.sh"
  if ros_sourced; then
    ( set +u
      # shellcheck disable=SC1091
      source "$ROOT/install/setup.bash"
      set -u
      lint python3
      venv_tests venv "$ROOT/install/affordance_ros" python3 ) || rc=$?
  else
    lint "$ROOT/.venv/bin/python"
    PATH="$ROOT/.venv/bin:$PATH" venv_tests venv "$ROOT/.venv" "$ROOT/.venv/bin/python" || rc=$?
  fi
}

# venv_tests KIND PREFIX PYTHON: all tests, or under `all` those that the pip and colcon installs do not run
venv_tests() {
  if (( QUICK )); then
    pytest_on "$@" "${QUICK_PATHS[@]}" --
  elif [[ "$INSTALL" != all ]] || (( have_path )); then
    pytest_on "$@" test --
  else
    local status=0
    pytest_on "$@" test/test_docs.py test/test_layers.py test/test_packaging.py -- || status=$?
    pytest_on "$@" test/core test/data test/tools -- -m ros || status=$?
    pytest_on "$@" test/bench -- || status=$?
    return "$status"
  fi
}

# `pip install .` builds in the source tree (build/lib, affordance_ros.egg-info): cleaned before, so that a
# module deleted from the source tree does not come back from there, and after.
clean_setuptools_output() {
  rm -rf "$ROOT/build/lib" "$ROOT/build/bdist."* "$ROOT/affordance_ros.egg-info"
}

test_pip() {
  # A new venv of the plain Python, no ROS: what `pip install .` gives a user. Versions as in .venv.
  local dir
  dir="$(mktemp -d "${TMPDIR:-/tmp}/affordance_ros-pip.XXXXXX")"
  local venv="$dir/venv" log="$ROOT/log/test_pip"
  mkdir -p "$log"
  "${PYTHON:-python3}" -m venv "$venv"
  clean_setuptools_output
  local pip=("$venv/bin/python" -m pip install --no-input --no-compile --disable-pip-version-check
             -c requirements-ros.txt -c requirements-bench.txt)
  echo "test.sh: pip install . into a new venv ($dir)" >&2
  "${pip[@]}" "$ROOT" pytest pytest-timeout ruff >"$log/pip-install.log" 2>&1 \
    || { tail -n 40 "$log/pip-install.log" >&2; exit 1; }
  lint "$venv/bin/python"
  PATH="$venv/bin:$PATH" pytest_on pip "$venv" "$venv/bin/python" test/test_packaging.py test/tools/test_cli.py \
    test/tools/test_cli_models.py -- -m "not ros" || rc=$?
  echo "test.sh: pip install \".[bags,eval]\" into the same venv" >&2
  "${pip[@]}" "$ROOT[bags,eval]" >"$log/pip-install-extras.log" 2>&1 \
    || { tail -n 40 "$log/pip-install-extras.log" >&2; exit 1; }
  PATH="$venv/bin:$PATH" pytest_on pip "$venv" "$venv/bin/python" test/core test/data test/tools test/test_layers.py \
    -- -m "not ros" --ignore=test/tools/test_cli.py --ignore=test/tools/test_cli_models.py || rc=$?
  rm -rf "$dir"
  clean_setuptools_output
}

test_colcon() {
  "$ROOT/tools/setup_env.sh" colcon
  ( export AMENT_PREFIX_PATH="$ROOT/.venv"
    set +u
    # shellcheck disable=SC1091
    source "$ROOT/install/setup.bash"
    set -u
    lint "$ROOT/.venv/bin/python"
    pytest_on colcon "$ROOT/install/affordance_ros" "$ROOT/.venv/bin/python" test/nodes test/test_interfaces.py \
      test/test_packaging.py -- ) || rc=$?
}

for kind in "${KINDS[@]}"; do
  start=$SECONDS
  "test_$kind"
  echo "test.sh: $kind install tested in $((SECONDS - start)) s" >&2
done

if (( rc == 0 )); then
  rm -rf "$ROS_LOG_DIR"
else
  echo "test.sh: pytest exited with $rc; ROS logs and the tests' temporary files kept in $ROS_LOG_DIR" >&2
fi
exit "$rc"
