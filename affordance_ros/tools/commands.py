"""The commands of `affordance-ros` (``tools/cli.py`` names them): their parser and what each one does."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# What every command needs, and nothing more: rclpy (call, replay, record), rosbags (bags), matplotlib (show)
# and scipy (learning) are imported by the commands that use them (test/test_packaging.py holds it).
from .. import install_hint
from ..core import AffordanceError, AffordanceNetwork, CaseSet, predict
from ..core.errors import UnknownColumnError
from ..core.options import LearningOptions
from ..data import offline
from ..data.bag import BagError
from ..data.formats import FORMATS, export_model, format_of, import_model
from ..data.pairing import DEFAULT_SLOP, DEFAULT_TRIAL_TIMEOUT
from ..data.spool import SpoolError
from ..data.storage import CaseStoreError
from ..data.trial import case_set
from ..share import configuration_file, default_config_path, shipped_configurations
from . import call, evaluate, record, replay
from .command_names import COMMANDS, DESCRIPTION, PROG
from .executables import INTERRUPTED
from .json_answers import add_top_argument, shortened
from .progress import LearnProgress, ProgressBar, report_line_by_line
from .ros_args import OneLineParser, candidate_objects, name_value_pairs, sensor_readings, split_ros_args

# the learning options `learn` takes on its command line; their help, choices and defaults are LearningOptions'
LEARN_OPTIONS = ("structure", "score", "max_parents", "arc_prior", "prior", "method", "tol", "max_iter", "mcmc_samples",
                 "seed", "fit_sensors", "n_init", "em_acceleration", "prior_strength", "allow_missing",
                 "posterior_draws")
# pyAgrum opens XMLBIF files by this extension only (it refuses .xml and .xmlbif); pgmpy reads any name
PYAGRUM_XMLBIF_SUFFIX = ".bifxml"
# what a file --out refuses to replace holds, told by its first bytes
FILE_SIGNATURES = ((b"SQLite format 3\x00", "an SQLite database (a case database or a bag's storage)"),
                   (b"\x89MCAP", "an MCAP bag file"))
EXPORT_SUFFIXES = tuple(suffix for suffixes in FORMATS.values() for suffix in suffixes)
ERRNO = re.compile(r"^\[Errno \d+\] ")  # how an OSError's text starts


class UserError(Exception):
    """A mistake in the command line or its files: printed as one line, exit status 2."""


def load_cases(config: AffordanceNetwork, source: str, options=None, progress: bool | None = None,
               ignore=()) -> CaseSet:
    """Cases from a CSV file (``ignore``: its columns that are not variables), the learner node's SQLite
    database or a rosbag2 bag."""
    path = Path(source)
    if not path.exists():
        raise UserError(f"cases file '{source}' does not exist")
    kind = offline.source_kind(path)
    if kind == "csv":  # every label column, not only the action's
        return CaseSet.from_csv(config, path, extra=ignore)
    cases = read_cases(path, config, options or offline.PairingOptions(), progress)
    _tell(cases, "learn")
    if kind == "bag" and not cases.records:
        raise UserError(f"'{source}' gave no cases: none of its trials was usable (the lines above say why); is "
                        "--config the configuration the robot's trials were made with?")
    return case_set(config, cases.records)


def read_cases(source, config: AffordanceNetwork, options, progress: bool | None, ignore=()):
    """``offline.read_cases`` with a progress bar while a bag is read (``progress`` None: on a terminal only);
    ``ignore``: a CSV file's columns that are not variables."""
    with ProgressBar(f"reading {Path(source).name}", enabled=progress) as bar:
        return offline.read_cases(source, config, options, bar.update, ignore)


def _tell(cases, command: str) -> None:
    """What reading a source found: the report on stdout, the warnings on stderr."""
    for warning in cases.warnings:
        print(f"affordance-ros {command}: warning: {warning}", file=sys.stderr)
    for line in cases.report:
        print(line)
    sys.stdout.flush()


