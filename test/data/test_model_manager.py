"""ModelManager, a learn, the cases it uses and TrialIntake: the learner node's work below ROS, without DDS."""

import json
from dataclasses import replace

import pytest
from conftest import MONTESANO_CONFIG, committed_events, sampled_records

from affordance_ros.core import AffordanceError, AffordanceNetwork, benchmark_network, benchmark_structure
from affordance_ros.core.ground_truth import parent_weights, weighted_rms
from affordance_ros.data.case_writer import CaseWriter
from affordance_ros.data.intake import TrialIntake
from affordance_ros.data.learn_job import learn
from affordance_ros.data.model_manager import ModelManager, StartupError
from affordance_ros.data.pairing import TrialAssembler
from affordance_ros.data.storage import CaseStore
from affordance_ros.data.training_cases import seen_until, stored_cases


def manager(tmp_path, online=False, config=None) -> ModelManager:
    """On the montesano configuration with the true arcs (for structure 'fixed')."""
    if config is None:
        config = tmp_path / "config.json"
        if not config.exists():
            truth = benchmark_structure("montesano", 1.0)
            AffordanceNetwork.load(MONTESANO_CONFIG).with_structure(
                {v.name: v.parents for v in truth.variables}).save(config)
    return ModelManager(config, tmp_path / "cases.db", tmp_path / "model.json", online_learning=online)


def seed(tmp_path, records):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in records:
            store.add(record)


def test_learns_from_the_stored_cases_writes_the_model_and_records_what_it_saw(tmp_path):
    seed(tmp_path, sampled_records(3000))
    models = manager(tmp_path)
    assert models.current.load() is None and models.current.model is None  # no model file yet
    outcome = learn(models.current.learn_job("fixed", 0.0))
    assert outcome.result.num_cases == 3000 and "learned from 3000 cases" in outcome.message
    assert not (tmp_path / "model.json").exists()  # the learn wrote its own file: the node puts it in place
    models.current.install_learned(outcome)
    assert not outcome.file.exists()
    on_disk = AffordanceNetwork.load(tmp_path / "model.json")
    assert on_disk.metadata["cases"]["count"] == 3000 and on_disk.metadata["cases"]["last_trial_id"] == "r02999"
    assert seen_until(models.store, on_disk) == 3000
    # the configured arcs were kept, and the CPTs are near the truth's
    truth = benchmark_network("montesano", 1.0, 0)
    assert on_disk.arcs == truth.arcs
    learned_cpts = [v.cpt for v in on_disk.variables]
    true_cpts = [v.cpt for v in truth.variables]
    assert weighted_rms(learned_cpts, true_cpts, parent_weights(truth)) < 0.05
    assert models.current.model is outcome.model
    models.close()


def test_a_model_file_that_does_not_fit_is_not_used_and_says_why(tmp_path):
    (tmp_path / "model.json").write_text("{not json")
    problem = manager(tmp_path).current.load()
    assert problem.startswith(f"not using the model in {tmp_path / 'model.json'}") and "not valid JSON" in problem
    other = benchmark_network("simple", 1.0, 0)
    other.save(tmp_path / "model.json")
    assert "does not fit the configuration" in manager(tmp_path).current.load()


def test_learning_with_a_prior_uses_only_the_new_cases_and_refuses_when_there_are_none(tmp_path):
    seed(tmp_path, sampled_records(300))
    models = manager(tmp_path)
    models.current.install(learn(models.current.learn_job("fixed", 0.0)).model)
    with pytest.raises(AffordanceError, match="no new cases since the current model"):
        learn(models.current.learn_job("fixed", 50.0))
    seed(tmp_path, sampled_records(40, seed=3, prefix="n"))
    second = learn(models.current.learn_job("fixed", 50.0))
    assert second.result.num_cases == 40 and "with it as a prior worth 50 cases" in second.message
    assert second.model.metadata["cases"]["count"] == 340


