"""The whole job with no hardware: a simulated robot does trials, the learner node stores them,
learns the affordance network and answers predictions, printed next to the ground truth.

    ./demo.sh                      (or: python -m affordance_ros.tools.demo --trials 500 --structure mcmc)

The learner and the simulated robot are the real nodes, talking over DDS (this host only),
each on an executor of its own in this process; the demo calls the node's services like
any planner would. Database and model go to a temporary folder unless --workdir is given.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np

from ..core import STRUCTURES, AffordanceNetwork, format_arcs, predict, predict_batch
from ..core.ground_truth import sample_values
from ..share import default_config_path
from .progress import report_line_by_line
from .show import PICTURE_SUFFIXES, draw_model

HELD_OUT_TRIALS = 500
INTERRUPTED = 130  # the exit status of a command stopped by Ctrl-C (as the shell reports one killed by SIGINT)
PROG = "./demo.sh"
MAX_SEED = 2**31 - 1  # the simulated robot's 'seed' parameter's range
SETTINGS_FILE = "demo.json"  # in --workdir: the settings its cases.db was made with


class UsageError(Exception):
    """A mistake on the command line found before the demo starts: one line, exit status 2."""


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--trials", type=int, default=300, help="trials the robot does (default 300)")
    parser.add_argument("--rate", type=float, default=100.0, help="trials per second (default 100)")
    parser.add_argument("--structure", choices=STRUCTURES, default="average",
                        help="structure learning (default average: a sample of structures, answers averaged over it)")
    parser.add_argument("--sigma", type=float, default=1.0, help="sensor noise of the simulated robot (default 1.0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the ground truth and the trials (default 0)")
    parser.add_argument("--pair-by-stamp", action="store_true", help="send trials without ids (paired by stamp)")
    parser.add_argument("--workdir", type=Path,
                        help="keep the database and model here (default: a temporary folder); a later run with the "
                             "same --sigma and --seed adds its trials to the cases there and learns from all")
    parser.add_argument("--picture", type=Path,
                        help="where to draw the learned network (default: model.png in --workdir, else "
                             f"{default_picture()})")
    parser.add_argument("--verbose", action="store_true", help="show the nodes' info logs")
    args = parser.parse_args(argv)
    if args.trials < 1 or args.rate <= 0 or args.sigma <= 0:
        parser.error("--trials, --rate and --sigma must be positive")
    if not 0 <= args.seed <= MAX_SEED:
        parser.error(f"--seed must be from 0 to {MAX_SEED}")
    return args


def check_picture(picture: Path | None) -> None:
    """UsageError unless ``picture`` (None: the default) can be drawn into: its folder is made if missing."""
    if picture is None:
        return
    if picture.suffix.lower() not in PICTURE_SUFFIXES:
        raise UsageError(f"--picture {picture}: write a .png, .svg or .pdf file")
    make_folder(picture.parent, "--picture", f"{picture}: cannot make its folder {picture.parent}")


def make_folder(folder: Path, option: str, cannot: str) -> None:
    """Make ``folder`` if missing; UsageError (``option``, ``cannot``: what could not be done) when it is a file,
    cannot be made or cannot be written in."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option}: {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {cannot}: {exc.strerror}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {folder}: cannot write in this folder")


def data_settings(args) -> dict:
    """What the cases depend on: the ground truth and its sensor noise."""
    return {"sigma": args.sigma, "seed": args.seed}


def described(settings: dict) -> str:
    return f"--sigma {settings['sigma']:g} --seed {settings['seed']}"