def _pairing_options(args):
    return offline.PairingOptions(slop=args.slop, trial_timeout=args.trial_timeout, namespace=args.namespace)


def _config(args) -> AffordanceNetwork:
    return AffordanceNetwork.load(args.config or default_config_path(), what="configuration")


def configuration_path(given: str) -> Path:
    """``--config``: a configuration file, or the name of a shipped one (``--config tools``)."""
    path = configuration_file(given)
    if path.is_file():
        return path
    shipped = shipped_configurations()
    names = ", ".join(shipped) or "none"
    what = "a folder, not a configuration file" if path.is_dir() else "no such file"
    raise UserError(f"cannot read configuration '{given}': {what}; the shipped configurations are {names} "
                    f"(in {default_config_path().parent}): name one (--config {next(iter(shipped), 'tools')}) "
                    f"or give the path of a configuration file")


def _pairs(items, what: str) -> dict:
    return name_value_pairs(items, what, UserError)


def _hint(command: str, exc: Exception) -> str:
    """What to do about a CSV column that is neither a variable nor a sensor (e.g. simulate's object_id)."""
    if command in ("learn", "evaluate", "import", "export") and isinstance(exc, UnknownColumnError) \
            and exc.near is None:
        if len(exc.columns) > 1:
            return (f"; else, if they are not variables (ids, notes), leave them out with --ignore-columns "
                    f"{' '.join(exc.columns)}")
        return (f"; if it is not a variable of the configuration (an object id, a note), leave it out with "
                f"--ignore-columns {exc.column}" + (" or name it in --leave-out" if command == "evaluate" else ""))
    return ""


def check_model_out(out: str, command: str, source: str, source_is: str) -> None:
    """--out of learn and import-model: a new file, or a model (or configuration) JSON to replace; UserError for
    ``source`` (what the command reads), a directory or any other file, before anything is written."""
    path = Path(out)
    if path.exists() and Path(source).exists() and path.samefile(source):
        raise UserError(f"--out '{out}' is {source_is}: write the model to another file (e.g. --out model.json)")
    if path.is_dir():
        raise UserError(f"--out '{out}' is a directory: name the model file to write "
                        f"(e.g. --out {path / 'model.json'})")
    if path.exists() and not is_model_json(path):
        raise UserError(f"--out '{out}' is {file_kind(path)}, not a model: {command} replaces only a model or "
                        f"configuration JSON; write the model to another file (e.g. --out model.json)")


def is_model_json(path: Path) -> bool:
    """Whether ``path`` holds a model or configuration: a JSON object with 'variables'."""
    try:
        with path.open("rb") as f:
            if f.read(64).lstrip()[:1] != b"{":
                return False
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and "variables" in doc


def file_kind(path: Path) -> str:
    """What a file that is not a model holds, for a refusal: 'an SQLite database ...', 'a CSV file', ..."""
    with path.open("rb") as f:
        start = f.read(16)
    for signature, kind in FILE_SIGNATURES:
        if start.startswith(signature):
            return kind
    return "a CSV file" if path.suffix.lower() == ".csv" else "an existing file"


def check_export_out(out: str, model: str) -> None:
    """--out of export-model: a new file, or an earlier export (named as one) to replace; UserError for the model
    itself, a directory or any other file."""
    path = Path(out)
    if path.is_dir():
        raise UserError(f"--out '{out}' is a directory: name the file to write (e.g. --out {path / 'model.bif'})")
    if path.exists() and Path(model).exists() and path.samefile(model):
        raise UserError(f"--out '{out}' is the model itself: write the export to another file (e.g. --out model.bif)")
    if path.exists() and not path.name.lower().endswith(EXPORT_SUFFIXES):
        raise UserError(f"--out '{out}' is {file_kind(path)}: export-model replaces only a file named as an export "
                        f"({', '.join(EXPORT_SUFFIXES)}); write the export to another file (e.g. --out model.bif)")


