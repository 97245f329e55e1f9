"""The affordance learner node with its parameters file.

    ros2 launch affordance_ros learner.launch.py
    ros2 launch affordance_ros learner.launch.py params_file:=/path/to/my.params.yaml namespace:=arm
"""

from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
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
        Node(
            package='affordance_ros',
            executable='learner_node',
            name='affordance_learner',
            namespace=LaunchConfiguration('namespace'),
            parameters=[LaunchConfiguration('params_file')],
            arguments=['--ros-args', '--log-level', LaunchConfiguration('log_level')],
            output='screen',
            emulate_tty=True,
        ),
    ])