def test_cases_that_do_not_fit_the_configuration_are_skipped_and_counted(tmp_path):
    strange = sampled_records(1, prefix="old")[0]
    strange = replace(strange, object_features={**strange.object_features, "weight": 3.0})
    seed(tmp_path, [*sampled_records(100), strange])
    models = manager(tmp_path)
    cases, skipped, marker = stored_cases(models.store, models.config)
    assert cases.n_cases == 100 and len(skipped) == 1 and marker["last_trial_id"] == "old00000"
    assert "1 with sensor ['weight'] not in the configuration (e.g. 'old00000')" in skipped.describe()
    assert "skipped 1 stored cases" in learn(models.current.learn_job("fixed", 0.0)).message


def test_online_learning_catches_up_on_the_cases_stored_after_the_model(tmp_path):
    seed(tmp_path, sampled_records(200))
    first = manager(tmp_path)
    outcome = learn(first.current.learn_job("fixed", 0.0))
    first.current.install_learned(outcome)
    first.close()
    learned = outcome.model
    seed(tmp_path, sampled_records(15, seed=5, prefix="later"))
    models = manager(tmp_path, online=True)
    assert models.current.load() is None
    updates, message = models.current.install(models.current.model)
    assert len(updates) == 15 and all(u.ok for u in updates) and "caught up on 15" in message
    assert models.current.model.metadata["online"]["updates"] == 15 and models.current.unsaved
    models.current.save_online()
    assert not models.current.unsaved
    assert AffordanceNetwork.load(tmp_path / "model.json").metadata["online"]["updates"] == 15
    assert learned.metadata["cases"]["count"] == 200


def test_a_bad_configuration_or_structure_says_what_to_fix(tmp_path):
    broken = tmp_path / "broken.json"
    doc = json.loads(MONTESANO_CONFIG.read_text())
    doc["variables"][0]["group"] = "object"  # no action variable left
    broken.write_text(json.dumps(doc))
    with pytest.raises(StartupError, match="exactly one variable in the group 'action'"):
        manager(tmp_path, config=broken)
    with pytest.raises(AffordanceError, match="structure 'greedy' is not one of"):
        learn(manager(tmp_path).current.learn_job("greedy", 0.0))


@pytest.mark.parametrize("learning, message", [
    ({"strcture": "mcmc"}, "unknown 'learning' options ['strcture']; known: ['structure', "),
    ({"max_iter": 0}, "learning option 'max_iter' must be an integer >= 1, got 0"),
])
def test_a_mistake_in_the_learning_block_stops_the_start_not_the_first_learn(tmp_path, learning, message):
    # not a node started on it that stores trials and says what is wrong only at its first ~/learn, maybe hours later
    config = tmp_path / "typo.json"
    config.write_text(json.dumps({**json.loads(MONTESANO_CONFIG.read_text()), "learning": learning}))
    with pytest.raises(StartupError) as caught:
        manager(tmp_path, config=config)
    assert str(caught.value).startswith(f"config_path '{config}': {message}")
    assert not (tmp_path / "cases.db").exists()


def test_the_intake_stores_a_trial_once_its_three_parts_arrived_and_reports_every_mistake(tmp_path):
    models = manager(tmp_path)
    writer = CaseWriter(models.store, notify=lambda: None)
    intake = TrialIntake(models.parts, TrialAssembler(remember_completed=0), writer, 1.0)
    obj = (["color", "shape", "size"], [5.0, 0.0, 10.0])
    eff = (["obj_vel", "obj_hand_vel", "hand_vel", "contact"], [10.0, 5.0, 0.0, 5.0])
    assert [e.counter for e in intake.take("action", "t1", 10.0, "tap", 1.0)] == ["received_action"]
    intake.take("object", "t1", 10.0, obj, 1.0)
    events = intake.take("effect", "t1", 10.0, eff, 1.0) + committed_events(intake)
    assert [e.counter for e in events] == ["received_effect", "stored"] and events[1].case[0] == 1
    assert models.store.records()[0].effects["obj_vel"] == 10.0
    # the same part again (a robot re-sending what it was not told was stored): confirmed, not an error
    assert [e.counter for e in intake.take("action", "t1", 11.0, "tap", 2.0)] == ["received_action", "resent_parts"]
    mistakes = {
        "duplicate_trials": intake.take("action", "t1", 11.0, "grasp", 2.0),
        "rejected_parts": intake.take("action", "t2", 11.0, "fly", 2.0),
        "duplicate_parts": intake.take("action", "t3", 11.0, "tap", 2.0) and intake.take("action", "t3", 11.0,
                                                                                          "tap", 2.0),
    }
    for counter, reported in mistakes.items():
        assert reported[-1].counter == counter and reported[-1].message, counter
    assert "unknown action 'fly'" in mistakes["rejected_parts"][-1].message
    writer.close()
    assert models.store.count() == 1