def cmd_learn(args) -> int:
    check_model_out(args.out, "learn", args.cases, "the cases it learns from (--cases)")
    config = AffordanceNetwork.load(args.config, what="configuration")
    cases = load_cases(config, args.cases, _pairing_options(args), args.progress, args.ignore_columns or ())
    from ..core import AffordanceLearner, format_arcs  # (scipy: only for learning, once the inputs are read)

    learner = AffordanceLearner(**{name: getattr(args, name) for name in LEARN_OPTIONS})
    prior_model = learned_model(args.prior_model, "--prior-model") if args.prior_model else None
    with LearnProgress(enabled=args.progress) as progress:
        learner.fit(config, cases, prior_model=prior_model, progress=progress)
    learner.model_.save(args.out)
    result = learner.result_
    for warning in result.warnings:
        print(f"affordance-ros learn: warning: {warning}", file=sys.stderr)
    if result.structures is not None:
        sample = result.structures
        print(f"learned from {result.num_cases} cases in {result.duration:.2f} s (average over "
              f"{len(sample.members)} structures: {len(sample.chain_arcs)} chains, {sample.sweeps} sweeps, "
              f"{sample.n_draws} draws; the chains differ by up to {sample.disagreement:.2f} on an edge)")
    else:
        print(f"learned from {result.num_cases} cases in {result.duration:.2f} s "
              f"({result.structure} structure, {result.iterations} EM iterations, "
              f"{'converged' if result.converged else 'NOT converged'})")
    print(f"log-likelihood: {result.log_likelihood:.3f}")
    if result.structures is not None:
        ranked = sorted(result.arc_probabilities.items(), key=lambda item: -item[1])
        print(f"arcs (posterior probability): {', '.join(f'{a}->{b} {p:.2f}' for (a, b), p in ranked) or '(none)'}")
    else:
        print(f"arcs: {', '.join(format_arcs(result.arcs)) or '(none)'}")
    print(f"model written to {args.out}")
    return 0


def learned_model(given: str, option: str) -> AffordanceNetwork:
    """The model file ``given`` as ``option``; UserError for a configuration (no CPTs), naming the file."""
    model = AffordanceNetwork.load(given)
    if not model.parameterised:
        raise UserError(f"{option} '{given}' has no learned CPTs (a configuration?): learn a model with it first "
                        f"(affordance-ros learn --cases CASES --config {given} --out model.json)")
    return model


def cmd_predict(args) -> int:
    model = learned_model(args.model, "--model")
    sensors = sensor_readings(args.sensor, UserError)
    answer = predict(model, args.query, sensors=sensors, values=_pairs(args.value, "--value"))
    json.dump(shortened(answer.to_dict(readings=args.readings), args.top), sys.stdout,
              indent=2 if args.pretty else None)
    print()
    return 0


def cmd_suggest(args) -> int:
    from ..core.suggest import suggest_trials  # (scipy: not at the command line's start)

    model = learned_model(args.model, "--model")
    answer = suggest_trials(model, candidate_objects(args.candidate, UserError), args.action, args.criterion,
                            args.best or None)
    json.dump(answer.to_dict(effects=args.effects), sys.stdout, indent=2 if args.pretty else None)
    print()
    return 0


def cmd_import(args) -> int:
    sources = case_sources(args, "import")
    config = _config(args)
    total_added = total_present = 0
    for source in sources:
        cases = read_cases(source, config, _pairing_options(args), args.progress, args.ignore_columns or ())
        _tell(cases, "import")
        added, present, differing = offline.append_to_database(args.db, cases.records)
        print(f"added {added} cases to {args.db}" + (f" ({present} were there already)" if present else ""))
        if differing:
            print(f"affordance-ros import: warning: {differing} cases of {source} have the trial_id of a stored case "
                  f"whose action or readings differ; {args.db} keeps the stored ones", file=sys.stderr)
        total_added, total_present = total_added + added, total_present + present
    if len(sources) > 1:
        print(f"in all: added {total_added} cases to {args.db} ({total_present} were there already)")
    return 0


