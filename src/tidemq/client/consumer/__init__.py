"""Consumers: push (clustering and broadcasting, concurrent and orderly) and lite pull."""
