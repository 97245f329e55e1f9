"""/diagnostics for the learner: one DiagnosticStatus from ``data.health``, every ``period`` seconds.

The status is named ``<node name>: learner`` with the node's full name as hardware_id, as
diagnostic_aggregator and rqt_robot_monitor expect; level OK / WARN / ERROR, a one-line
message and the key values (cases stored, rejected, dropped, model age, last learn duration
and log-likelihood, online updates, lifecycle state).
"""

from __future__ import annotations

from typing import Callable

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from ...data.health import ERROR, OK, WARN, Health

LEVELS = {OK: DiagnosticStatus.OK, WARN: DiagnosticStatus.WARN, ERROR: DiagnosticStatus.ERROR}
TOPIC = "/diagnostics"


def diagnostic_status(health: Health, name: str, hardware_id: str) -> DiagnosticStatus:
    """One DiagnosticStatus from a ``Health``."""
    return DiagnosticStatus(level=LEVELS[health.level], name=name, message=health.message, hardware_id=hardware_id,
                            values=[KeyValue(key=k, value=v) for k, v in health.values.items()])


class DiagnosticsPublisher:
    """Publishes ``assess()`` on /diagnostics every ``period`` seconds until ``close``."""

    def __init__(self, node, assess: Callable[[], Health], period: float, callback_group=None):
        self.node = node
        self.assess = assess
        self.name = f"{node.get_name()}: learner"
        self.publisher = node.create_publisher(DiagnosticArray, TOPIC, 10)
        self.timer = node.create_timer(period, self.publish, callback_group=callback_group)

    def publish(self) -> None:
        """Publish the status now."""
        msg = DiagnosticArray(status=[diagnostic_status(self.assess(), self.name,
                                                        self.node.get_fully_qualified_name())])
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.publisher.publish(msg)

    def close(self) -> None:
        """Stop publishing."""
        self.node.destroy_timer(self.timer)
        self.node.destroy_publisher(self.publisher)
