"""The executables (setup.cfg's console scripts): ``affordance-ros``, ``learner_node``, ``simulated_robot``,
``replay`` and ``record``, and ``demo`` (what ./demo.sh runs). Each imports the module it runs only once it is
called, inside its own handling:

- Ctrl-C while it starts (numpy, scipy and rclpy take a second or more to import) is one line, not the traceback
  of an import: ``affordance-ros learn: interrupted`` and exit status 130 as any command interrupted; a node's
  ``learner_node: interrupted``, exit status 0 as every stop of a node (docs/node.md).
- Without ROS 2 a node executable says in one line what to install and exits 2, as ``replay`` and ``record`` say
  it (``affordance_ros.nodes`` cannot even be imported then, so its modules cannot say it themselves).
"""

from __future__ import annotations

import importlib
import sys

from .. import install_hint

INTERRUPTED = 130  # the exit status of a command stopped by Ctrl-C (SIGINT), as the shell reports one it killed


def affordance_ros() -> int:
    return run("affordance-ros", "cli")


def learner_node() -> int:
    return run("learner_node", "..nodes.learner.learner_node", interrupted=0)


def simulated_robot() -> int:
    return run("simulated_robot", "..nodes.simulation.simulated_robot", interrupted=0)


def replay() -> int:
    return run("replay", "replay")


def record() -> int:
    return run("record", "record")


def demo() -> int:
    return run("demo", "demo")


def run(prog: str, module: str, interrupted: int = INTERRUPTED) -> int:
    """main() of ``module`` (relative to this package), for the executable ``prog``; ``interrupted``: the exit
    status when Ctrl-C comes before main() handles it itself."""
    try:
        try:
            main = importlib.import_module(module if module.startswith(".") else f".{module}", __package__).main
        except ModuleNotFoundError as exc:
            if install_hint(exc.name) is None:
                raise
            print(f"{prog}: error: {install_hint(exc.name)}", file=sys.stderr)
            return 2
        return main()
    except KeyboardInterrupt:
        print(f"{_named(prog)}: interrupted", file=sys.stderr)
        return interrupted


def _named(prog: str) -> str:
    """How ``prog`` names itself in a message: with the command (``affordance-ros learn``), as its own do."""
    command = sys.argv[1] if prog == "affordance-ros" and len(sys.argv) > 1 else ""
    return f"{prog} {command}" if command and not command.startswith("-") else prog
