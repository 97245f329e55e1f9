"""The planners of docs/planner.md run against the learner node as written, and print its answers."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import learned_node

from affordance_ros.core import predict, rank_actions
from affordance_ros.core.suggest import Candidate, suggest_trials

PAGE = Path(__file__).resolve().parents[2] / "docs" / "planner.md"
SMALL_BOX = {"color": 5.1, "shape": 5.0, "size": 0.1}


def example(tmp_path, file: str) -> Path:
    """The page's block written to ``file``, where a test can run it."""
    blocks = re.findall(rf"<!-- file: {re.escape(file)} -->\n```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) == 1
    script = tmp_path / file
    script.write_text(blocks[0])
    return script


def run(script: Path) -> list[str]:
    result = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.posterior
def test_the_planner_prints_the_learners_answers(ros, tmp_path):
    _, model = learned_node(ros, tmp_path, 300)
    script = example(tmp_path, "planner.py")
    assert len([line for line in script.read_text().splitlines() if line.strip()]) <= 15  # a planner in 15 lines
    lines = run(script)
    ranking = rank_actions(model, {"ObjVel": "fast"}, sensors=SMALL_BOX)
    assert lines[:3] == [f"{a} makes it move fast with probability {p:.2f} (90 %: {low:.2f} to {high:.2f})"
                         for a, p, (low, high) in zip(ranking.actions, ranking.probabilities, ranking.intervals)]
    fast = predict(model, ["effect"], sensors=SMALL_BOX, values={"Action": ranking.actions[0]}).marginals["ObjVel"]
    assert lines[3] == f"{ranking.actions[0]}: ObjVel fast with probability {fast['fast']:.2f}"
    best = suggest_trials(model, [Candidate(SMALL_BOX), Candidate({}, {"Shape": "circle", "Size": "big"})],
                          top=1).suggestions[0]
    assert lines[4] == f"to learn the most: {best.action} on object {best.candidate}" and len(lines) == 5


@pytest.mark.posterior
def test_the_async_planner_prints_the_best_action(ros, tmp_path):
    _, model = learned_node(ros, tmp_path, 300)
    lines = run(example(tmp_path, "async_planner.py"))
    ranking = rank_actions(model, {"ObjVel": "fast"}, sensors=SMALL_BOX)
    assert lines == [f"do {ranking.actions[0]}: ObjVel fast with probability {ranking.probabilities[0]:.2f}"]