def cmd_export(args) -> int:
    source, = case_sources(args, "export")
    out = Path(args.out)
    if out.suffix.lower() in (".db", ".sqlite", ".sqlite3"):
        raise UserError(f"'{out}' is a case database: add cases to one with "
                        f"`affordance-ros import --cases SOURCE --db {out}`")
    if out.exists():
        raise UserError(f"'{out}' exists already; export writes a new file or bag")
    config = _config(args)
    cases = read_cases(source, config, _pairing_options(args), args.progress, args.ignore_columns or ())
    _tell(cases, "export")
    if out.suffix.lower() == ".csv":
        offline.write_csv(out, cases.records, config)
        print(f"wrote {len(cases.records)} cases to {out}")
    else:
        count = offline.write_bag(out, cases.records, args.storage)
        print(f"wrote {len(cases.records)} cases ({count} messages) to the {args.storage} bag {out}")
    return 0


def cmd_export_model(args) -> int:
    check_export_out(args.out, args.model)
    model = learned_model(args.model, "the model")
    fmt = format_of(args.out, args.format)
    export_model(model, fmt, args.out)
    print(f"wrote the discrete network of {args.model} ({len(model)} variables, {len(model.arcs)} arcs) "
          f"to {args.out} ({fmt}; the sensor models stay in {args.model})")
    if fmt == "xmlbif" and not args.out.lower().endswith(PYAGRUM_XMLBIF_SUFFIX):
        print(f"affordance-ros export-model: note: pyAgrum opens XMLBIF files only when they are named "
              f"*{PYAGRUM_XMLBIF_SUFFIX} (pgmpy reads any name): "
              f"--out {Path(args.out).with_suffix(PYAGRUM_XMLBIF_SUFFIX)}", file=sys.stderr)
    return 0


def cmd_import_model(args) -> int:
    check_model_out(args.out, "import-model", args.file, "the network it imports")
    config = AffordanceNetwork.load(args.config, what="configuration")
    model = import_model(args.file, config, args.format)
    model.save(args.out)
    print(f"imported {args.file} ({len(model)} variables, {len(model.arcs)} arcs) with the groups and sensors of "
          f"{args.config}; model written to {args.out}")
    return 0


def cmd_show(args) -> int:
    from .show import draw_model  # (matplotlib: only for this command)

    model = AffordanceNetwork.load(args.model)
    try:
        out = draw_model(model, args.out, cpts=args.cpts, title=args.title, min_probability=args.min_probability)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    print(f"drew {args.model} to {out}")
    return 0


def cmd_call(args) -> int:
    return call.run(args, args.ros_args)


def cmd_evaluate(args) -> int:
    return evaluate.run_evaluate(args, UserError)


def cmd_simulate(args) -> int:
    return evaluate.run_simulate(args, UserError)


def cmd_replay(args) -> int:
    return replay.run(args, args.ros_args)


def cmd_record(args) -> int:
    return record.run(args, args.ros_args)


def _add_pairing_options(parser: argparse.ArgumentParser,
                         progress_help: str = "show a progress bar on stderr (default: only on a terminal)") -> None:
    group = parser.add_argument_group("reading bags (paired as the learner node pairs them)")
    group.add_argument("--namespace", default="/",
                       help="the topics are NAMESPACE/action, NAMESPACE/object_features, NAMESPACE/effects (default /)")
    group.add_argument("--slop", type=float, default=DEFAULT_SLOP,
                       help=f"seconds the stamps of a trial's parts may differ when paired by stamp "
                            f"(the node's 'slop', default {DEFAULT_SLOP:g})")
    group.add_argument("--trial-timeout", type=float, default=DEFAULT_TRIAL_TIMEOUT,
                       help=f"seconds of log time after which an incomplete trial is dropped "
                            f"(the node's 'trial_timeout', default {DEFAULT_TRIAL_TIMEOUT:g})")
    group.add_argument("--progress", action="store_true", default=None, help=progress_help)


