"""tidemq: a RocketMQ-compatible message queue written in Python."""

__version__ = "0.1.0"
