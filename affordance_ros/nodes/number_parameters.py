"""Double parameters that also take integers (``slop:=1`` as well as ``slop:=1.0``).

rclpy types a parameter by its default: a double parameter given ``1`` on the command line
or in a params file fails with ``InvalidParameterTypeException``. The parameters declared
with ``number_descriptor`` are dynamically typed instead; ``number_value`` checks the value
declared (a number in range, else ``ValueError`` saying what to fix) and turns it into a
float, and ``accept_integers`` turns integers set at run time into doubles before rclpy
checks them (its range check then applies as usual).
"""

from __future__ import annotations

from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, SetParametersResult
from rclpy.parameter import Parameter

from ..core.number_checks import is_finite_number


def number_descriptor(text: str, low: float, high: float, read_only: bool = True) -> ParameterDescriptor:
    """A descriptor for a double parameter that also accepts an integer."""
    return ParameterDescriptor(description=text, read_only=read_only, dynamic_typing=True,
                               floating_point_range=[FloatingPointRange(from_value=low, to_value=high)],
                               additional_constraints=f"a number from {low:g} to {high:g} (integers accepted)")


def number_value(name: str, value, descriptor: ParameterDescriptor) -> float:
    """``value`` as a float if it is a number in the descriptor's range; ValueError otherwise."""
    if not is_finite_number(value):
        raise ValueError(f"parameter '{name}' must be a number, got {value!r}")
    span = descriptor.floating_point_range[0]
    if not span.from_value <= value <= span.to_value:
        raise ValueError(f"parameter '{name}' is {value}; it must be from {span.from_value:g} to {span.to_value:g}")
    return float(value)


def accept_integers(node, names) -> None:
    """Integers set at run time for the double parameters ``names`` become doubles; other types are refused."""
    names = set(names)

    def to_double(params):
        return [Parameter(p.name, Parameter.Type.DOUBLE, float(p.value))
                if p.name in names and p.type_ == Parameter.Type.INTEGER else p for p in params]

    def check(params) -> SetParametersResult:
        for p in params:
            if p.name in names and p.type_ != Parameter.Type.DOUBLE:
                return SetParametersResult(successful=False, reason=f"parameter '{p.name}' must be a number")
        return SetParametersResult(successful=True)

    node.add_pre_set_parameters_callback(to_double)
    node.add_on_set_parameters_callback(check)