def _add_case_sources(parser: argparse.ArgumentParser, many: bool) -> None:
    """``--cases`` (as learn and evaluate take them), and the same given without it, as earlier versions did."""
    what = "bag (directory, .db3, .mcap), .csv or the node's .db"
    if many:
        parser.add_argument("--cases", nargs="+", action="extend", default=[], metavar="SOURCE",
                            help=f"the cases to add: {what}; several may follow")
        parser.add_argument("positional", nargs="*", metavar="SOURCE", help="the same as --cases")
    else:
        parser.add_argument("--cases", action="append", default=[], metavar="SOURCE", help=f"the cases: {what}")
        parser.add_argument("positional", nargs="?", metavar="SOURCE", help="the same as --cases")


def case_sources(args, command: str) -> list:
    """The sources ``--cases`` and the positional alias name, in order; UserError when none (or, for export, more
    than one) is given."""
    given = [*args.cases, *([args.positional] if isinstance(args.positional, str) else args.positional or [])]
    if not given:
        raise UserError(f"give the cases to {command}: --cases SOURCE (a bag, a .csv file or the node's .db)")
    if command == "export" and len(given) > 1:
        raise UserError(f"export writes one source at a time, got {len(given)}: {', '.join(given)}")
    return given


def _add_ignore_columns(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ignore-columns", nargs="+", metavar="COLUMN",
                        help="CSV columns that are not variables, to skip (e.g. object_id)")


def _config_help() -> str:
    return ("a configuration (the model schema without CPTs): a file, or the name of a shipped one ("
            + ", ".join(shipped_configurations()) + ")")


def _add_learning_options(parser: argparse.ArgumentParser) -> None:
    for name in LEARN_OPTIONS:
        option = LearningOptions.describe(name)
        default = json.dumps(option.default) if option.type is bool else option.default
        text = f"{option.help} (default: the configuration's, else {default})"
        if option.type is bool:
            parser.add_argument(f"--{name.replace('_', '-')}", action="store_true", default=None, help=text)
        else:
            parser.add_argument(f"--{name.replace('_', '-')}", type=option.type, choices=option.choices, help=text)


