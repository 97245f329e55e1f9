"""~/select_action over DDS when the model cannot tell the actions apart: `tied` and a message that says why."""

import json
import subprocess

from conftest import CLI, MONTESANO_CONFIG, sampled_records

from affordance_ros.core import AffordanceNetwork, rank_actions
from affordance_ros.data.storage import CaseStore

SERVICE = "/affordance_learner/select_action"


def fixed_config(path, parents):
    """The montesano configuration with these arcs (the other variables without parents), kept by 'fixed'."""
    doc = json.loads(MONTESANO_CONFIG.read_text())
    for v in doc["variables"]:
        v["parents"] = parents.get(v["name"], [])
    path.write_text(json.dumps(doc))
    return path


def select(ros, effect, label):
    from affordance_ros.srv import SelectAction  # (the generated interfaces: not in a pip install's tests)

    return ros.call(SelectAction, SERVICE, effect_names=[effect], effect_values=[label])


def test_an_effect_the_action_does_not_cause_ties_every_action_and_says_why(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(300):
            store.add(record)
    config = fixed_config(tmp_path / "config.json", {"ObjVel": ["Action"]})
    ros.learner(config_path=str(config))
    assert ros.learn(structure="fixed").success
    model = AffordanceNetwork.load(tmp_path / "model.json")

    caused = select(ros, "ObjVel", "fast")
    assert caused.success and not caused.tied and caused.message == ""
    assert not rank_actions(model, {"ObjVel": "fast"}).tied

    tied = select(ros, "HandVel", "fast")
    assert tied.success and tied.tied, tied.message
    assert len(set(tied.probabilities)) == 1 and rank_actions(model, {"HandVel": "fast"}).tied
    assert tied.message == (
        f"every action gives HandVel=fast with the same probability ({tied.probabilities[0]:.4g}): the model cannot "
        "tell the actions apart here (HandVel does not depend on Action in the model: no arcs lead from it; learn "
        "from more trials, or see the learning options' forbidden arcs)")

    printed = subprocess.run([CLI, "call", "select-action", "--effect", "HandVel=fast"], capture_output=True,
                             text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr
    answer = json.loads(printed.stdout)
    assert answer["tied"] is True and answer["message"] == tied.message
    printed = subprocess.run([CLI, "call", "select-action", "--effect", "ObjVel=fast"], capture_output=True,
                             text=True, timeout=120)
    answer = json.loads(printed.stdout)
    assert answer["tied"] is False and "message" not in answer
