"""The package a user installs: `pip install .` from a checkout builds a
complete wheel (every subpackage, py.typed, the `tidemq` entry point) that
works outside the checkout (issue #15, newcomer item 2)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import tidemq
from tidemq.record.native import COMPILED_MODULES

pytestmark = pytest.mark.slow

CHECKOUT = Path(__file__).resolve().parents[2]
SOURCE = CHECKOUT / "src" / "tidemq"
PIP = [sys.executable, "-m", "pip", "--quiet"]


def test_the_wheel_holds_every_module_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    # a copy of what a clean checkout has: a build/ left in the tree could add stale modules
    source = tmp_path / "checkout"
    shutil.copytree(
        SOURCE, source / "src" / "tidemq", ignore=shutil.ignore_patterns("__pycache__", "*.so")
    )
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(CHECKOUT / name, source / name)
    dist = tmp_path / "dist"
    built = subprocess.run(
        [
            *PIP,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(dist),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    # the compiled core makes it a platform wheel, built here by gcc from the C sources
    (wheel,) = dist.glob("tidemq-*-cp311-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = [
            line
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "tidemq = tidemq.cli.main:main" in archive.read(entry_points).decode()
    modules = {
        "tidemq/" + str(path.relative_to(SOURCE))
        for path in SOURCE.rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert modules <= names, sorted(modules - names)
    assert "tidemq/py.typed" in names
    static = {
        "tidemq/web/" + str(path.relative_to(SOURCE / "web"))
        for path in (SOURCE / "web" / "static").rglob("*")
        if path.is_file()
    }
    assert "tidemq/web/static/index.html" in static
    assert "tidemq/web/static/vendor/preact/LICENSE" in static
    assert static <= names, sorted(static - names)  # the dashboard works from the wheel alone
    for compiled in COMPILED_MODULES:
        assert any(n.startswith(f"tidemq/record/{compiled}.") and n.endswith(".so") for n in names)
    assert any("pyspark" in line and 'extra == "spark"' in line for line in requires)
    assert any(line.startswith("Requires-Dist: grpcio") for line in requires)

    # installed on its own, it is what runs: not the checkout's sources
    target = tmp_path / "site"
    installed = subprocess.run(
        [*PIP, "install", "--no-deps", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = subprocess.run(
        [sys.executable, "-m", "tidemq.cli.main", "--help"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert "serve" in probe.stdout
    where = subprocess.run(
        [sys.executable, "-c", "import tidemq; print(tidemq.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    assert where.stdout.strip().startswith(str(target))
    implementation = subprocess.run(
        [sys.executable, "-c", "from tidemq.record import native; print(native.implementation())"],
        capture_output=True,
        text=True,
        env={**env, "TIDEMQ_NO_EXTENSIONS": ""},
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    assert implementation.stdout.strip() == "compiled"
    assert not where.stdout.strip().startswith(str(Path(tidemq.__file__).parent))