def build_parser() -> argparse.ArgumentParser:
    config_help = _config_help()
    parser = OneLineParser(prog=PROG, description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)

    learn = sub.add_parser(
        "learn", help=COMMANDS["learn"],
        description="Learn a model (structure, then CPTs by EM) from recorded cases, as the learner node's ~/learn "
                    "does, and write it as model JSON. Options left out come from the configuration's 'learning' "
                    "block, then the defaults.")
    learn.add_argument("--cases", required=True,
                       help="CSV (trial_id, labels, readings), the node's .db, or a rosbag2 bag "
                            "(directory, .db3, .mcap)")
    learn.add_argument("--config", required=True, help=config_help)
    learn.add_argument("--out", required=True, help="where to write the model JSON")
    _add_learning_options(learn)
    learn.add_argument("--prior-model", help="an earlier model whose knowledge is the prior of this one")
    _add_ignore_columns(learn)
    _add_pairing_options(learn, "show on stderr a progress bar while a bag is read and the steps of learning "
                                "(phase, step, score; default: only on a terminal)")
    learn.set_defaults(run=cmd_learn)

    pred = sub.add_parser(
        "predict", help=COMMANDS["predict"],
        description="The posterior of the query variables under a model file, given raw sensor readings and/or "
                    "known labels, as JSON (what the node's ~/predict answers; `call predict` asks the node).")
    pred.add_argument("--model", required=True, help="a model file (model JSON with CPTs, e.g. from learn)")
    pred.add_argument("--query", action="append", required=True,
                      help="a variable name or a group (action, object, effect); repeatable")
    pred.add_argument("--sensor", action="append", metavar="SENSOR=READING", help="raw sensor reading")
    pred.add_argument("--value", action="append", metavar="VARIABLE=LABEL", help="known label")
    pred.add_argument("--pretty", action="store_true", help="indent the JSON")
    pred.add_argument("--readings", action="store_true",
                      help="add what the queried variables' sensors should read: 'readings' (mean and stddev per "
                           "reading name) and 'mixtures' (the predictive mixture per variable)")
    add_top_argument(pred)
    pred.set_defaults(run=cmd_predict)

    sug = sub.add_parser(
        "suggest", help=COMMANDS["suggest"],
        description="Rank every action on every candidate object by what its effects would teach the model "
                    "(expected information gain about its CPTs; or predictive entropy, or least tried), with the "
                    "effects the model expects, as JSON (what the node's ~/suggest_trial answers; `call suggest` "
                    "asks the node).")
    sug.add_argument("--model", required=True, help="a model file (model JSON with CPTs, e.g. from learn)")
    call.add_suggest_arguments(sug)
    sug.add_argument("--effects", action="store_true",
                     help="add every effect's whole predicted distribution and the spread of each probability "
                          "(effects, effect_stddevs)")
    sug.add_argument("--pretty", action="store_true", help="indent the JSON")
    sug.set_defaults(run=cmd_suggest)

    default_config_help = config_help + "; default: the learner node's default (montesano)"
    imp = sub.add_parser(
        "import", help=COMMANDS["import"],
        description="Add the cases of bags (their trial parts paired as the learner node pairs them from its "
                    "topics), CSV files or other case databases to a case database, which the learner node opens "
                    "(database_path) and `learn --cases` reads. Trials already stored are not added again.")
    _add_case_sources(imp, many=True)
    imp.add_argument("--db", required=True, help="the case database to add to (created if missing)")
    imp.add_argument("--config", help=default_config_help)
    _add_ignore_columns(imp)
    _add_pairing_options(imp)
    imp.set_defaults(run=cmd_import)

    exp = sub.add_parser(
        "export", help=COMMANDS["export"],
        description="Write the cases of a case database, a bag (its trial parts paired as the node pairs them) or a "
                    "CSV file to a new CSV file (trial_id, labels, readings), or to a new bag of the action, "
                    "object_features and effects topics, to replay or to learn from elsewhere.")
    _add_case_sources(exp, many=False)
    exp.add_argument("--out", required=True, help="a new .csv file, else a new bag directory")
    exp.add_argument("--storage", choices=("sqlite3", "mcap"), default="sqlite3",
                     help="storage format of a bag written (default sqlite3)")
    exp.add_argument("--config", help=default_config_help)
    _add_ignore_columns(exp)
    _add_pairing_options(exp)
    exp.set_defaults(run=cmd_export)

    play = sub.add_parser("replay", help=COMMANDS["replay"],
                          description="Publish a bag's action, object_features and effects messages at their "
                                      "recorded pace (or --rate times faster), for a running learner node to "
                                      "take in, as `ros2 bag play` would (needs ROS 2).",
                          epilog="ROS arguments go after --ros-args (e.g. --ros-args -r /action:=/robot2/action)")
    replay.add_arguments(play)
    play.set_defaults(run=cmd_replay)
    rec = sub.add_parser("record", help=COMMANDS["record"],
                         description="Record the action, object_features and effects topics into a new bag, every "
                                     "message as it arrives, until Ctrl-C, --duration or --trials (needs ROS 2); "
                                     "`import` or `learn --cases` read the bag later.",
                         epilog="ROS arguments go after --ros-args (e.g. --ros-args -r __ns:=/robot1)")
    record.add_arguments(rec)
    rec.set_defaults(run=cmd_record)

    calls = sub.add_parser(
        "call", help=COMMANDS["call"],
        description="Call the running learner node's Learn action, ~/predict, ~/select_action or ~/suggest_trial "
                    "and print the answer as JSON (the `ros2 service call` these machines lack).",
        epilog="The node called is --node's (e.g. --node /robot1/affordance_learner), whatever the namespace "
               "given after --ros-args, where ROS arguments go.")
    call.add_arguments(calls)
    calls.set_defaults(run=cmd_call)

    formats = ", ".join(f"{fmt} ({'/'.join(sorted(suffixes, key=lambda s: s != PYAGRUM_XMLBIF_SUFFIX))})"
                        for fmt, suffixes in FORMATS.items())
    exm = sub.add_parser(
        "export-model", help=COMMANDS["export-model"],
        description="Write the discrete network of a model (variables, labels in order, arcs, CPTs) in another "
                    "tool's format; the sensor models stay in the model file.")
    exm.add_argument("model", help="a model file (model JSON with CPTs)")
    exm.add_argument("--format", choices=list(FORMATS),
                     help=f"default: from --out's extension: {formats} (pyAgrum opens XMLBIF only as "
                          f"{PYAGRUM_XMLBIF_SUFFIX}, pgmpy any)")
    exm.add_argument("--out", required=True, help="the file to write")
    exm.set_defaults(run=cmd_export_model)
    imm = sub.add_parser(
        "import-model", help=COMMANDS["import-model"],
        description="Read a discrete network (an expert's, or another tool's) and give it the groups, sensors and "
                    "learning options of a configuration: a model to predict with, or to be the prior of the next.")
    imm.add_argument("file", help=f"the network: {formats}")
    imm.add_argument("--config", required=True,
                     help=config_help + " with the same variables and labels (UAI: in the file's order), with sensors")
    imm.add_argument("--format", choices=list(FORMATS), help="default: from the file's extension")
    imm.add_argument("--out", required=True, help="where to write the model JSON")
    imm.set_defaults(run=cmd_import_model)
    show = sub.add_parser(
        "show", help=COMMANDS["show"],
        description="Draw the network: actions, object features and effects in columns, arcs labelled with their "
                    "MCMC probability when the model has them; --cpts adds a heat map of every CPT.")
    show.add_argument("model", help="a model file (or a configuration: its variables and any arcs)")
    show.add_argument("--out", required=True, help="the picture to write: .png, .svg or .pdf")
    show.add_argument("--cpts", action="store_true", help="add a heat map of every CPT")
    show.add_argument("--title", help="title (default: how the model was learned)")
    show.add_argument("--min-probability", type=float, default=0.3,
                      help="also draw (dashed) arcs MCMC sampled at least this often that the model lacks "
                           "(default 0.3)")
    show.set_defaults(run=cmd_show)
    ev = sub.add_parser("evaluate", help=COMMANDS["evaluate"])
    sim = sub.add_parser("simulate", help=COMMANDS["simulate"])
    evaluate.add_arguments(ev, sim, config_help)
    ev.set_defaults(run=cmd_evaluate)
    sim.set_defaults(run=cmd_simulate)

    return parser


