"""tidemq's version, in the bottom layer so that every layer can name it."""

__version__ = "0.1.0"