def test_a_configuration_whose_tables_would_not_fit_is_refused_with_the_size(tmp_path):
    values = [f"v{i}" for i in range(1000)]
    doc = {"format": "affordance_ros/model/1", "variables": [
        {"name": "Action", "group": "action", "values": values[:3], "sensor": None},
        *({"name": f"O{k}", "group": "object", "values": values, "parents": [],
           "sensor": {"name": f"o{k}", "means": [5.0 * i for i in range(1000)], "stddevs": [1.0] * 1000}}
          for k in range(3)),
        *({"name": f"E{k}", "group": "effect", "values": values, "parents": ["Action", "O0", "O1"],
           "sensor": {"name": f"e{k}", "means": [5.0 * i for i in range(1000)], "stddevs": [1.0] * 1000}}
          for k in range(3))]}
    doc["variables"][0]["parents"] = []
    config = tmp_path / "huge.json"
    config.write_text(json.dumps(doc))
    with pytest.raises(StartupError, match=r"would need 9,000,003,003 numbers \(72.0 GB; the largest, of 'E0' given "
                                           r"\['Action', 'O0', 'O1'\], 3,000,000,000\)"):
        manager(tmp_path, config=config)


def test_a_learn_never_replaces_a_model_file_written_while_it_ran(tmp_path):
    # two learners on one model file (each with its own database), as a node restarted beside an old one
    seed(tmp_path, sampled_records(300))
    first = manager(tmp_path)
    other_config = tmp_path / "config.json"
    second = ModelManager(other_config, tmp_path / "other.db", tmp_path / "model.json")
    with CaseStore(tmp_path / "other.db") as store:
        store.insert_many(sampled_records(200, prefix="o"))
    slow = learn(first.current.learn_job("fixed", 0.0))  # began before the second learner wrote its model ...
    second.current.install_learned(learn(second.current.learn_job("fixed", 0.0)))
    newer = (tmp_path / "model.json").read_bytes()
    with pytest.raises(AffordanceError, match="written by another program while this learn ran"):
        first.current.install_learned(slow)  # ... so it ends after a newer model was written: that one stays
    assert (tmp_path / "model.json").read_bytes() == newer and not slow.file.exists()
    assert first.current.model is None
    # a learn that begins after the file was replaced is asked for over it: it replaces it, and says so
    _, message = first.current.install_learned(learn(first.current.learn_job("fixed", 0.0)))
    assert "was replaced or changed by another program; the learned model replaced it" in message
    assert AffordanceNetwork.load(tmp_path / "model.json").metadata["cases"]["count"] == 300
    first.close()
    second.close()


@pytest.mark.parametrize("parameter", ["database_path", "model_path"])
def test_a_folder_given_as_the_database_or_the_model_file_is_refused_at_start_naming_the_parameter(tmp_path,
                                                                                                   parameter):
    folder = tmp_path / "data"
    folder.mkdir()
    paths = {"database_path": tmp_path / "cases.db", "model_path": tmp_path / "model.json", parameter: folder}
    with pytest.raises(StartupError, match=rf"^{parameter} '{folder}' is a folder, not a file: give the file's path "
                                           rf"in it \(e.g. {folder}/"):
        ModelManager(MONTESANO_CONFIG, paths["database_path"], paths["model_path"], owner="test")
    assert [p.name for p in tmp_path.rglob("*")] == ["data"]  # nothing made: no database, no lock file
