"""The benchmarks of affordance_ros: the paper's experiments, performance, the peers, the node over DDS.

Not part of the product: a distribution of its own (benchmarks/pyproject.toml) with the command
``affordance-ros-bench``; docs/benchmarks.md shows what each one measured.
"""
