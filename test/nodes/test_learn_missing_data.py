"""~/learn over DDS when no stored case has a configured sensor's readings: refused naming it, unless the
configuration's learning block allows it (then learned, with the warning in the answer and the model)."""

import dataclasses

from conftest import sampled_records, write_config

from affordance_ros.core import AffordanceNetwork
from affordance_ros.data.storage import CaseStore

MISSING = "no case has data for the variable 'Size' (no column 'size')"


def store_without_size(path):
    with CaseStore(path) as store:
        for record in sampled_records(120):
            store.add(dataclasses.replace(record, object_features={
                name: x for name, x in record.object_features.items() if name != "size"}))


def test_a_sensor_the_robot_never_published_is_named_and_nothing_is_learned(ros, tmp_path):
    store_without_size(tmp_path / "cases.db")
    learner = ros.learner()
    answer = ros.learn()
    assert not answer.success and MISSING in answer.message and "allow_missing" in answer.message
    assert not (tmp_path / "model.json").exists() and learner.counts["learn_failed"] == 1


def test_allowed_by_the_configuration_it_is_learned_with_the_warning(ros, tmp_path):
    store_without_size(tmp_path / "cases.db")
    ros.learner(config_path=str(write_config(tmp_path / "config.json", allow_missing=True)))
    answer = ros.learn()
    assert answer.success, answer.message
    assert f"warning: {MISSING}: learned all the same (allow_missing)" in answer.message
    model = AffordanceNetwork.load(tmp_path / "model.json")
    assert model.metadata["learned"]["warnings"][0].startswith(MISSING)
