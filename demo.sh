#!/usr/bin/env bash
# Build/install if needed (tools/setup_env.sh), then run the demo:
#   ./demo.sh [demo arguments]
# Runs in the caller's directory: relative paths (--workdir, --picture) are the caller's.
set -euo pipefail
# (readlink -f: a link to demo.sh runs the repository's)
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"

"$ROOT/tools/setup_env.sh"

# -P: keep the current directory (perhaps the source tree, without .msg/.srv)
# off sys.path so that the installed package is imported. The demo through its
# entry point (tools/executables.py): Ctrl-C while it starts is one line too.
DEMO='import sys; from affordance_ros.tools.executables import demo; sys.exit(demo())'
if [[ -n "${ROS_DISTRO:-}" ]] && command -v colcon >/dev/null 2>&1 \
    && [[ "${AFFORDANCE_ROS_FORCE_VENV:-0}" != 1 ]]; then
  set +u
  # shellcheck disable=SC1091
  source "$ROOT/install/setup.bash"
  set -u
  exec python3 -P -c "$DEMO" "$@"
fi
exec "$ROOT/.venv/bin/python" -P -c "$DEMO" "$@"
