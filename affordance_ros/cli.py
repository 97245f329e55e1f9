"""`affordance-ros`: learn a model from recorded cases, and ask it questions, without ROS running.

    affordance-ros learn --cases cases.csv --config config.json --structure k2 --out model.json
    affordance-ros predict --model model.json --query action --sensor obj_vel=7.2 --value Shape=box
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from .core import AffordanceError, AffordanceLearner, AffordanceNetwork, CaseSet, format_arcs, predict
from .core.learner import STRUCTURES


class UserError(Exception):
    """A mistake in the command line or its files: printed as one line, exit status 2."""


def load_cases(config: AffordanceNetwork, source: str) -> CaseSet:
    """Cases from a CSV file or the learner node's SQLite database."""
    path = Path(source)
    if not path.exists():
        raise UserError(f"cases file '{source}' does not exist")
    if path.suffix.lower() == ".csv":
        return CaseSet.from_csv(config, path)
    if path.suffix.lower() in (".db", ".sqlite", ".sqlite3"):
        from .storage import CaseStore
        store = CaseStore(path, read_only=True)
        try:
            return CaseSet.from_records(config, store.records())
        finally:
            store.close()
    raise UserError(f"cannot read cases from '{source}': expected a .csv file or the node's .db database")


def _pairs(items, what: str) -> dict:
    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError(f"{what} '{item}' must look like NAME=VALUE")
        out[name] = value
    return out


def cmd_learn(args) -> int:
    config = AffordanceNetwork.load(args.config)
    cases = load_cases(config, args.cases)
    learner = AffordanceLearner(structure=args.structure, score=args.score, max_parents=args.max_parents,
                                prior=args.prior, method=args.method, seed=args.seed,
                                mcmc_samples=args.mcmc_samples, tol=args.tol, max_iter=args.max_iter,
                                fit_sensors=args.fit_sensors or None, prior_strength=args.prior_strength)
    prior_model = AffordanceNetwork.load(args.prior_model) if args.prior_model else None
    learner.fit(config, cases, prior_model=prior_model)
    learner.model_.save(args.out)
    result = learner.result_
    print(f"learned from {result.num_cases} cases in {result.duration:.2f} s "
          f"({result.structure} structure, {result.iterations} EM iterations, "
          f"{'converged' if result.converged else 'NOT converged'})")
    print(f"log-likelihood: {result.log_likelihood:.3f}")
    print(f"arcs: {', '.join(format_arcs(result.arcs)) or '(none)'}")
    print(f"model written to {args.out}")
    return 0


def cmd_predict(args) -> int:
    model = AffordanceNetwork.load(args.model)
    sensors = {}
    for name, text in _pairs(args.sensor, "--sensor").items():
        try:
            sensors[name] = float(text)
        except ValueError:
            raise UserError(f"--sensor {name}={text}: the reading must be a number") from None
        if not math.isfinite(sensors[name]):
            raise UserError(f"--sensor {name}={text}: the reading must be a finite number")
    answer = predict(model, args.query, sensors=sensors, values=_pairs(args.value, "--value"))
    json.dump(answer.to_dict(), sys.stdout, indent=2 if args.pretty else None)
    print()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="affordance-ros", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    learn = sub.add_parser("learn", help="learn structure and parameters from recorded cases")
    learn.add_argument("--cases", required=True, help="CSV (trial_id, labels, readings) or the node's .db")
    learn.add_argument("--config", required=True, help="configuration in the model schema (no CPTs)")
    learn.add_argument("--structure", choices=STRUCTURES, help="default: the config's, else k2")
    learn.add_argument("--out", required=True, help="where to write the model JSON")
    learn.add_argument("--score", choices=("k2", "bdeu", "bic"))
    learn.add_argument("--max-parents", type=int)
    learn.add_argument("--prior", type=float, help="Dirichlet pseudo-count per CPT entry (0: maximum likelihood)")
    learn.add_argument("--method", choices=("em", "discrete"))
    learn.add_argument("--tol", type=float, help="EM stops when the RMS parameter change is below this")
    learn.add_argument("--max-iter", type=int)
    learn.add_argument("--mcmc-samples", type=int)
    learn.add_argument("--seed", type=int)
    learn.add_argument("--fit-sensors", action="store_true",
                       help="re-estimate the sensor means/stddevs inside EM (when only roughly known)")
    learn.add_argument("--prior-model", help="an earlier model whose knowledge is the prior of this one")
    learn.add_argument("--prior-strength", type=float,
                       help="how many cases the prior model is worth (equivalent sample size)")
    learn.set_defaults(run=cmd_learn)

    pred = sub.add_parser("predict", help="posterior of query variables given labels and sensor readings")
    pred.add_argument("--model", required=True)
    pred.add_argument("--query", action="append", required=True,
                      help="a variable name or a group (action, object, effect); repeatable")
    pred.add_argument("--sensor", action="append", metavar="SENSOR=READING", help="raw sensor reading")
    pred.add_argument("--value", action="append", metavar="VARIABLE=LABEL", help="known label")
    pred.add_argument("--pretty", action="store_true", help="indent the JSON")
    pred.set_defaults(run=cmd_predict)

    from .bench import add_parser as add_bench_parser
    add_bench_parser(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (AffordanceError, UserError) as exc:
        print(f"affordance-ros {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"affordance-ros {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
