"""`affordance-ros`: learn a model from recorded cases, and ask it questions, without ROS; ``replay``, ``record``
and ``call`` need ROS 2 (they join a ROS graph).

    affordance-ros learn --cases cases.csv --config config.json --structure k2 --out model.json
    affordance-ros predict --model model.json --query action --sensor obj_vel=7.2 --value Shape=box
    affordance-ros suggest --model model.json --candidate size=9.7,shape=0.2 --candidate Shape=box
    affordance-ros import --cases robot_bag/ more.csv --db cases.db
    affordance-ros export --cases cases.db --out cases.csv     (or --out new_bag/ --storage mcap)
    affordance-ros replay robot_bag/ --rate 10 --clock          (needs ROS 2: publishes into the graph)
    affordance-ros record new_bag/ --trials 300                 (needs ROS 2: subscribes to the graph)
    affordance-ros call predict --query action --sensor obj_vel=9.7   (asks the running learner node)
    affordance-ros export-model model.json --format bif --out model.bif
    affordance-ros import-model expert.bif --config config.json --out model.json
    affordance-ros show model.json --out model.png [--cpts]
    affordance-ros simulate --scenario tools --out cases.csv
    affordance-ros evaluate --cases cases.csv --config tools --leave-out object_id --targets Effect

This module is what runs first: the list of commands (``tools/command_names.py``), and `--help`, without numpy or
the core (the commands are ``tools/commands.py``, imported once a command is named). Bags are rosbag2 (sqlite3 or
mcap) holding the Action/Features topics; see docs/bags.md.
"""

from __future__ import annotations

import sys
import textwrap

from .command_names import COMMANDS, DESCRIPTION, PROG


def overview() -> str:
    """What ``affordance-ros`` alone and ``affordance-ros --help`` print: the commands, a line each."""
    width = max(map(len, COMMANDS))
    lines = [f"usage: {PROG} COMMAND [options]    ({PROG} COMMAND --help: its options)", "",
             *textwrap.wrap(f"{PROG}: {DESCRIPTION}.", width=100), "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in COMMANDS.items()]
    lines += ["", "docs/cli.md has every command with examples."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(overview())
        return 0 if argv else 2
    from .commands import run  # (numpy, the core and the data layer: once a command is named)
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
