"""Every command of `affordance-ros` and what it does, in a line: the overview (``tools/cli.py``) and each command's
parser (``tools/commands.py``) read it. Imports nothing: `affordance-ros --help` loads no more than this."""

COMMANDS = {
    "learn": "learn structure and parameters from recorded cases",
    "predict": "posterior of query variables given labels and sensor readings",
    "suggest": "which trial would teach a model the most: actions on candidate objects, ranked",
    "import": "add the cases of bags, CSV files or case databases to a case database",
    "export": "write the cases of a case database, bag or CSV file to a CSV file or a new bag",
    "replay": "publish a bag's trials into the ROS graph, like ros2 bag play (needs ROS 2)",
    "record": "record the trial topics into a new bag, like ros2 bag record (needs ROS 2)",
    "call": "call the running learner node: learn, predict, select-action, suggest (needs ROS 2)",
    "export-model": "write a model's network as BIF, XMLBIF or UAI (pyAgrum, pgmpy, GeNIe, bnlearn)",
    "import-model": "make a model from a BIF, XMLBIF or UAI network and a configuration",
    "show": "draw a model (or configuration) as a picture: PNG, SVG or PDF",
    "evaluate": "cross-validate learning against baselines on the same folds: accuracy, RMSE, ...",
    "simulate": "write simulated trials to a CSV file: the simulated robot's or a scenario's",
}
PROG = "affordance-ros"
DESCRIPTION = ("learn a model from recorded cases, and ask it questions: every command works without ROS but "
               "replay, record and call, which need ROS 2 (they join a ROS graph)")
