"""The affordance learner node (a managed lifecycle node) with its parameters file.

    ros2 launch affordance_ros learner.launch.py
    ros2 launch affordance_ros learner.launch.py params_file:=/path/to/my.params.yaml namespace:=arm
    ros2 launch affordance_ros learner.launch.py autostart:=false   # a lifecycle manager configures it
    ros2 launch affordance_ros learner.launch.py robots:=arm1,arm2   # arm1/action, ... beside action, ...
"""

from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument(
            'params_file',
            default_value=PathJoinSubstitution([FindPackageShare('affordance_ros'), 'config', 'learner.params.yaml']),
            description='Parameters of affordance_learner (config_path, database_path, model_path, structure, ...)'),
        DeclareLaunchArgument(
            'namespace', default_value='',
            description='Namespace of the node and of its topics action, object_features, effects'),
        DeclareLaunchArgument('log_level', default_value='info', description='Logging level of the node'),
        DeclareLaunchArgument(
            'autostart', default_value='true',
            description='Configure and activate the node at start; false: a lifecycle manager drives it'),
        DeclareLaunchArgument(
            'diagnostics_period', default_value='1.0',
            description='Seconds between /diagnostics messages of the node (0: off)'),
        DeclareLaunchArgument(
            'robots', default_value='',
            description='Robots with trial topics of their own, comma-separated (<name>/action, ...; '
                        'overrides params_file)'),
        Node(
            package='affordance_ros',
            executable='learner_node',
            name='affordance_learner',
            namespace=LaunchConfiguration('namespace'),
            parameters=[LaunchConfiguration('params_file'), {
                'autostart': ParameterValue(LaunchConfiguration('autostart'), value_type=bool),
                'diagnostics_period': ParameterValue(LaunchConfiguration('diagnostics_period'), value_type=float),
                'robots': ParameterValue(LaunchConfiguration('robots'), value_type=str)}],
            arguments=['--ros-args', '--log-level', LaunchConfiguration('log_level')],
            output='screen',
            emulate_tty=True,
        ),
    ])
