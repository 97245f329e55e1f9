"""The installed executables as separate processes (what `ros2 run affordance_ros ...` starts)."""

import os
import signal
import stat

import pytest
from conftest import NodeProcess, assert_distributions, exit_status, sampled_records, wait_for

from affordance_ros.data.storage import CaseStore
from affordance_ros.share import default_config_path, share_directory

PREFIX = share_directory().parents[1]
LIB = PREFIX / "lib" / "affordance_ros"
PARAMS_FILE = share_directory() / "config" / "learner.params.yaml"


def start(executable, *ros_args, tmp_path, name, umask=None, cwd=None):
    env = dict(os.environ, ROS_HOME=str(tmp_path / "ros_home"), PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    return NodeProcess([str(LIB / executable), "--ros-args", *ros_args], tmp_path / f"{name}.log", env=env,
                       preexec_fn=None if umask is None else lambda: os.umask(umask), cwd=cwd)


def output(tmp_path, name):
    return (tmp_path / f"{name}.log").read_text()


def stop(process, timeout=15.0):
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    return exit_status(process, timeout)


def test_config_path_names_a_shipped_configuration_even_beside_a_folder_of_that_name(tmp_path):
    """`-p config_path:=tools` from the repository's root, where tools/ is a folder: the shipped tools.json."""
    (tmp_path / "tools").mkdir()
    learner = start("learner_node", "-p", "config_path:=tools", "-p", f"database_path:={tmp_path / 'cases.db'}",
                    "-p", f"model_path:={tmp_path / 'model.json'}", tmp_path=tmp_path, name="learner", cwd=tmp_path)
    try:
        wait_for(lambda: "active: taking trials" in output(tmp_path, "learner") or learner.poll() is not None,
                 timeout=60, what="the learner active")
    finally:
        assert stop(learner) == 0, output(tmp_path, "learner")
    assert f"config {share_directory() / 'config' / 'tools.json'} (4 variables" in output(tmp_path, "learner")


def test_learner_and_robot_processes(ros, tmp_path):
    db, model = tmp_path / "cases.db", tmp_path / "model.json"
    learner = start("learner_node", "--params-file", str(PARAMS_FILE), "-p", f"database_path:={db}",
                    "-p", f"model_path:={model}", tmp_path=tmp_path, name="learner")
    robot = None
    try:
        robot = start("simulated_robot", "-p", "count:=40", "-p", "rate:=100.0", "-p", "seed:=5",
                      tmp_path=tmp_path, name="robot")
        assert exit_status(robot, 60) == 0, output(tmp_path, "robot")
        assert "published 40 trials" in output(tmp_path, "robot")

        def stored():
            with CaseStore(db, read_only=True) as store:
                return store.count()
        wait_for(lambda: db.exists() and stored() == 40, what="40 cases in the database")

        learned = ros.learn()
        assert learned.success and learned.num_cases == 40, learned.message
        from affordance_ros.core import AffordanceNetwork
        config = AffordanceNetwork.load(default_config_path())
        answer = ros.predict(query=["action"], sensor_names=["obj_vel", "hand_vel"], sensor_values=[10.0, 0.0])
        assert_distributions(answer, ["Action"], config)
        assert model.is_file()
    finally:
        learner_status = stop(learner)
        if robot is not None:
            stop(robot)
        print(output(tmp_path, "learner"), output(tmp_path, "robot"), sep="\n")  # shown when the test fails
    assert learner_status == 0, output(tmp_path, "learner")
    log = output(tmp_path, "learner")
    assert "stopping; cases: 40 stored this run" in log, log


def test_learner_refuses_to_start_with_a_bad_configuration(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "affordance_ros/model/1", "variables": []}')
    learner = start("learner_node", "-p", f"config_path:={bad}", "-p", f"database_path:={tmp_path / 'c.db'}",
                    tmp_path=tmp_path, name="learner")
    assert exit_status(learner, 30) == 1
    log = output(tmp_path, "learner")
    assert f"config_path '{bad}'" in log and "no variables" in log, log


def test_robots_named_in_robots_have_trial_topics_of_their_own_beside_the_shared_ones(tmp_path):
    db = tmp_path / "cases.db"
    learner = start("learner_node", "-p", f"database_path:={db}", "-p", f"model_path:={tmp_path / 'model.json'}",
                    "-p", "robots:=arm1, arm2", tmp_path=tmp_path, name="learner")
    robots = []
    try:
        for name, robot_name in (("robot", "''"), ("arm1", "arm1")):
            robots.append(start("simulated_robot", "-p", "count:=20", "-p", "rate:=100.0",
                                "-p", f"trial_id_prefix:={name}", "-p", f"robot_name:={robot_name}",
                                "-r", f"__node:={name}", tmp_path=tmp_path, name=name))
        for robot, name in zip(robots, ("robot", "arm1")):
            assert exit_status(robot, 60) == 0, output(tmp_path, name)
            assert "20 trials confirmed stored" in output(tmp_path, name), output(tmp_path, name)
        with CaseStore(db, read_only=True) as store:
            ids = {record.trial_id for record in store.records()}
        assert len(ids) == 40 and {i.split("-")[0] for i in ids} == {"robot", "arm1"}
    finally:
        learner_status = stop(learner)
        for robot in robots:
            stop(robot)
    assert learner_status == 0
    assert "trial topics reliable, keep all, shared and of robots arm1, arm2;" in output(tmp_path, "learner")


def test_a_robot_name_that_makes_no_topic_name_stops_the_start(tmp_path):
    learner = start("learner_node", "-p", f"database_path:={tmp_path / 'c.db'}", "-p", "robots:=arm1,2arm",
                    tmp_path=tmp_path, name="learner")
    assert exit_status(learner, 30) == 1
    assert "robots: robot name '2arm' does not make a topic name" in output(tmp_path, "learner")
    robot = start("simulated_robot", "-p", "robot_name:=arm 1", tmp_path=tmp_path, name="robot")
    assert exit_status(robot, 30) == 1
    assert "robot name 'arm 1' does not make a topic name" in output(tmp_path, "robot")


def test_the_robot_at_full_speed_loses_no_trial_with_the_defaults(tmp_path):
    # Reliable keep-all on both ends: the robot is slowed down to the learner's pace instead of
    # losing trials (keeping the last 100, most of such a burst would be lost).
    n = 3000
    db = tmp_path / "cases.db"
    learner = start("learner_node", "--params-file", str(PARAMS_FILE), "-p", f"database_path:={db}",
                    "-p", f"model_path:={tmp_path / 'model.json'}", tmp_path=tmp_path, name="learner")
    robot = None
    try:
        robot = start("simulated_robot", "-p", f"count:={n}", "-p", "rate:=10000.0", "-p", "seed:=6",
                      tmp_path=tmp_path, name="robot")
        assert exit_status(robot, 120) == 0, output(tmp_path, "robot")
        assert f"published {n} trials" in output(tmp_path, "robot")

        def stored():
            with CaseStore(db, read_only=True) as store:
                return store.count()
        wait_for(lambda: stored() == n, timeout=60, what=f"{n} cases in the database")
    finally:
        learner_status = stop(learner)
        if robot is not None:
            stop(robot)
        print(output(tmp_path, "learner"), output(tmp_path, "robot"), sep="\n")  # shown when the test fails
    assert learner_status == 0
    log = output(tmp_path, "learner")
    assert "trial topics reliable, keep all" in log
    assert (f"stopping; cases: {n} stored this run; trials pending: 0; parts received: {n} action, {n} object, "
            f"{n} effect") in log, log
    assert "incomplete trials dropped: 0" in log, log


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_integer_doubles_umask_permissions_and_a_clean_stop(ros, tmp_path, signum):
    # slop:=1 (an integer for a double) is taken, not InvalidParameterTypeException; the model file follows the
    # umask, not 0600; a stop prints no "Failed to publish log message to rosout".
    db, model = tmp_path / "cases.db", tmp_path / "model.json"
    with CaseStore(db) as store:
        for record in sampled_records(50):
            store.add(record)
    learner = start("learner_node", "-p", "slop:=1", "-p", "trial_timeout:=3", "-p", f"database_path:={db}",
                    "-p", f"model_path:={model}", tmp_path=tmp_path, name="learner", umask=0o002)
    try:
        learned = ros.learn()
        assert learned.success, learned.message
    finally:
        learner.send_signal(signum)
        status = exit_status(learner, 30)
        print(output(tmp_path, "learner"))
    log = output(tmp_path, "learner")
    assert status == 0, log
    assert stat.S_IMODE(model.stat().st_mode) == 0o664  # 0666 & ~umask, as any new file
    assert "stopping; cases: 0 stored this run" in log, log
    assert "rosout" not in log and "Traceback" not in log and "Exception" not in log, log
