"""The robot: what a robot process runs to deliver its trials to the learner.

``TrialPublisher`` (``trial_publisher``) keeps each trial until the learner confirms it on ``~/stored``: its book of
waiting trials (``waiting_trials``: when one is sent again or given up), its link to the learner (``learner_link``:
when the learner is back after an outage, the paced re-send) and its spool on disk (``trial_spool``); ``gates`` say
when a robot starts publishing and while its spool has room. ``bag_player`` and ``bag_recorder`` play a bag's trials
into the graph and record them. It imports nothing of the learner or the planner: what they share is
``nodes.contract``.
"""
