"""The learner: the lifecycle node that stores trials, learns and answers (``learner_node``).

It takes the robots' trials (``trial_topics``, read from their bytes by ``nodes.contract``; ``trial_pipeline``: intake,
case writer, the answers on ``~/stored``), learns on ``~/learn`` (``learn_endpoints``), answers the planners
(``query_services``: ``~/predict`` and ``~/select_action``; ``suggest_service``: ``~/suggest_trial``; the checks
they share in ``service_answer``), publishes its model (``model_topic``) and its health (``diagnostics``). The node
declares its ``parameters`` and holds its ``parts`` (what exists while configured, while active); every part reports
through one ``reporter`` and reads the lifecycle state from ``node_state``. It imports nothing of the robot or the
planner: what they share is ``nodes.contract``.
"""
