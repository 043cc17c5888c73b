"""Fixtures for the real-client interop tests: one `tidemq serve` per module, the
Node scenario scripts, and the check that `make test` installed the npm clients."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from ali_ons_harness import ALI_ONS_PACKAGE, ScriptRunner, TidemqServer

NODE = shutil.which("node")
MIN_NODE_MAJOR = 18  # util.parseArgs


@pytest.fixture(scope="session")
def node() -> str:
    """The node executable, with ali-ons installed under interop/node_modules."""
    if NODE is None:
        pytest.skip("`node` is not installed: the ali-ons interop tests need Node.js >= 18")
    if not ALI_ONS_PACKAGE.exists():
        pytest.fail(
            f"{ALI_ONS_PACKAGE.parent} is missing: run `make test` (it runs "
            "`npm ci --prefix interop` to install the pinned ali-ons client)",
            pytrace=False,
        )
    version = subprocess.run(
        [NODE, "--version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()
    major = int(version.lstrip("v").split(".")[0])
    if major < MIN_NODE_MAJOR:
        pytest.fail(f"node {version} is too old: the interop scripts need Node.js >= 18")
    return NODE


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidemqServer]:
    """A real `tidemq serve` on ephemeral ports; TIDEMQ_INTEROP_VERBOSE=1 logs more."""
    verbose = bool(os.environ.get("TIDEMQ_INTEROP_VERBOSE"))
    data_dir = tmp_path_factory.mktemp("interop") / "data"
    srv = TidemqServer(data_dir, verbose=verbose)
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def scripts(node: str, server: TidemqServer) -> Iterator[ScriptRunner]:
    runner = ScriptRunner(node, server)
    try:
        yield runner
    finally:
        runner.close()
    if not server.alive():
        pytest.fail(
            f"tidemq serve died during the test (exit {server.proc.returncode})\n"
            f"{server.describe()}",
            pytrace=False,
        )
