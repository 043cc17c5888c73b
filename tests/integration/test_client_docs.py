"""Every Python example in docs/client.md runs as written against a real
`tidemq serve` (the name server address substituted), each in a fresh
interpreter so the blocking API runs as it would in a user's script."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.testing.processes import ServerProcess, serve

pytestmark = pytest.mark.slow

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"
EXAMPLE = re.compile(r"```python\n(.*?)```", re.S)
DEFAULT_NAMESRV = "127.0.0.1:9876"
EXAMPLE_DEADLINE_S = 90


def examples() -> list[str]:
    return EXAMPLE.findall(DOC.read_text())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("docs") / "data") as process:
        yield process


def test_the_guide_has_examples() -> None:
    assert len(examples()) >= 5


@pytest.mark.parametrize("index", range(len(examples())))
def test_example_runs(index: int, server: ServerProcess, tmp_path: Path) -> None:
    code = examples()[index]
    assert DEFAULT_NAMESRV in code, "examples name the default name server"
    script = tmp_path / f"example_{index}.py"
    script.write_text(code.replace(DEFAULT_NAMESRV, server.namesrv))
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=EXAMPLE_DEADLINE_S,
        check=False,
        env={"TIDEMQ_OFFSET_STORE_DIR": str(tmp_path / "offsets"), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, f"example {index} failed:\n{code}\n{result.stderr}"
