"""The learner node and the simulated robot: trials are collected into the learner's database.

    ros2 launch affordance_ros demo.launch.py count:=500
    ros2 service call /affordance_learner/learn affordance_ros/srv/Learn "{}"
    ros2 service call /affordance_learner/predict affordance_ros/srv/Predict "{query: [action], \
        sensor_names: [obj_vel], sensor_values: [9.5]}"

The shipped configuration models sensor noise 1.0: keep sigma at 1.0, or point the learner
at a configuration with other stddevs.
"""

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def generate_launch_description():
    robot_arguments = [  # name, default, type, description
        ('count', '300', int, 'Trials the simulated robot does before it exits (0: until stopped)'),
        ('rate', '20.0', float, 'Trials per second'),
        ('sigma', '1.0', float, 'Sensor noise of the simulated robot'),
        ('seed', '-1', int, 'Seed of the trials (and of the ground truth unless truth_seed is set); -1: random'),
        ('truth_seed', '-1', int, "Seed of the ground truth's CPTs; -1: seed if it is set, else 0"),
        ('design', 'balanced', str, "balanced: every action on every kind of object equally often; truth: as the "
                                    "ground truth's CPTs draw them"),
        ('wait_for', 'affordance_learner', str, 'Nodes that must subscribe before the robot publishes'),
        ('use_trial_ids', 'true', bool, 'false: send trials without ids (the learner pairs them by stamp)'),
        ('robot_name', '', str, 'Topics of its own for the robot: <robot_name>/action, ... (the learner is told)'),
    ]
    return LaunchDescription([
        *[DeclareLaunchArgument(name, default_value=default, description=text)
          for name, default, _, text in robot_arguments],
        DeclareLaunchArgument(
            'params_file',
            default_value=PathJoinSubstitution([FindPackageShare('affordance_ros'), 'config', 'learner.params.yaml']),
            description='Parameters of affordance_learner'),
        DeclareLaunchArgument('autostart', default_value='true',
                              description='Configure and activate the learner at start (false: lifecycle manager)'),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(
                PathJoinSubstitution([FindPackageShare('affordance_ros'), 'launch', 'learner.launch.py'])),
            launch_arguments={'params_file': LaunchConfiguration('params_file'),
                              'autostart': LaunchConfiguration('autostart'),
                              'robots': LaunchConfiguration('robot_name')}.items(),
        ),
        Node(
            package='affordance_ros',
            executable='simulated_robot',
            name='simulated_robot',
            # typed, so that rate:=20 is still the double the node declares
            parameters=[{name: ParameterValue(LaunchConfiguration(name), value_type=value_type)
                         for name, _, value_type, _ in robot_arguments}],
            output='screen',
            emulate_tty=True,
        ),
    ])
