"""The tools: the ``affordance-ros`` command line, the demo, bag replay and record.

Each command imports what only it needs (rclpy, rosbags, matplotlib) when it runs, so that
``affordance-ros --help`` and ``affordance-ros predict`` start quickly and work without ROS.
"""
