"""The public API: every name `tidemq` exports resolves, and the package is typed."""

from __future__ import annotations

import importlib.resources
import inspect
import subprocess
import sys

import pytest

import tidemq


@pytest.mark.parametrize("name", [n for n in tidemq.__all__ if n != "__version__"])
def test_every_export_resolves_to_the_named_object(name: str) -> None:
    value = getattr(tidemq, name)
    assert value is not None
    if isinstance(value, type) or inspect.isfunction(value):
        assert value.__name__ == name


def test_all_lists_exactly_the_exports() -> None:
    assert sorted(tidemq.__all__) == sorted(["__version__", *tidemq._EXPORTS])


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = tidemq.NoSuchThing  # type: ignore[attr-defined]


def test_the_package_ships_py_typed() -> None:
    assert importlib.resources.files("tidemq").joinpath("py.typed").is_file()


def test_import_tidemq_does_not_load_the_client() -> None:
    code = "import sys, tidemq; print('tidemq.client.producer' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "False"
