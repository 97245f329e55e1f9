"""The generated interfaces, and that the tests import the installed package (with them).

Runs against the installed package (.venv or a colcon install), see test.sh; the installed layout
(executables, data files, modules) is test_packaging.py's.
"""

import array
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import affordance_ros
from affordance_ros.action import Learn as LearnAction
from affordance_ros.data.pairing import INTERFACE_MAX_LIST_LENGTH
from affordance_ros.msg import Action, Distribution, Features, TrialStatus
from affordance_ros.srv import Learn, Predict, SelectAction, SuggestTrial

REPO_ROOT = Path(__file__).resolve().parents[1]

EXPECTED_FIELDS = {
    Action: [
        ('header', 'std_msgs/Header'),
        ('trial_id', 'string'),
        ('action', 'string'),
    ],
    Features: [
        ('header', 'std_msgs/Header'),
        ('trial_id', 'string'),
        ('names', 'sequence<string, 100000>'),
        ('values', 'sequence<double, 100000>'),
    ],
    Distribution: [
        ('variable', 'string'),
        ('values', 'sequence<string>'),
        ('probabilities', 'sequence<double>'),
    ],
    TrialStatus: [
        ('trial_id', 'string'),
        ('status', 'string'),
        ('reason', 'string'),
    ],
    Learn.Request: [
        ('structure', 'string'),
    ],
    Learn.Response: [
        ('success', 'boolean'),
        ('message', 'string'),
        ('num_cases', 'uint32'),
        ('arcs', 'sequence<string>'),
        ('log_likelihood', 'double'),
        ('iterations', 'uint32'),
        ('duration', 'double'),
        ('sampled_arcs', 'sequence<string>'),
        ('arc_probabilities', 'sequence<double>'),
    ],
    LearnAction.Goal: [
        ('structure', 'string'),
    ],
    LearnAction.Result: [
        ('success', 'boolean'),
        ('message', 'string'),
        ('num_cases', 'uint32'),
        ('arcs', 'sequence<string>'),
        ('log_likelihood', 'double'),
        ('iterations', 'uint32'),
        ('duration', 'double'),
        ('sampled_arcs', 'sequence<string>'),
        ('arc_probabilities', 'sequence<double>'),
    ],
    LearnAction.Feedback: [
        ('phase', 'string'),
        ('iteration', 'uint32'),
        ('log_likelihood', 'double'),
        ('cases', 'uint32'),
        ('elapsed', 'double'),
    ],
    Predict.Request: [
        ('query', 'sequence<string, 100000>'),
        ('sensor_names', 'sequence<string, 100000>'),
        ('sensor_values', 'sequence<double, 100000>'),
        ('variable_names', 'sequence<string, 100000>'),
        ('variable_values', 'sequence<string, 100000>'),
    ],
    Predict.Response: [
        ('success', 'boolean'),
        ('message', 'string'),
        ('marginals', 'sequence<affordance_ros/Distribution>'),
        ('most_probable', 'sequence<string>'),
        ('joint_probability', 'double'),
        ('reading_names', 'sequence<string>'),     # appended: predicted readings
        ('reading_means', 'sequence<double>'),
        ('reading_stddevs', 'sequence<double>'),
        ('stddevs', 'sequence<double>'),           # appended: how sure the model is, per label
        ('interval_lows', 'sequence<double>'),
        ('interval_highs', 'sequence<double>'),
        ('support', 'sequence<double>'),           # per marginal
    ],
    SelectAction.Request: [
        ('sensor_names', 'sequence<string, 100000>'),
        ('sensor_values', 'sequence<double, 100000>'),
        ('variable_names', 'sequence<string, 100000>'),
        ('variable_values', 'sequence<string, 100000>'),
        ('effect_names', 'sequence<string, 100000>'),
        ('effect_values', 'sequence<string, 100000>'),
        ('strategy', 'string'),                    # appended
    ],
    SelectAction.Response: [
        ('success', 'boolean'),
        ('message', 'string'),
        ('action_variable', 'string'),
        ('actions', 'sequence<string>'),
        ('probabilities', 'sequence<double>'),
        ('tied', 'boolean'),
        ('strategy', 'string'),                    # appended: what was ranked by, how sure
        ('scores', 'sequence<double>'),
        ('stddevs', 'sequence<double>'),
        ('interval_lows', 'sequence<double>'),
        ('interval_highs', 'sequence<double>'),
        ('support', 'sequence<double>'),
    ],
}

