"""Trial and TrialRecord: a trial as paired, a stored case, and the one check of data no PartValidator has seen."""

import pytest

from affordance_ros.core import AffordanceNetwork, DataError
from affordance_ros.data.offline import read_csv
from affordance_ros.data.trial import Trial, TrialRecord
from affordance_ros.share import default_config_path

VALID = dict(trial_id="x", action_variable="Action", action="tap", object_features={"color": 1.0},
             effects={"obj_vel": 2})


@pytest.mark.parametrize("fields, message", [
    (dict(trial_id=""), "non-empty string trial_id"),
    (dict(trial_id=None), "non-empty string trial_id"),
    (dict(action_variable=""), "the action variable must be a non-empty string"),
    (dict(action=""), "the action label must be a non-empty string"),
    (dict(object_features={"color": float("nan")}), "reading of sensor 'color' is nan, expected a finite number"),
    (dict(effects={"obj_vel": float("inf")}), "finite"),
    (dict(effects={"obj_vel": True}), "finite"),
    (dict(effects={"obj_vel": "9.7"}), "finite"),
    (dict(object_features={"color": 1.0}, effects={"color": 2.0}), "both object features and effects"),
    (dict(effects={"": 1.0}), "sensor names must be non-empty strings"),
])
def test_a_record_of_unchecked_data_says_what_is_wrong(fields, message):
    with pytest.raises(ValueError, match=message):
        TrialRecord.checked(**{**VALID, **fields})


def test_a_checked_record_holds_floats_and_reads_as_the_stored_form():
    record = TrialRecord.checked(**VALID, stamp=101.0, received=201.0)
    assert record.effects == {"obj_vel": 2.0} and isinstance(record.effects["obj_vel"], float)
    assert record.to_dict() == {
        "trial_id": "x", "labels": {"Action": "tap"}, "readings": {"color": 1.0, "obj_vel": 2.0},
        "sources": {"color": "object", "obj_vel": "effect"}, "stamp": 101.0, "received": 201.0}
    assert record.part("object") == {"color": 1.0} and record.part("effect") == {"obj_vel": 2.0}
    with pytest.raises(ValueError, match="unknown part 'action'"):
        record.part("action")


def test_a_paired_trial_becomes_the_record_of_its_action_variable():
    trial = Trial(trial_id="t1", action="tap", object_features={"color": 1.5, "shape": -2.0},
                  effects={"obj_vel": 10.25}, stamp=101.0, received=201.0)
    assert trial.to_record("Action").to_dict() == {
        "trial_id": "t1", "labels": {"Action": "tap"},
        "readings": {"color": 1.5, "shape": -2.0, "obj_vel": 10.25},
        "sources": {"color": "object", "shape": "object", "obj_vel": "effect"},
        "stamp": 101.0, "received": 201.0}


def test_a_csv_case_that_cannot_be_a_record_is_refused_where_it_is_read(tmp_path):
    path = tmp_path / "cases.csv"
    path.write_text("trial_id,Action,color,obj_vel\nt1,tap,1.0,2.0\n,grasp,1.5,2.5\n")
    with pytest.raises(DataError) as caught:
        read_csv(path, AffordanceNetwork.load(default_config_path()))
    assert str(caught.value) == f"'{path}' line 3: a trial needs a non-empty string trial_id, got ''"
    path.write_text("trial_id,Action,color,obj_vel\nt1,tap,1.0,2.0\n")
    (record,) = read_csv(path, AffordanceNetwork.load(default_config_path())).records
    assert record == TrialRecord.checked("t1", "Action", "tap", {"color": 1.0}, {"obj_vel": 2.0})