def run(argv) -> int:
    """Run the command line ``argv`` (its first word a command): its exit status."""
    parser = build_parser()
    argv, ros_args = split_ros_args(argv)
    args = parser.parse_args(argv)
    args.ros_args = ros_args
    command = args.command + (f" {args.service}" if args.command == "call" else "")
    report_line_by_line()
    try:
        if ros_args and args.command not in ("replay", "record", "call"):
            raise UserError(f"--ros-args is for replay, record and call, not {args.command}")
        if ros_args:
            from ..nodes.command_line import ros_arguments_problem  # (rclpy: only with ROS arguments)
            problem = ros_arguments_problem(ros_args)
            if problem:
                raise UserError(problem)
        if getattr(args, "config", None):
            args.config = configuration_path(args.config)
        return args.run(args)
    except KeyboardInterrupt as exc:
        print(f"affordance-ros {command}: interrupted" + (f": {exc}" if str(exc) else ""), file=sys.stderr)
        return INTERRUPTED
    except (AffordanceError, UserError, BagError, CaseStoreError, SpoolError, call.CallError) as exc:
        print(f"affordance-ros {command}: error: {exc}{_hint(command, exc)}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        if install_hint(exc.name) is None:
            raise
        print(f"affordance-ros {command}: error: {install_hint(exc.name)}", file=sys.stderr)
        return 2
    except OSError as exc:
        text = ERRNO.sub("", str(exc))  # "[Errno 2] ..." says nothing to a user
        print(f"affordance-ros {command}: error: {text}", file=sys.stderr)
        return 2

