"""The data layer: trials, pairing, the SQLite case store, the model manager, bags and model formats.

No rclpy here (``test/test_layers.py``); bags are read and written with the pure-Python ``rosbags``
(the ``bags`` extra), imported only when a bag is opened.
"""
