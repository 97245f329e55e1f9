"""`affordance-ros show`'s picture: boxes apart, arcs around the boxes and apart, labels apart, CPT rows labelled."""

import json

import numpy as np
import pytest

from affordance_ros.core import AffordanceNetwork, benchmark_network, benchmark_structure
from affordance_ros.share import default_config_path
from affordance_ros.tools.show import TICK_SPACE, draw_model, heat_maps, layout, parent_configurations


def montesano_with_mcmc_arcs():
    """The montesano network with MCMC arc probabilities, some of them of arcs the model lacks (drawn dashed)."""
    model = benchmark_network("montesano", sigma=1.0, seed=1)
    probabilities = {f"{a}->{b}": 1.0 for a, b in model.arcs}
    probabilities.update({"Size->Shape": 0.8, "Color->ObjVel": 0.45, "Action->Color": 0.31, "HandVel->Contact": 0.6,
                          "ObjVel->Contact": 0.5})
    model.metadata["learned"] = {"num_cases": 500, "structure": "mcmc", "arc_probabilities": probabilities}
    return model


def tools_with_arcs():
    """The shipped tools configuration (vector sensors, values to fit) with the arcs a learn gives it."""
    doc = json.loads((default_config_path().parent / "tools.json").read_text())
    parents = {"Action": [], "Tool": ["Action"], "Shape": ["Tool"], "Effect": ["Action", "Tool", "Shape"]}
    for v in doc["variables"]:
        v["parents"] = parents[v["name"]]
    return AffordanceNetwork.from_dict(doc)


def arcs_every_way():
    """Arcs right, left (into the action from an effect: across the object column), within a column."""
    doc = benchmark_structure("montesano", sigma=1.0).to_dict()
    parents = {"Action": ["Color", "HandVel"], "HandVel": [], "Shape": ["Size", "Color", "ObjVel"],
               "ObjVel": ["Size"], "Contact": ["ObjVel", "ObjHandVel", "HandVel", "Color", "Shape"]}
    for v in doc["variables"]:
        v["parents"] = parents.get(v["name"], v["parents"])
    return AffordanceNetwork.from_dict(doc)


def no_object_features():
    """Arcs from the action to the effects across an empty column."""
    doc = benchmark_structure("montesano", sigma=1.0).to_dict()
    doc["variables"] = [v for v in doc["variables"] if v["group"] != "object"]
    for v in doc["variables"]:
        v["parents"] = [p for p in v["parents"] if p in {w["name"] for w in doc["variables"]}]
    return AffordanceNetwork.from_dict(doc)


MODELS = {"montesano": montesano_with_mcmc_arcs, "tools": tools_with_arcs, "every way": arcs_every_way,
          "no object features": no_object_features}


def along(points, spacing=0.01):
    """Points along a polyline, ``spacing`` inches apart."""
    out = [points[0]]
    for a, b in zip(points, points[1:]):
        n = max(1, int(np.hypot(*(b - a)) / spacing))
        out.extend(a + (b - a) * t for t in np.arange(1, n + 1) / n)
    return np.array(out)


def inside(points, rect, margin=0.0):
    x0, y0, x1, y1 = rect
    return ((points[:, 0] > x0 - margin) & (points[:, 0] < x1 + margin)
            & (points[:, 1] > y0 - margin) & (points[:, 1] < y1 + margin))


@pytest.mark.parametrize("name", MODELS)
def test_boxes_arcs_and_labels_keep_apart(name):
    model = MODELS[name]()
    where = layout(model)
    boxes = where.boxes
    assert set(boxes) == set(model.names)
    for a in boxes:  # boxes apart (not touching: at least 0.3 inch between any two)
        for b in boxes:
            if a < b:
                ax0, ay0, ax1, ay1 = boxes[a]
                bx0, by0, bx1, by1 = boxes[b]
                assert max(bx0 - ax1, ax0 - bx1, by0 - ay1, ay0 - by1) >= 0.3, (a, b)
    expected = set(model.arcs) | {(a, b) for a, b in [k.split("->") for k in (
        (model.metadata.get("learned") or {}).get("arc_probabilities") or {})]}
    assert {(arc.parent, arc.child) for arc in where.arcs} == expected
    paths = {(arc.parent, arc.child): along(arc.points) for arc in where.arcs}
    for (parent, child), points in paths.items():
        # from the parent's side into the child's, around every box
        assert inside(points[:1], boxes[parent], 1e-9).all() and inside(points[-1:], boxes[child], 1e-9).all()
        for box, rect in boxes.items():
            assert not inside(points, rect, -1e-6).any(), f"{parent}->{child} passes through {box}"
        # never along another arc (crossing one is fine): no stretch longer than 0.12 inch within 0.04 inch of it
        for other, theirs in paths.items():
            if other != (parent, child):
                near = np.min(np.hypot(*(points[:, None, :] - theirs[None, :, :]).transpose(2, 0, 1)), axis=1) < 0.04
                longest = max((len(run) for run in "".join("x" if n else " " for n in near).split()), default=0)
                assert longest * 0.01 <= 0.12, f"{parent}->{child} runs along {other[0]}->{other[1]}"
    labels = [arc.label for arc in where.arcs if arc.probability is not None]
    assert len(labels) == (len(where.arcs) if name == "montesano" else 0)
    for k, label in enumerate(labels):  # labels apart from each other and the boxes
        corners = np.array([[label[0], label[1]], [label[2], label[3]], [label[0], label[3]], [label[2], label[1]]])
        for rect in list(boxes.values()) + labels[:k]:
            assert not inside(corners, rect).any() and not inside(
                np.array([[(rect[0] + rect[2]) / 2, (rect[1] + rect[3]) / 2]]), label).any()


def test_cpt_rows_are_labelled_with_their_parent_configurations():
    model = benchmark_network("montesano", sigma=1.0, seed=1)
    contact = model["Contact"]
    rows = parent_configurations(model, contact)
    assert len(rows) == contact.cpt.reshape(-1, contact.card).shape[0] == 54
    index = np.ravel_multi_index((1, 0, 2, 1), [len(model[p].values) for p in contact.parents])
    assert rows[index] == ", ".join(model[p].values[c] for p, c in zip(contact.parents, (1, 0, 2, 1)))
    assert contact.parents == ("Action", "Shape", "Size", "ObjHandVel") and rows[index] == "tap, circle, big, medium"
    for m in heat_maps(model):
        if m.rows:  # labelled rows at least TICK_SPACE apart: every row, or every k-th of a tall table
            assert m.shown_rows[0] == 0 and m.height / len(m.rows) * np.diff(m.shown_rows + [len(m.rows)]).min() \
                >= TICK_SPACE - 1e-9
        assert m.rows == parent_configurations(model, model[m.variable])


@pytest.mark.parametrize("name", MODELS)
def test_show_draws_every_model(name, tmp_path):
    model = MODELS[name]()
    out = draw_model(model, tmp_path / "m.png", cpts=model.parameterised)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
