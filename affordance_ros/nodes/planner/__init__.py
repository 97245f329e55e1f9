"""The planner: ``AffordanceClient`` (``affordance_client``), what a planner uses to ask the learner.

Its calls (``calls``: discovery, re-sends, deadlines, the errors ``LearnerUnavailable`` and ``LearnerRefused``;
``learn_call``: the Learn action) and their messages (``replies``: requests from Python values, answers as the
core's result types). It imports nothing of the learner or the robot: what they share is ``nodes.contract``.
"""
