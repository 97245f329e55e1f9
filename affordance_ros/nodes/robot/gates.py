"""When a robot may publish: once what it waits for is there (``StartGate``), and while its spool has room
(``SpoolGate``).

Waiting for the learner must cost nothing, not a look at the graph at the robot's trial rate. ``StartGate``
looks when a topic of the robot is matched (``poke``, from the QoS matched events of its publishers and of its
answers' subscription) and otherwise once every ``WAIT_CHECK_PERIOD`` seconds (a node named in ``wait_for`` whose
topics matched before its name was known).
"""

from __future__ import annotations

from typing import Callable

WAIT_CHECK_PERIOD = 1.0  # seconds between looks at the graph while waiting, besides those at every match


class StartGate:
    """Calls ``start()`` once ``missing()`` (what publishing still waits for: lines for the log) is empty, logging
    what it waits for as that changes, then ``ready`` (the line said when it starts)."""

    def __init__(self, node, missing: Callable[[], list[str]], start: Callable[[], None], ready: str):
        self.node = node
        self.missing = missing
        self.start = start
        self.ready = ready
        self.open = False
        self._said: list[str] = []
        self._timer = node.create_timer(WAIT_CHECK_PERIOD, self.poke)

    def poke(self) -> None:
        """Look now (a topic was matched, or the timer's period passed)."""
        if self.open:
            return
        missing = self.missing()
        if missing:
            if missing != self._said:
                self.node.get_logger().info(f"waiting for {', '.join(missing)} before publishing")
                self._said = missing
            return
        self.open = True
        self._timer.cancel()
        self.node.destroy_timer(self._timer)
        self.node.get_logger().info(f"publishing: {self.ready}")
        self.start()


class SpoolGate:
    """``room(trials)``: whether a ``TrialPublisher`` (None: no confirmations, always room) takes a new trial;
    logs once when its spool fills (``spool_limit``) and once when it has room again."""

    def __init__(self, logger):
        self.logger = logger
        self.full = False
        self.said = False  # whether it said that the spool is full (then it says when it has room)

    def room(self, trials) -> bool:
        full = trials is not None and trials.full
        if full != self.full:
            self.full = full
            if not full and self.said:
                self.logger.info("the learner confirmed trials: taking new trials again")
            elif full and trials.waiting.full:  # (else the disk refused a trial: its SpoolFull and the spool say)
                self.logger.warning(f"{trials.pending} trials wait for the learner's confirmation (spool_limit): not "
                                    "taking new trials until it confirms some")
            self.said = full and trials.waiting.full
        return not full
