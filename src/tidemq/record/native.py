"""Which implementation of the hot loops runs: compiled, or the pure-Python twin.

The compiled modules are built by an ordinary `pip install` with the machine's
C compiler. They are optional: when one was not built, or when the environment
sets `TIDEMQ_NO_EXTENSIONS=1`, the pure-Python reference runs instead (same
results, byte for byte; the property tests hold both to that).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

DISABLED_BY_ENV = os.environ.get("TIDEMQ_NO_EXTENSIONS", "") not in ("", "0")
"""TIDEMQ_NO_EXTENSIONS=1 (read once, at import) selects the pure-Python twins."""

COMPILED_MODULES = ("_records", "_append", "_transactions")


def compiled(name: str) -> ModuleType | None:
    """The compiled module `tidemq.record.<name>`, or None when it is switched
    off or was not built."""
    if DISABLED_BY_ENV:
        return None
    try:
        return importlib.import_module(f"tidemq.record.{name}")
    except ImportError:
        return None


def compiled_modules() -> dict[str, bool]:
    """Which compiled modules can be imported (False for each when switched off)."""
    return {name: compiled(name) is not None for name in COMPILED_MODULES}


def implementation() -> str:
    """ "compiled" when every compiled module runs, "python" when none does,
    "mixed" otherwise (one failed to build)."""
    found = compiled_modules().values()
    if all(found):
        return "compiled"
    return "python" if not any(found) else "mixed"
