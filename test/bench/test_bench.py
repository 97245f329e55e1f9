"""`affordance-ros-bench ... --quick` through the installed command: the benchmark code cannot rot.

Checks that the PNGs, tables and JSON are written and sane; timings are never asserted.
"""

import importlib.util
import json
import math
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import BENCH, REPO_ROOT, interrupted

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def bench(*args, out: Path, timeout: float = 600):
    """Run ``affordance-ros-bench ARGS --quick`` into ``out``; what it printed. A bench still running after
    ``timeout`` seconds (a hang guard: these machines are shared) is killed with every process it started: a
    node left behind would answer the next tests' requests on the same domain."""
    assert BENCH, "affordance-ros-bench is not installed (tools/setup_env.sh installs benchmarks/ into .venv)"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    with subprocess.Popen([BENCH, *args, "--quick", "--out", str(out)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env, cwd=out, start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            pytest.fail(f"bench {' '.join(args)} still running after {timeout} s:\n{stdout[-3000:]}{stderr[-3000:]}")
    assert process.returncode == 0, stdout + stderr
    return stdout


def assert_png(path: Path) -> None:
    assert path.is_file(), f"{path} was not written"
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and 5_000 < len(data) < 500_000, path


def table_rows(text: str) -> list:
    """Data rows of the first markdown table in ``text``, as lists of cells."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|---"):
            continue
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
        elif rows:
            break
    return rows[1:]


def finite_numbers(doc):
    if isinstance(doc, dict):
        for v in doc.values():
            yield from finite_numbers(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from finite_numbers(v)
    elif isinstance(doc, float):
        yield doc


def test_paper_quick(tmp_path):
    stdout = bench("paper", out=tmp_path)
    for name in ("paper_rms_simple_sigma1.png", "paper_rms_simple_sigma3.png", "paper_rms_montesano_sigma3.png",
                 "paper_loglik_montesano_30.png"):
        assert_png(tmp_path / name)
    rows = table_rows((tmp_path / "paper_table.md").read_text())
    settings = {(r[0], r[1], r[2]) for r in rows}
    assert settings == {("simple", "1", "30"), ("simple", "1", "300"), ("simple", "3", "30"), ("simple", "3", "300"),
                        ("montesano", "3", "30"), ("montesano", "3", "300"), ("montesano", "3", "1000")}
    for row in rows:
        rms = [float(row[i]) for i in (3, 4, 7, 8)]
        assert all(0 < x < 1 for x in rms), row
        assert re.fullmatch(r"[+-]\d+\.\d %", row[5]) and row[6], row
    doc = json.loads((tmp_path / "paper_results.json").read_text())
    assert doc["repetitions"] == 2 and len(doc["summary"]) == 7
    for summary in doc["summary"]:
        assert all(math.isfinite(x) for x in summary["median_rms"].values())
        assert all(math.isfinite(x) for x in summary["median_weighted_rms"].values())
    traced = doc["results"]["montesano_sigma3_n30"][0]["methods"]["em_ml"]["trace"]
    assert len(traced) >= 2 and all(math.isfinite(x) for x in traced)
    # EM maximises the likelihood: it never ends below where it started.
    assert traced[-1] >= traced[0] - 1e-6
    assert "reduction (ML, paper's form)" in stdout


def test_perf_quick(tmp_path):
    stdout = bench("perf", out=tmp_path)
    assert_png(tmp_path / "perf_em_cases.png")
    assert_png(tmp_path / "perf_em_nodes.png")
    doc = json.loads((tmp_path / "perf_results.json").read_text())
    assert [r["cases"] for r in doc["em_vs_cases"]] == [300, 1000, 3000]
    assert {(r["shape"], r["nodes"]) for r in doc["em_vs_nodes"]} >= {("chain", 5), ("tree", 20)}
    for row in doc["em_vs_cases"] + doc["em_vs_nodes"]:
        assert 0 <= row["per_iteration"] < row["to_convergence"] < 60 and row["iterations"] >= 1
    assert 0 < doc["memory"]["em_peak_traced_mb"] < doc["memory"]["max_rss_mb"] < 4096
    assert 0 < doc["predict"]["one_median"] < 1 and 0 < doc["predict"]["batch_seconds"] < 30
    assert all(math.isfinite(x) for x in finite_numbers(doc))
    assert "one predict:" in stdout and "predict_batch of 10000:" in stdout
    assert len(table_rows((tmp_path / "perf_table.md").read_text().split("\n\n", 1)[1])) == 3
    if importlib.util.find_spec("pyagrum") is None or importlib.util.find_spec("pgmpy") is None:
        assert doc["peers"] is None and "benchmark-only extras" in stdout
        return
    # the CPTs with the structure given: every learner learns the same, ours from counts
    assert [r["network"] for r in doc["peers"]["cpts"]] == ["asia", "child"]
    for row in doc["peers"]["cpts"]:
        assert row["pyagrum_difference"] < 1e-9 and row["pgmpy_difference"] < 1e-9
        assert row["ours_held_out"] == pytest.approx(row["pyagrum_held_out"], rel=1e-9)
        assert all(row[key] > 0 for key in ("ours", "pyagrum", "pyagrum_load", "pgmpy", "ours/pyagrum_load"))
    em = doc["peers"]["em"]
    assert 0 < em["ours_iteration"] < em["pyagrum_iteration"] and 0 < em["ours_whole"] and 0 < em["pgmpy_whole"]


@pytest.mark.skipif(importlib.util.find_spec("pgmpy") is None,
                    reason="pgmpy is a benchmark-only extra (tools/setup_bench.sh)")
def test_pgmpy_quick(tmp_path):
    stdout = bench("pgmpy", out=tmp_path)
    doc = json.loads((tmp_path / "pgmpy_results.json").read_text())
    # Same model, data and start: both learners give the same CPTs.
    assert doc["max_abs_cpt_difference"] < 1e-9
    assert doc["ratio"] > 1 and math.isfinite(doc["ratio"])
    assert "pgmpy/ours per EM iteration:" in stdout
    assert len(table_rows((tmp_path / "pgmpy_table.md").read_text())) == 2


@pytest.mark.ros
def test_dds_quick(tmp_path):
    stdout = bench("dds", "--cases", "60", out=tmp_path)
    doc = json.loads((tmp_path / "dds_results.json").read_text())
    assert [b["trials_published"] for b in doc["bursts"]] == [60, 60]
    for burst in doc["bursts"]:
        assert 0 < burst["cases_stored"] <= 60 and burst["lost"] == 60 - burst["cases_stored"]
        assert burst["cases_per_second"] > 0
    assert doc["bursts"][0]["setting"] == "learner defaults (keep all)" and doc["bursts"][0]["lost"] == 0
    assert doc["learn_cases"] == doc["bursts"][0]["cases_stored"]  # the services run with the defaults
    assert 0 < doc["predict_median"] <= doc["predict_p99"] < 10
    assert doc["busy_learns_ok"] and doc["busy_learns"] >= 1
    assert 0 < doc["busy_predict_median"] <= doc["busy_predict_p99"] <= doc["busy_predict_max"] < 10
    assert "~/predict round trip, median of 100" in stdout


def test_beyond_quick(tmp_path):
    """Online EM vs batch EM and sensors inside EM: a table row per setting, finite figures."""
    printed = bench("beyond", out=tmp_path)
    table = (tmp_path / "beyond_table.md").read_text()
    assert table.strip() in printed
    rows = table_rows(table)
    assert [r[0] for r in rows] == ["simple", "montesano"]
    for row in rows:
        errors = [float(x) for x in row[3:6]]
        assert all(0 < e < 1 for e in errors), row
    results = json.loads((tmp_path / "beyond_results.json").read_text())
    assert set(results["sensors"][0]) >= {"true_sensors", "rough_fixed", "rough_fitted"}
    assert all(math.isfinite(x) for x in finite_numbers(results["online"]))


@pytest.mark.ros
def test_faults_quick(tmp_path):
    stdout = bench("faults", "--cases", "150", out=tmp_path, timeout=850)  # the longest: ~4 min here
    doc = json.loads((tmp_path / "faults_results.json").read_text())
    confirmed = [k for k in doc["kills"] if k["confirm"]]
    assert confirmed and all(k["lost"] == 0 and k["robot_exit"] == 0 for k in confirmed)
    assert doc["stops"]["exit_0"] == doc["stops"]["stops"] and doc["stops"]["cannot_rollback"] == 0
    assert doc["stops"]["counter_mismatches"] == 0
    assert doc["flood"]["bad_stored"] == 0 and doc["flood"]["good_stored"] == doc["flood"]["rounds"]
    assert "kill -9 mid-stream + restart" in stdout


def test_link_quick(tmp_path):
    """Two network namespaces and the lossy bridge between them: three short faults, every trial stored once."""
    from affordance_ros_bench.linked_hosts import namespaces_problem
    problem = namespaces_problem()
    if problem:
        pytest.skip(f"no network namespaces here: {problem}")
    stdout = bench("link", "--cases", "40", out=tmp_path, timeout=300)
    doc = json.loads((tmp_path / "link_results.json").read_text())
    assert [r["fault"] for r in doc["runs"]] == ["none", "10 % of frames lost", "outage 5 s"]
    for r in doc["runs"]:
        assert r["sent"] == r["confirmed"] == r["stored"] == 40 and r["lost"] == r["stored_twice"] == 0, r
        assert r["given_up"] == 0 and r["robot_exit"] == 0 and r["ip_fragments"] == 0, r
    assert doc["runs"][2]["return_to_last_confirmed_s"] > 0
    assert "| outage 5 s | 40 | 40 | 40 | 0 | 0 | 0 |" in stdout


def test_scenario_quick(tmp_path):
    """The scenarios: a row per target and metric with ours and every baseline, and the time of the folds; ours
    no worse beyond its noise on any figure than the quick run kept in the repository (a change that trades one
    use for another fails here: if it is meant, keep the new run's scenario_results.json as
    docs/bench/scenario_quick_results.json and say why in docs/benchmarks/pooling.md)."""
    reference = REPO_ROOT / "docs" / "bench" / "scenario_quick_results.json"
    printed = bench("scenario", "--reps", "3", "--compare", str(reference), out=tmp_path)
    assert re.search(rf"compared with {re.escape(str(reference))}: \d+ figures of ours, 0 worse beyond their noise",
                     printed)
    table = (tmp_path / "scenario_table.md").read_text()
    assert table.strip() in printed
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()
            if line.startswith(("| Action", "| Effect"))]
    assert {(r[0], r[1]) for r in rows} >= {("Effect", "euclidean_rmse"), ("Effect", "rmse"), ("Effect", "log_density"),
                                            ("Action", "accuracy"), ("Action", "log_loss")}
    header = next(line for line in table.splitlines() if line.startswith("| target") and "logistic" in line)
    assert [c.strip() for c in header.strip("|").split("|")][2:-1] == [
        "ours", "majority", "cell_mean", "nearest_centroid", "knn", "gradient_boosting", "random_forest",
        "logistic_regression"]
    for block in table.split("\n\n"):     # every row a cell per method of its table's header ('-': no such figure)
        lines = [line for line in block.splitlines() if line.startswith("|") and not line.startswith("|---")]
        assert all(line.count("|") == lines[0].count("|") for line in lines), block
    assert all(len(r) == 11 for r in rows if r[0] == "Action")   # ours, 7 baselines and the wins
    assert all(len(r) in (10, 11) for r in rows)  # a table of readings alone has no logistic_regression column
    assert "Time: 3 folds on 264 tools cases" in table and "A fold's learn on the tools scenario" in table
    results = json.loads((tmp_path / "scenario_results.json").read_text())
    assert results["time_10_folds"] > 0 and set(results["results"]) == {
        "tools leave-one-object-out", "tools 10-fold", "hands 10-fold", "hands_shared 10-fold",
        "tools_unseen leave-one-object-out", "transfer learn on hands, test on tools", "montesano 10-fold"}
    assert results["seeds"]["transfer learn on hands, test on tools"] == list(range(12))   # the transfer: 4 a rep
    assert results["seeds"]["hands 10-fold"] == [0, 1, 2] and results["sizes"]["montesano_trials"] == 300
    for cost in results["fold_costs"]:     # values per parent configuration: two each (a core, a wide one)
        assert cost["effect_values"] == 2 * cost["parent_configurations"] and cost["peak_mb"] > 0
@pytest.mark.skipif(importlib.util.find_spec("pyagrum") is None or importlib.util.find_spec("pgmpy") is None,
                    reason="pyAgrum and pgmpy are benchmark-only extras (tools/setup_bench.sh)")
def test_inference_quick(tmp_path):
    """Six networks against pyAgrum: same answers to rounding, a row per network, finite timings."""
    stdout = bench("inference", out=tmp_path)
    doc = json.loads((tmp_path / "inference_results.json").read_text())
    assert [r["network"] for r in doc["results"]] == ["asia", "child", "insurance", "alarm", "hailfinder", "win95pts"]
    for r in doc["results"]:
        assert r["max_abs_difference"] < 1e-12, r
        assert 0 < r["ours_warm"] < 1 and 0 < r["pyagrum_warm"] < 1 and r["ours_batch"] > 0
        # the largest difference covers the mixed patterns through predict and the mixed batches too
        assert r["max_abs_difference"] >= max(r["mixed"]["max_abs_difference"], r["mixed_batch"]["max_abs_difference"])
        for name in ("new", "seen"):
            assert 0 < r["mixed"][f"{name}_ours"] <= r["mixed"][f"{name}_ours_p99"] < 1
            assert r["mixed"][f"{name}_ratio"] > 0
        for k in ("200", "1000"):
            assert r["mixed_batch"][k]["ours_cases_per_second"] > 0 and r["mixed_batch"][k]["ours_peak_mb"] > 0
    assert len(table_rows((tmp_path / "inference_table.md").read_text())) == 6
    assert "largest difference to pyAgrum" in stdout and stdout.count("largest difference to pyAgrum") == 6
    if importlib.util.find_spec("rclpy") is not None:
        dds = doc["dds_predict"]
        assert 0 < dds["in_process_median"] <= dds["in_process_p99"] and 0 < dds["predict_median"] <= dds["predict_p99"]
        assert 0 < dds["busy_predict_median"] <= dds["busy_predict_p99"] and dds["busy_learns"] >= 1


@pytest.mark.ros
def test_scale_quick(tmp_path):
    """~/learn through the node on a written database: every case learned, peak memory measured."""
    bench("scale", out=tmp_path)
    doc = json.loads((tmp_path / "scale_results.json").read_text())
    (row,) = doc["results"]
    assert row["cases"] == row["learned_cases"] == 2000
    assert 0 < row["learn_duration"] < row["round_trip"] < 60 and row["iterations"] >= 1
    assert 0 < row["node_peak_mb"] < 4096 and 0 < row["worker_peak_mb"] < 4096
    assert len(table_rows((tmp_path / "scale_table.md").read_text())) == 1


@pytest.mark.skipif(importlib.util.find_spec("pyagrum") is None or importlib.util.find_spec("pgmpy") is None,
                    reason="pyAgrum and pgmpy are benchmark-only extras (tools/setup_bench.sh)")
def test_structure_quick(tmp_path):
    """K2 in the same order finds what pyAgrum's K2 finds; every learner gets an SHD and a time."""
    bench("structure", out=tmp_path)
    doc = json.loads((tmp_path / "structure_results.json").read_text())
    for network in ("alarm", "insurance"):
        rows = {r["learner"]: r for r in doc["results"] if r["network"] == network}
        assert len(rows) == 5
        ours = rows["affordance_ros K2 (K2 score, true order)"]
        theirs = rows["pyAgrum K2 (K2 score, true order)"]
        assert ours["shd"] == theirs["shd"] and ours["arcs"] == theirs["arcs"]
        for r in rows.values():
            assert r["shd"] == r["missing"] + r["extra"] + r["reversed"] and r["seconds"] > 0
    # K2 against pyAgrum's learnDAG, as a user of both runs it: the same arcs, a time for each
    assert [(r["network"], r["cases"]) for r in doc["k2"]] == [(n, 1000) for n in ("asia", "child", "insurance",
                                                                                   "alarm")]
    for r in doc["k2"]:
        assert r["same_arcs"] and all(r[key] > 0 for key in ("ours_codes", "ours_cases", "pyagrum", "pyagrum_load"))


def test_em_quick(tmp_path):
    """SQUAREM: fewer E-steps, the same fixed point; a latent variable: the default start beats the uniform one."""
    bench("em", out=tmp_path)
    doc = json.loads((tmp_path / "em_results.json").read_text())
    (row,) = doc["acceleration"]
    assert row["squarem"]["iterations"] < row["none"]["iterations"]
    assert row["tight_iterations"]["squarem"] < row["tight_iterations"]["none"]
    assert row["fixed_point_difference"] < 1e-4
    assert row["squarem"]["objective"] >= row["none"]["objective"] - 1e-6
    for latent in doc["latent"]:   # needs pgmpy's networks
        assert latent["default"]["log_likelihood"] > latent["uniform_before"]["log_likelihood"] + 10
        assert latent["n_init_5"]["log_likelihood"] >= latent["default"]["log_likelihood"] - 1e-6


@pytest.fixture(scope="module")
def quick_exploration(tmp_path_factory):
    """One quick run of bench exploration: its folder and what it printed."""
    out = tmp_path_factory.mktemp("exploration")
    return out, bench("exploration", out=out)


def test_exploration_quick(quick_exploration):
    """Learning curves of the four strategies on both worlds, the goal said, the montesano bound, the ranking
    timed, the plot drawn."""
    tmp_path, printed = quick_exploration
    table = (tmp_path / "exploration_table.md").read_text()
    assert table.strip() in printed
    results = json.loads((tmp_path / "exploration_results.json").read_text())
    assert results["checkpoints"] == [25, 50, 100] and results["reps"] == 1
    for world in ("montesano", "tools"):
        summary = results["worlds"][world]["summary"]
        assert set(summary) == {"active", "parameter_gain", "random", "round_robin"}
        for strategy, curves in summary.items():
            assert len(curves["log_density_natural"]) == len(curves["rmse_balanced"]) == 3
            assert all(math.isfinite(x) and x < 0 for x in curves["log_density_natural"][1:]), (world, strategy)
            assert all(math.isfinite(x) and x > 0 for x in curves["rmse_natural"][1:]), (world, strategy)
        assert set(results["worlds"][world]["trials_to_reach"]) == {"natural", "balanced"}
    assert table.count("the goal (at most 150) is") == 4
    for test, bound in results["bound"].items():  # the oracle allocation is never worse than random trials
        assert all(o <= r + 1e-9 for o, r in zip(bound["oracle"], bound["random"])), test
        assert bound["random"] == sorted(bound["random"], reverse=True)
    assert "oracle reaches random's 100" in table
    for world, timing in results["ranking"].items():
        assert timing["candidates"] == 20 and timing["best_ms"] > 0
    assert "| tools | 4 x 20 |" in table
    assert_png(tmp_path / "exploration_curves.png")


def test_exploration_resume_runs_only_the_seeds_an_earlier_run_lacks(quick_exploration, tmp_path):
    """--resume keeps an earlier file's runs (the same curves, seed by seed) and runs only the new seeds; a file made
    with other checkpoints is refused, not mixed in."""
    first, second = quick_exploration[0], tmp_path / "second"
    second.mkdir()
    earlier = json.loads((first / "exploration_results.json").read_text())
    printed = bench("exploration", "--reps", "2", "--resume", str(first / "exploration_results.json"), out=second)
    assert "bench exploration: 8 runs in" in printed and "(8 kept from" in printed
    results = json.loads((second / "exploration_results.json").read_text())
    assert results["reps"] == 2
    for world, made in results["worlds"].items():
        for strategy, seeds in made["runs"].items():
            kept = earlier["worlds"][world]["runs"][strategy][0]
            assert len(seeds) == 2 and json.dumps(seeds[0]) == json.dumps(kept)  # (NaN != NaN)
            assert json.dumps(seeds[1]) != json.dumps(seeds[0])
    other = json.loads((first / "exploration_results.json").read_text())
    other["checkpoints"] = [25, 50, 100, 150]
    (tmp_path / "other.json").write_text(json.dumps(other))
    done = subprocess.run([BENCH, "exploration", "--quick", "--resume", str(tmp_path / "other.json"),
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=400)
    assert done.returncode != 0 and "made with other checkpoints" in done.stderr


def benchmarks_page(topic: str) -> str:
    """The text of docs/benchmarks/TOPIC.md, a detail page that the summary docs/benchmarks.md links to."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    assert f"(benchmarks/{topic}.md)" in (docs / "benchmarks.md").read_text(), f"benchmarks.md links no {topic}.md"
    return (docs / "benchmarks" / f"{topic}.md").read_text()


def test_benchmarks_section_12_gives_the_figures_of_its_results_file():
    """§12's page (docs/benchmarks/exploration.md): its trials-to-reach table and its number of seeds are
    docs/bench/exploration_results.json's (a rerun copied into docs/bench without the text, or the reverse, fails
    here)."""
    repo = Path(__file__).resolve().parents[2]
    results = json.loads((repo / "docs" / "bench" / "exploration_results.json").read_text())
    section = benchmarks_page("exploration")
    assert section.startswith("# 12. Which trial next")
    assert f"**{results['reps']} seeds**" in section
    for world, made in results["worlds"].items():
        for test, label in (("natural", "as they come"), ("balanced", "every kind alike")):
            reached = made["trials_to_reach"][test]
            row = (f"| {world} | {label} | " + " | ".join(str(reached[s]) for s in
                                                         ("active", "parameter_gain", "random", "round_robin")) + " |")
            assert row in section, row


def test_the_excess_log_loss_of_a_row_is_what_its_posterior_mean_loses():
    """excess_log_loss (Monte Carlo) against the closed forms for a row p ~ Dirichlet(1) estimated by its posterior
    mean: before any trial, log r - E[H(p)]; after one, H of (1 + e_k) / (r + 1) - E[H(p)] (every outcome alike);
    and it falls with the trials."""
    import numpy as np
    from scipy.special import digamma, entr

    from affordance_ros_bench.exploration import excess_log_loss

    for card in (2, 3, 4):
        loss = excess_log_loss(card, 50)
        entropy = digamma(card + 1) - digamma(2)  # E[H(p)] under Dirichlet(1)
        assert loss[0] == pytest.approx(np.log(card) - entropy, abs=0.01)
        after_one = entr((1.0 + np.eye(card)[0]) / (card + 1)).sum()
        assert loss[1] == pytest.approx(after_one - entropy, abs=0.01)
        assert np.all(np.diff(loss) < 0) and loss[50] < loss[0] / 10


def test_exploration_scores_are_the_predictive_density_of_the_effects():
    """The held-out log-density the exploration bench reports, log p(a, o, e) - log p(a, o), is the predictive
    density of the effect readings given the action and the object's readings."""
    import numpy as np

    from affordance_ros.core import predict_batch
    from affordance_ros_bench.exploration import HELD_OUT, Setting, held_out, scores

    setting = Setting("tools", 0)
    rng = np.random.default_rng(1)
    model = setting.learn(held_out(setting, rng))
    test = held_out(setting, rng)
    log_density, rmse = scores(model, setting, test)
    causes = {name: x for name, x in test.items() if name not in ("Action", "dx", "dy")}
    batch = predict_batch(model, ["Effect"], sensors=causes, values={"Action": test["Action"]})
    prediction = batch.readings["Effect"]
    effects = np.stack([test["dx"], test["dy"]], axis=1)
    assert len(test["dx"]) == HELD_OUT
    assert log_density == pytest.approx(np.mean(prediction.log_density(effects)), rel=1e-9)
    assert rmse == pytest.approx(np.sqrt(np.mean((prediction.mean - effects) ** 2)), rel=1e-12)


def test_posterior_quick(tmp_path):
    """Coverage of the truth by the 90 % intervals per cell, beside EM's counts', with the structure learned beside K2's
    and the given arcs', and the cost with the posterior and without it, on a model of one structure and on one
    averaged over structures: every cell and call there, the numbers sane."""
    printed = bench("posterior", out=tmp_path)
    table = (tmp_path / "posterior_table.md").read_text()
    assert table.strip() in printed
    results = json.loads((tmp_path / "posterior_results.json").read_text())
    assert set(results["cells"]) == {f"{mode} {n}" for mode in ("labels", "sigma1", "sigma3") for n in (10, 100)}
    for cell, coverage in results["cells"].items():
        assert all(0.0 <= c[0] <= 1.0 for c in coverage.values() if isinstance(c, list)), cell
    for call in ("predict", "rank_actions", "predict_batch, 1000 cases", "learn_300_cases"):
        assert results["costs"][call]["with"] > 0 and results["costs"][call]["without"] > 0, call
    learned = results["learned"]["sigma3 100"]
    assert all(0.0 <= learned[key][0] <= 1.0 for key in ("averaged", "k2", "given", "disagreement"))
    assert 0.0 <= learned["averaged_missed"][0] <= 10.0 and learned["averaged_width"][0] > 0
    averaged = results["averaged_costs"]
    assert averaged["learn_300_cases"] > 0 and averaged["structures"] >= 1
    for call in ("predict", "rank_actions", "rank_actions, optimistic", "predict_batch, 1000 cases"):
        assert averaged[call]["with"] > 0 and averaged[call]["without"] > 0, call
    assert len(table_rows(table)) == 6


def test_decisions_quick(tmp_path):
    """Every strategy and random in the five worlds: regrets, the final policy, truths locked out in the worlds with
    watched kinds (lockin, rare, size), the targets said, the plot drawn."""
    printed = bench("decisions", out=tmp_path)
    table = (tmp_path / "decisions_table.md").read_text()
    assert table.strip() in printed
    results = json.loads((tmp_path / "decisions_results.json").read_text())
    assert results["horizon"] == 40 and results["checkpoints"] == [20, 40]
    assert list(results["worlds"]) == ["montesano", "tools", "lockin", "rare", "size"]
    for world, summary in results["worlds"].items():
        assert set(summary) == {"expected", "optimistic", "thompson", "cautious", "random"}, world
        for policy, s in summary.items():
            assert 0 <= s["cumulative_20"][0] <= s["cumulative_40"][0] <= 40, (world, policy)
            assert 0 <= s["final_40"][0] <= 1 and len(s["curve"]) == 4, (world, policy)
            assert ("locked_out_40" in s) == (world in ("lockin", "rare", "size")), (world, policy)
        assert ("truths locked out" in table.split(f"\n{world}: ")[1].split("\n\n")[1]) == ("locked_out_40" in s)
    assert "lockin targets: optimistic's regret over trials" in table
    assert_png(tmp_path / "decisions_regret.png")


def test_decisions_runs_only_the_worlds_and_strategies_asked_for(tmp_path):
    """--worlds / --policies: those runs only, optimistic's lockin target said without thompson's; a name it
    does not know is refused with the names it knows."""
    printed = bench("decisions", "--worlds", "lockin", "--policies", "optimistic,expected", out=tmp_path)
    results = json.loads((tmp_path / "decisions_results.json").read_text())
    assert list(results["worlds"]) == ["lockin"] and list(results["worlds"]["lockin"]) == ["expected", "optimistic"]
    assert set(results["targets"]) == {"optimistic_late_ratio", "optimistic_locked_out", "met"}
    assert "lockin targets: optimistic's regret over trials" in printed and "not all run" in printed
    assert_png(tmp_path / "decisions_regret.png")
    refused = subprocess.run([BENCH, "decisions", "--worlds", "lockin,kitchen", "--quick", "--out", str(tmp_path)],
                             capture_output=True, text=True)
    assert refused.returncode == 2
    assert "unknown kitchen: choose from montesano, tools, lockin, rare, size" in refused.stderr


def test_the_regret_of_the_decision_worlds_is_against_the_truth():
    """p_truth(goal | action, kind) of the decision worlds is the truth's CPT (lockin, tools) or its marginal
    (montesano); the lockin world's special kind has its best action best by far there, and bad elsewhere; the rare
    world's rare kind (1 in 12) has its best 0.55 against 0.45; in the size world each size has its own best action
    whatever the shape, 0.08-0.20 better than the others, and every kind is watched."""
    import numpy as np

    from affordance_ros_bench.decisions import World

    lockin = World("lockin", 3)
    cpt = lockin.truth["Outcome"].cpt[..., 1]                       # (actions, kinds)
    np.testing.assert_allclose(lockin.success[:, :, 0], cpt.T, atol=1e-12)
    best = lockin.success[lockin.special, :, 0]
    assert best.argmax() == lockin.best_special and best.max() - np.sort(best)[-2] > 0.1
    others = np.delete(lockin.success[:, lockin.best_special, 0], lockin.special)
    assert others.max() < 0.25
    tools = World("tools", 0)
    assert tools.goals[1] == ("Distance", "far")
    np.testing.assert_allclose(tools.success[:, :, 1], tools.truth["Distance"].cpt[..., 2].reshape(4, 33).T,
                               atol=1e-12)
    montesano = World("montesano", 0)
    assert montesano.success.shape == (24, 3, 12) and np.all((0 <= montesano.success) & (montesano.success <= 1))
    for seed in range(5):
        rare = World("rare", seed)
        assert rare.truth["Kind"].cpt[rare.special] == pytest.approx(1 / 12)
        on_rare = np.sort(rare.success[rare.special, :, 0])
        assert rare.success.shape == (4, 5, 1) and rare.success[rare.special, rare.best_special, 0] == on_rare[-1]
        np.testing.assert_allclose(on_rare[-2:], [0.45, 0.55])
        assert on_rare[-3] <= 0.35
        assert rare.watched == [(rare.special, rare.best_special)]
        size = World("size", seed)
        success = size.success[:, :, 0].reshape(3, 3, 3)                 # (shape, size, action)
        best = success.argmax(axis=2)                                     # (shape, size)
        assert np.all(best == best[0]) and sorted(best[0]) == [0, 1, 2], "each size its own best, whatever the shape"
        assert size.watched == [(kind, best[0][kind % 3]) for kind in range(9)]
        for s, a in enumerate(best[0]):
            gaps = success[:, s, a][:, None] - np.delete(success[:, s], a, axis=1)
            assert np.all((gaps >= 0.08 - 1e-12) & (gaps <= 0.20 + 1e-12))


def test_a_truth_is_locked_out_when_a_watched_kind_came_and_its_best_was_never_chosen():
    """locked_out and best_share over the (trial, watched kind, best chosen) entries of a run, in a window."""
    from affordance_ros_bench.decisions import best_share, locked_out

    run = {"special": [(5, 0, False), (150, 0, True), (210, 0, False), (220, 1, True), (250, 1, False)]}
    assert locked_out(run, (200, 300))                          # kind 0 came in 201-300, its best never chosen
    assert not locked_out(run, (100, 200))                      # kind 0's best chosen at 150; kind 1 did not come
    assert not locked_out({"special": [(210, 1, True)]}, (200, 300))
    assert not locked_out({"special": [(10, 0, False)]}, (200, 300))   # nothing in the window: nothing to lock out
    assert locked_out({"special": [[210, False]]}, (200, 300))          # a run logged as (trial, best) pairs
    assert best_share(run, (200, 300)) == pytest.approx(1 / 3) and best_share(run, (0, 200)) == 0.5
    assert math.isnan(best_share(run, (300, 400)))


def test_benchmarks_sections_13_and_14_give_the_figures_of_their_results_files():
    """§14's page (docs/benchmarks/decisions.md): its tables are docs/bench/decisions_results.json's, as bench
    decisions prints them; §13's (docs/benchmarks/posterior.md): its coverage of every cell is
    docs/bench/posterior_results.json's (a rerun copied into docs/bench without the text, or the reverse, fails
    here)."""
    from affordance_ros_bench.decisions import results_table

    repo = Path(__file__).resolve().parents[2]
    section = benchmarks_page("decisions")
    assert section.startswith("# 14. Deciding while learning")
    results = json.loads((repo / "docs" / "bench" / "decisions_results.json").read_text())
    assert f"**{results['reps']} seeds**" in section
    for line in results_table(results, results["checkpoints"]).splitlines():
        if line.startswith("| ") and not line.startswith("| strategy"):
            assert line in section, line
    posterior = json.loads((repo / "docs" / "bench" / "posterior_results.json").read_text())
    section = benchmarks_page("posterior")
    assert section.startswith("# 13. How sure answers are")
    for mode, label in (("labels", "labels"), ("sigma1", "sensors at sigma 1"), ("sigma3", "sensors at sigma 3")):
        row = f"| {label}, 10 / 30 / 100 / 300 | " + " / ".join(
            f"{posterior['cells'][f'{mode} {n}']['model'][0]:.3f}" for n in (10, 30, 100, 300))
        assert row in section, row


def test_startup_quick(tmp_path):
    """--help and predict through the installed command: a wall and an import time each, none of the modules
    only other commands need loaded, the numpy import measured beside them."""
    stdout = bench("startup", out=tmp_path)
    doc = json.loads((tmp_path / "startup_results.json").read_text())
    assert set(doc["results"]) == {"--help", "predict"} and doc["numpy_import"] > 0
    for name, row in doc["results"].items():
        assert row["heavy_modules_loaded"] == [], name
        assert 0 < row["imports"] and 0 < row["cpu"] and 0 < row["wall"] and row["ratio_to_numpy_import"] > 0, name
    assert len(table_rows((tmp_path / "startup_table.md").read_text())) == 2
    assert "peer `python -c \"import numpy\"`" in stdout


def test_a_bench_run_that_fails_keeps_its_nodes_logs(tmp_path, capsys):
    """A run that raises (a robot that does not end in time) keeps the logs that say why: they are copied into
    --out, the databases left out (bench faults and bench dds, whose nodes ``dds.launch`` starts), before its
    temporary folder is removed."""
    from affordance_ros_bench.dds import run_folder

    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(subprocess.TimeoutExpired):
        with run_folder("faults", out) as folder:
            run = Path(folder) / "kill00"
            (run / "ros_home" / "log").mkdir(parents=True)
            (run / "simulated_robot.log").write_text("sent 150 trials\n")
            (run / "ros_home" / "log" / "learner.log").write_text("stored\n")
            (run / "cases.db").write_bytes(b"SQLite format 3\0")
            raise subprocess.TimeoutExpired(["simulated_robot"], 300)
    assert not Path(folder).exists()
    printed = capsys.readouterr().err  # the end of each node's log: CI's output is all that stays of its machine
    assert "--- the end of kill00/simulated_robot.log:\nsent 150 trials\n" in printed
    assert f"bench faults: a run failed; the logs of its nodes are kept in {out / 'failed_run'}" in printed
    kept = out / "failed_run" / "kill00"
    assert (kept / "simulated_robot.log").read_text() == "sent 150 trials\n"
    assert (kept / "ros_home" / "log" / "learner.log").exists() and not (kept / "cases.db").exists()
    with run_folder("dds", tmp_path / "elsewhere") as folder:
        (Path(folder) / "learner_node.log").write_text("stopping\n")  # nothing kept when the run ends well
    assert not (tmp_path / "elsewhere").exists() and not Path(folder).exists()


def test_a_bench_says_what_it_is_and_ctrl_c_ends_it_in_one_line(tmp_path):
    listed = subprocess.run([BENCH], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 2 and "paper " in listed.stdout and "all " in listed.stdout  # no name: the list
    mistake = subprocess.run([BENCH, "paper", "--nope"], capture_output=True, text=True, timeout=60)
    assert mistake.returncode == 2 and "affordance-ros-bench paper: error: unrecognized arguments: --nope" in \
        mistake.stderr
    unknown = subprocess.run([BENCH, "papers"], capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 2 and unknown.stderr.splitlines()[-1] == \
        "affordance-ros-bench: error: no benchmark 'papers'"
    status, _, stderr = interrupted([BENCH, "paper", "--out", tmp_path / "bench"], "bench paper:")
    assert status == 130, stderr
    assert "Traceback" not in stderr and stderr.splitlines()[-1] == "affordance-ros-bench paper: interrupted"
