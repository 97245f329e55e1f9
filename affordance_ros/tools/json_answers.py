"""How `predict` and `call predict` print an answer: JSON, with long marginals cut to their most probable labels.

A variable with more labels than ``--top`` (an effect found per condition has hundreds) keeps its ``top``
most probable labels, most probable first; the rest are summed up under ``omitted``
(``{"Effect": {"labels": 180, "probability": 0.012}}``). Its ``stddevs`` and ``intervals`` keep the same
labels, and its predictive mixture (``--readings``) the components of those labels, named in ``labels``.
Variables with at most ``top`` labels stay as they are, in the model's order.
"""

from __future__ import annotations

import argparse

import numpy as np

from .ros_args import count_or_all

DEFAULT_TOP = 10


def add_top_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--top", type=count_or_all("every label"), default=DEFAULT_TOP, metavar="K",
                        help=f"of a variable with more than K labels, show the K most probable (most probable "
                             f"first; the rest summed up under 'omitted'); 0: every label (default {DEFAULT_TOP})")


def shortened(answer: dict, top: int) -> dict:
    """``answer`` (marginals, most_probable, ..., mixtures) with every marginal of more than ``top`` labels cut
    to its ``top`` most probable; ``top`` 0 leaves it whole."""
    marginals = answer["marginals"]
    long = [v for v, dist in marginals.items() if top and len(dist) > top]
    if not long:
        return answer
    shown, omitted = dict(marginals), {}
    mixtures = dict(answer.get("mixtures") or {})
    per_label = {key: dict(answer[key]) for key in ("stddevs", "intervals") if key in answer}
    for variable in long:
        labels = list(marginals[variable])
        probabilities = np.array([marginals[variable][label] for label in labels], dtype=float)
        keep = np.argsort(-probabilities, kind="stable")[:top]
        shown[variable] = {labels[i]: float(probabilities[i]) for i in keep}
        for key, spreads in per_label.items():
            if variable in spreads:
                spreads[variable] = {labels[i]: spreads[variable][labels[i]] for i in keep}
        omitted[variable] = {"labels": len(labels) - len(keep),
                             "probability": float(probabilities.sum() - probabilities[keep].sum())}
        if variable in mixtures:
            mixture = mixtures[variable]
            mixtures[variable] = dict(mixture, labels=[labels[i] for i in keep],
                                      **{key: [mixture[key][i] for i in keep]
                                         for key in ("weights", "means", "covariances")})
    rest = {key: value for key, value in answer.items() if key != "marginals"}
    if "mixtures" in rest:
        rest["mixtures"] = mixtures
    rest.update(per_label)
    return {"marginals": shown, "omitted": omitted, **rest}