def earlier_cases(args, workdir: Path) -> int:
    """How many cases --workdir's database holds from earlier runs. They are learned from too, so they must come
    from the same world: UsageError when they were made with other settings (or unknown ones)."""
    from ..data.storage import CaseStore, CaseStoreError  # (sqlite: only with --workdir)

    database = workdir / "cases.db"
    if not database.is_file():
        return 0
    try:
        with CaseStore(database, read_only=True) as store:
            held = store.count()
    except CaseStoreError as exc:
        raise UsageError(f"--workdir {workdir}: {exc}") from None
    if held == 0:
        return 0
    earlier, settings = read_settings(workdir / SETTINGS_FILE), data_settings(args)
    if earlier != settings:
        made = f"made with {described(earlier)}" if earlier else "made with unknown settings"
        raise UsageError(f"--workdir {workdir}: its cases.db holds {held} cases {made}, not {described(settings)}, "
                         f"and learning from both would mix two worlds: rerun with their settings to add to them, "
                         f"or give another --workdir (or remove {database})")
    return held


def read_settings(path: Path) -> dict | None:
    """The settings a demo wrote to ``path``; None when there are none."""
    try:
        settings = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return settings if isinstance(settings, dict) and settings.keys() == {"sigma", "seed"} else None


def prepare_workdir(args) -> int:
    """Check --picture and --workdir before anything starts; the cases --workdir holds already."""
    check_picture(args.picture)
    if args.workdir is None:
        return 0
    make_folder(args.workdir, "--workdir", f"{args.workdir}: cannot make this folder")
    held = earlier_cases(args, args.workdir)
    (args.workdir / SETTINGS_FILE).write_text(json.dumps(data_settings(args)) + "\n")
    return held


class Demo:
    """The two nodes, a client node, and the calls a planner would make."""

    def __init__(self, args, workdir: Path, held: int):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.parameter import Parameter
        from rclpy.signals import SignalHandlerOptions

        from ..nodes.learner.learner_node import LearnerNode
        from ..nodes.planner.affordance_client import AffordanceClient
        from ..nodes.planner.calls import LearnerRefused
        from ..nodes.simulation.simulated_robot import SimulatedRobot

        self.rclpy = rclpy
        self.refused = LearnerRefused
        # Without rclpy's signal handlers: Ctrl-C is a KeyboardInterrupt here, and the nodes are closed in order.
        rclpy.init(args=None if args.verbose else ["--ros-args", "--log-level", "warn"],
                   signal_handler_options=SignalHandlerOptions.NO)
        self.learner = LearnerNode(parameter_overrides=[
            Parameter("config_path", value=str(write_config(workdir / "config.json", args.sigma))),
            Parameter("database_path", value=str(workdir / "cases.db")),
            Parameter("model_path", value=str(workdir / "model.json")),
            Parameter("structure", value=args.structure),
            Parameter("status_period", value=0.0)])
        self.client = rclpy.create_node("affordance_demo")
        self.robot = SimulatedRobot(parameter_overrides=[
            Parameter("count", value=args.trials), Parameter("rate", value=args.rate),
            Parameter("sigma", value=args.sigma), Parameter("truth_seed", value=args.seed),
            # trials of their own: a rerun into --workdir adds new trials to the earlier ones, not the same again
            Parameter("seed", value=(args.seed + held) % (MAX_SEED + 1)),
            Parameter("use_trial_ids", value=not args.pair_by_stamp)])
        # the planner's client, made before an executor spins its node
        self.planner = AffordanceClient(self.client, timeout=120.0)
        self.executors = []
        for nodes in ((self.learner, self.client), (self.robot,)):
            executor = SingleThreadedExecutor()
            for node in nodes:
                executor.add_node(node)
            thread = threading.Thread(target=executor.spin, daemon=True)
            thread.start()
            self.executors.append((executor, thread))

    def learn(self):
        """The learn (the Learn action): a LearnReport; RuntimeError when the node cannot learn."""
        try:
            return self.planner.learn()
        except self.refused as exc:
            raise RuntimeError(f"learn failed: {exc}") from None

    def predict(self, query, sensors=None, values=None):
        """~/predict: a Prediction; RuntimeError (LearnerUnavailable, or the node's refusal) when there is none."""
        try:
            return self.planner.predict(query, values, sensors)
        except self.refused as exc:
            raise RuntimeError(f"predict failed: {exc}") from None

    def close(self):
        for executor, thread in self.executors:
            executor.shutdown(timeout_sec=5.0)
            thread.join(timeout=5.0)
        self.planner.destroy()
        for node in (self.robot, self.client, self.learner):
            node.destroy_node()
        self.rclpy.try_shutdown()