# --- the package under test is the installed one ----------------------------

def test_imports_installed_package_not_source_tree():
    pkg_dir = Path(affordance_ros.__file__).resolve().parent
    assert pkg_dir != REPO_ROOT / 'affordance_ros', (
        'tests imported the source tree (conftest.py takes the repository root off sys.path); run them with '
        './test.sh or `pytest test`')
    import affordance_ros.msg as generated_msg
    import affordance_ros.srv as generated_srv
    assert Path(generated_msg.__file__).resolve().parent.parent == pkg_dir
    assert Path(generated_srv.__file__).resolve().parent.parent == pkg_dir


def test_python_started_in_the_source_tree_finds_the_generated_interfaces():
    # `python -c ...` (or a script) in the repository root imports the source tree first, which has no
    # generated msg/srv/action: its __init__ adds the installed package's directory to __path__.
    code = ('import affordance_ros, affordance_ros.core; from affordance_ros.srv import Predict; '
            'from affordance_ros.msg import Action; from affordance_ros.action import Learn; '
            'print(affordance_ros.__file__); print(Predict.Request().query)')
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONSAFEPATH'}  # (test.sh sets it) as a user runs it
    out = subprocess.run([sys.executable, '-c', code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                         env=env)
    assert out.returncode == 0, out.stderr
    source_file, query = out.stdout.splitlines()
    assert Path(source_file).resolve() == REPO_ROOT / 'affordance_ros' / '__init__.py'  # really the source tree
    assert query == '[]'


def test_hand_written_init_installed_over_generated_one():
    # rosidl generates an empty affordance_ros/__init__.py; ours replaces it.
    installed = Path(affordance_ros.__file__).read_text()
    source = (REPO_ROOT / 'affordance_ros' / '__init__.py').read_text()
    assert installed == source


# --- interfaces ---------------------------------------------------------------

@pytest.mark.parametrize('cls', list(EXPECTED_FIELDS), ids=lambda c: c.__qualname__)
def test_fields_and_types(cls):
    assert list(cls.get_fields_and_field_types().items()) == EXPECTED_FIELDS[cls]


def test_action_construct():
    from std_msgs.msg import Header

    msg = Action(trial_id='t1', action='grasp')
    msg.header = Header(frame_id='base')
    msg.header.stamp.sec = 12
    assert (msg.trial_id, msg.action, msg.header.frame_id) == ('t1', 'grasp', 'base')
    assert msg.header.stamp.sec == 12


def test_features_construct():
    msg = Features(trial_id='t1', names=['size', 'shape'], values=[0.5, 1.5])
    assert list(msg.names) == ['size', 'shape']
    assert isinstance(msg.values, array.array) and msg.values.typecode == 'd'
    assert list(msg.values) == [0.5, 1.5]
    # Field checks are off by default (ROS_PYTHON_CHECK_FIELDS / check_fields).
    with pytest.raises((AssertionError, TypeError)):
        Features(values=['not a number'])
    with pytest.raises(AssertionError):
        Features(check_fields=True, nmes=['typo'])


def test_distribution_construct():
    msg = Distribution(variable='Effect', values=['moves', 'stays'], probabilities=[0.25, 0.75])
    assert msg.variable == 'Effect'
    assert list(msg.values) == ['moves', 'stays']
    assert list(msg.probabilities) == [0.25, 0.75]


def test_learn_construct():
    req = Learn.Request(structure='k2')
    assert req.structure == 'k2'
    assert Learn.Request().structure == ''
    res = Learn.Response(success=True, message='ok', num_cases=7, arcs=['Action->Effect'],
                         log_likelihood=-3.5, iterations=2, duration=0.25)
    assert (res.success, res.num_cases, list(res.arcs)) == (True, 7, ['Action->Effect'])
    with pytest.raises(AssertionError):
        Learn.Response(num_cases=-1, check_fields=True)  # uint32


def test_predict_construct():
    req = Predict.Request(query=['effect'], sensor_names=['size'], sensor_values=[0.3],
                          variable_names=['Action'], variable_values=['grasp'])
    assert list(req.query) == ['effect']
    res = Predict.Response(
        success=True, message='',
        marginals=[Distribution(variable='Effect', values=['a', 'b'], probabilities=[0.5, 0.5])],
        most_probable=['a'], joint_probability=0.5)
    assert res.marginals[0].variable == 'Effect'
    assert list(res.most_probable) == ['a']


def test_serialization_round_trip():
    from rclpy.serialization import deserialize_message, serialize_message

    samples = [
        Action(trial_id='t', action='tap'),
        Features(trial_id='t', names=['a', 'b'], values=[1.0, -2.5]),
        Distribution(variable='v', values=['x'], probabilities=[1.0]),
        Learn.Request(structure='mcmc'),
        Learn.Response(success=True, num_cases=3, arcs=['A->B'], log_likelihood=-1.0,
                       iterations=10, duration=0.5),
        Predict.Request(query=['action'], sensor_names=['s'], sensor_values=[0.1]),
        Predict.Response(success=True, marginals=[Distribution(variable='v', values=['x'],
                                                               probabilities=[1.0])],
                         most_probable=['x'], joint_probability=1.0),
    ]
    for msg in samples:
        data = serialize_message(msg)
        assert deserialize_message(data, type(msg)) == msg


@pytest.mark.parametrize('cls', [Features, Predict.Request, SelectAction.Request, SuggestTrial.Request],
                         ids=lambda c: c.__qualname__)
def test_every_list_a_robot_or_planner_sends_is_bounded(cls):
    lists = {name: kind for name, kind in cls.get_fields_and_field_types().items() if kind.startswith('sequence<')}
    assert lists
    unbounded = [name for name, kind in lists.items() if not kind.endswith(f', {INTERFACE_MAX_LIST_LENGTH}>')]
    assert not unbounded, f'{cls.__qualname__}: lists not bounded by {INTERFACE_MAX_LIST_LENGTH}: {unbounded}'


def test_a_list_beyond_the_bound_cannot_be_sent():
    """The bound is the client's middleware's to keep (rclpy checks fields only when asked): serialising, as
    every publish and request does, refuses a list one entry too long, so no such list reaches a node."""
    from rclpy.serialization import serialize_message

    full = ['s'] * INTERFACE_MAX_LIST_LENGTH
    assert serialize_message(Predict.Request(sensor_names=full, sensor_values=[1.0] * len(full)))
    with pytest.raises(Exception, match='Failed to serialize'):  # the type support prints why on stderr
        serialize_message(Predict.Request(sensor_names=full + ['s']))
    with pytest.raises(Exception, match='Failed to serialize'):
        serialize_message(Features(names=['s'], values=[1.0] * (INTERFACE_MAX_LIST_LENGTH + 1)))


def test_service_call_in_process():
    """Predict over DDS within one process: type support for srv works."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node('test_interfaces_predict', context=context)

        def handle(request, response):
            response.success = True
            response.most_probable = [f'{q}!' for q in request.query]
            response.marginals = [Distribution(variable=q, values=['a'], probabilities=[1.0])
                                  for q in request.query]
            response.joint_probability = 1.0
            return response

        node.create_service(Predict, 'predict', handle)
        client = node.create_client(Predict, 'predict')
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + 20
        while not client.service_is_ready():
            assert time.monotonic() < deadline, 'service never became ready'
            executor.spin_once(timeout_sec=0.1)
        future = client.call_async(Predict.Request(query=['effect', 'action']))
        executor.spin_until_future_complete(future, timeout_sec=20)
        res = future.result()
        assert res is not None and res.success
        assert list(res.most_probable) == ['effect!', 'action!']
        assert [m.variable for m in res.marginals] == ['effect', 'action']
        executor.shutdown()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


# --- installed files ----------------------------------------------------------

def test_trial_status_constants_are_the_statuses_the_learner_publishes():
    from affordance_ros.data.intake import DUPLICATE, REJECTED, STORED
    assert (TrialStatus.STORED, TrialStatus.DUPLICATE, TrialStatus.REJECTED) == (STORED, DUPLICATE, REJECTED)
