"""The planner example of docs/node.md runs against the learner node as written."""

import re
import subprocess
import sys
from pathlib import Path

from conftest import sampled_records

from affordance_ros.data.storage import CaseStore

PAGE = Path(__file__).resolve().parents[2] / "docs" / "node.md"


def test_planner_example(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(300):
            store.add(record)
    ros.learner()
    assert ros.learn().success
    blocks = [b for b in re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
              if "class AffordanceClient(Node)" in b]
    assert len(blocks) == 1
    script = tmp_path / "planner.py"
    script.write_text(blocks[0])
    result = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == ["grasp", "tap", "touch"]
    assert all(re.fullmatch(r"\w+: the object moves fast with probability [01]\.\d\d", line) for line in lines[:3])
    p_fast = {line.split(":")[0]: line[-4:] for line in lines[:3]}
    # ~/select_action: the same probabilities, the actions ranked by them
    assert len(lines) == 4 and lines[3].startswith("to make it move fast: ")
    ranked = re.findall(r"(\w+) \(([01]\.\d\d)\)", lines[3])
    assert sorted(action for action, _ in ranked) == ["grasp", "tap", "touch"]
    assert all(p == p_fast[action] for action, p in ranked), (lines, ranked)
    assert [float(p) for _, p in ranked] == sorted((float(p) for _, p in ranked), reverse=True)