def write_config(path: Path, sigma: float) -> Path:
    """The shipped montesano configuration with the simulated robot's sensor noise."""
    doc = AffordanceNetwork.load(default_config_path()).to_dict()
    for variable in doc["variables"]:
        if variable["sensor"] and "stddevs" in variable["sensor"]:
            variable["sensor"]["stddevs"] = [sigma] * len(variable["sensor"]["stddevs"])
    AffordanceNetwork.from_dict(doc).save(path)
    return path


def collect(demo: Demo, trials: int, rate: float) -> int:
    deadline = time.monotonic() + trials / rate + 60.0
    shown = 0
    while time.monotonic() < deadline:
        stored = demo.learner.counts["stored"]
        if stored >= shown + max(1, trials // 4) or (stored == trials and shown < trials):
            print(f"  {stored:5d} trials stored")
            shown = stored
        if stored >= trials:
            return stored
        time.sleep(0.05)
    return demo.learner.counts["stored"]


def percent(p: float) -> str:
    return f"{100.0 * p:5.1f}%"


def print_distribution(title: str, variable, answer, truth: dict, actual: str | None = None) -> None:
    """The learned probability of each of ``variable``'s labels (``answer``, a Prediction), its 90 % credible
    interval (how sure the model is), and the ground truth's."""
    learned, intervals = answer.marginals[variable.name], answer.intervals.get(variable.name, {})
    print(f"  {title:<12} {'learned':>8} {'90 % interval':>14} {'truth':>8}")
    for label in variable.values:
        mark = "  <- what happened" if label == actual else ""
        print(f"  {label:<12} {percent(learned[label]):>8} {interval_text(intervals.get(label)):>14} "
              f"{percent(truth[label]):>8}{mark}")


def interval_text(interval) -> str:
    """'41-86%', or '-' without the posterior of the CPTs."""
    if interval is None or any(math.isnan(bound) for bound in interval):
        return "-"
    return f"{100.0 * interval[0]:.0f}-{100.0 * interval[1]:.0f}%"


def default_picture() -> Path:
    """Where the demo draws the learned network without --workdir (the work folder is removed at the end)."""
    return Path(tempfile.gettempdir()) / "affordance_ros-demo-model.png"


def run(args, workdir: Path, held: int) -> int:
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    demo = Demo(args, workdir, held)
    truth: AffordanceNetwork = demo.robot.truth
    try:
        print(f"Simulated robot: {args.trials} trials on the '{demo.robot.get_parameter('network').value}' "
              f"ground truth (sensor noise sigma {args.sigma:g}, seed {args.seed}), every action on every kind of "
              f"object equally often, {'paired by stamp' if args.pair_by_stamp else 'with trial ids'}.")
        print(f"Learner node: cases in {workdir / 'cases.db'}")
        if held:
            print(f"  it holds {held} cases of earlier runs with these settings already: they are learned from too, "
                  f"{held + args.trials} cases in all")
        stored = collect(demo, args.trials, args.rate)
        if stored != args.trials:
            print(f"error: {stored} of {args.trials} trials arrived; see the learner's warnings", file=sys.stderr)
            return 1

        print(f"\nLearning ({args.structure}) ...")
        learned = demo.learn()
        true_arcs = format_arcs(truth.arcs)
        probability = learned.arc_probabilities or dict.fromkeys(learned.arcs, 1.0)
        print(f"  {learned.num_cases} cases, {learned.duration:.2f} s, log-likelihood {learned.log_likelihood:.1f}")
        print(f"  the ground truth's {len(true_arcs)} arcs, each with its probability under the learned structures:")
        print(textwrap.fill(", ".join(f"{arc} {probability.get(arc, 0.0):.2f}" for arc in true_arcs), width=100,
                            initial_indent="    ", subsequent_indent="    "))
        extra = [f"{arc} {p:.2f}" for arc, p in probability.items() if arc not in true_arcs and p >= 0.5]
        print(f"  arcs the truth lacks, at least as probable as not: {', '.join(extra) or 'none'}")
        print(f"  model written to {workdir / 'model.json'}")
        picture = draw_model(AffordanceNetwork.load(workdir / "model.json"),
                             args.picture or (workdir / "model.png" if args.workdir else default_picture()))
        print(f"  the learned network is drawn in {picture} (affordance-ros show MODEL --out PICTURE)")

        print("\nPredictions for new trials: 'learned' is the node's answer (~/predict) and its 90 % credible "
              "interval, 'truth' the same question put to the ground-truth network.")
        rng = np.random.default_rng([args.seed, 2])
        action = truth.group("action")[0]
        examples = sample_values(truth, 2, rng)
        for n, codes in enumerate(examples, start=1):
            readings = {v.sensor.name: float(v.sensor.means[codes[i]]
                                             + v.sensor.stddevs[codes[i]] * rng.standard_normal())
                        for i, v in enumerate(truth.variables) if v.group != "action"}
            labels = {v.name: v.values[codes[i]] for i, v in enumerate(truth.variables)}
            object_sensors = {truth[v].sensor.name: readings[truth[v].sensor.name] for v in truth.group("object")}
            shown = ", ".join(f"{s}={x:.1f}" for s, x in readings.items())

            print(f"\nPrediction {2 * n - 1}: which action was it? Seen: the object and the effects ({shown})")
            answer = demo.predict(["action"], sensors=readings)
            reference = predict(truth, ["action"], sensors=readings)
            print_distribution(action, truth[action], answer, reference.marginals[action], labels[action])

            print(f"\nPrediction {2 * n}: what will '{labels[action]}' do to this object? "
                  f"({', '.join(f'{s}={x:.1f}' for s, x in object_sensors.items())})")
            answer = demo.predict(["effect"], sensors=object_sensors, values={action: labels[action]})
            reference = predict(truth, ["effect"], sensors=object_sensors, values={action: labels[action]})
            for effect in truth.group("effect"):
                print_distribution(effect, truth[effect], answer, reference.marginals[effect], labels[effect])
            outcome = ", ".join(f"{variable}={label}" for variable, label in answer.most_probable.items())
            print(f"  most probable outcome together: {outcome} "
                  f"(p = {percent(answer.joint_probability).strip()})")

        print_action_accuracy(AffordanceNetwork.load(workdir / "model.json"), truth, rng)
        return 0
    finally:
        demo.close()


def print_action_accuracy(model: AffordanceNetwork, truth: AffordanceNetwork, rng) -> None:
    """How often the most probable action given object and effects is the one done, on new trials."""
    codes = sample_values(truth, HELD_OUT_TRIALS, rng)
    sensors = {v.sensor.name: (v.sensor.means[codes[:, i]]
                               + v.sensor.stddevs[codes[:, i]] * rng.standard_normal(len(codes)))
               for i, v in enumerate(truth.variables) if v.group != "action"}
    action = truth.group("action")[0]
    done = codes[:, truth.index(action)]
    hits = {}
    for name, network in (("learned", model), ("truth", truth)):
        answer = predict_batch(network, [action], sensors=sensors)
        hits[name] = float(np.mean(answer.most_probable[:, 0] == done))
    print(f"\nOn {HELD_OUT_TRIALS} new trials the learned model names the action done "
          f"{percent(hits['learned']).strip()} of the time "
          f"(the ground truth itself: {percent(hits['truth']).strip()}).")


def main(argv=None) -> int:
    args = parse_args(argv)
    report_line_by_line()
    try:
        held = prepare_workdir(args)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="affordance_ros-demo-"))
    try:
        return run(args, workdir, held)
    except RuntimeError as exc:
        print(f"demo stopped: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("demo: interrupted", file=sys.stderr)
        return INTERRUPTED
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
