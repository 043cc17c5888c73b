"""Where tidemq keeps its data when not told otherwise."""

from __future__ import annotations

import os
from pathlib import Path


def default_data_dir() -> Path:
    """$TIDEMQ_HOME, else ~/.tidemq (like RocketMQ's ~/store)."""
    return Path(os.environ.get("TIDEMQ_HOME", Path.home() / ".tidemq"))
