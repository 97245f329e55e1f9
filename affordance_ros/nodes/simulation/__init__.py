"""The simulated robot (``simulated_robot``): a robot (``nodes.robot``) in a simulated world that, exploring
actively (``exploration``: the learner's ``~/suggest_trial``) or with a task (``robot_task``: its
``~/select_action``, through the planner's ``AffordanceClient``), is its own planner (``nodes.planner``).

The one folder of ``nodes/`` that uses two sides, as a program that puts them together; no side imports it.
"""
