"""affordance_ros: learn object affordances with Bayesian networks and Gaussian sensor models.

``affordance_ros.core`` is the pure probabilistic library (numpy/scipy, no ROS);
the node, storage and tools build on it.
"""

__version__ = "0.1.0"
