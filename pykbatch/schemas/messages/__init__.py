"""Kafka's own JSON message definitions (see README.md here); a package so that kafka-python's
definition loader (``importlib.resources``, which needs one on Python 3.9) reads the protocol's."""
