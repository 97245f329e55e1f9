"""The node's learn report (data/learn.py) carries what the learner warns of, e.g. a BIC search at its cap."""

import json
import subprocess
import sys

from affordance_ros.core import AffordanceNetwork
from affordance_ros.data import offline
from affordance_ros.data.learn_job import LearnJob, learn
from affordance_ros.share import share_directory


def test_a_sensor_at_max_components_is_a_warning_of_the_learn_report(tmp_path):
    doc = json.loads((share_directory() / "config" / "montesano.json").read_text())
    size = next(v for v in doc["variables"] if v["name"] == "Size")
    size["values"], size["sensor"] = None, {"name": "size", "max_components": 2}   # three sizes, at most two
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(doc))
    config = AffordanceNetwork.load(config_path)
    done = subprocess.run([sys.executable, "-m", "affordance_ros.tools.cli", "simulate", "--scenario", "montesano",
                           "--trials", "300", "--out", str(tmp_path / "cases.csv")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    offline.append_to_database(tmp_path / "cases.db", offline.read_csv(tmp_path / "cases.csv", config).records)
    outcome = learn(LearnJob(config, config_path, tmp_path / "cases.db", tmp_path / "model.json", "k2", 0.0))
    assert ("; warning: 'Size': BIC on every reading chose 2 values, the most its sensor's 'max_components' allows"
            in outcome.message)
