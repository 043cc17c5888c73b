"""Every Python example in docs/client.md runs as written against a real
`tidemq serve` (the name server address substituted), each in a fresh
interpreter so the blocking API runs as it would in a user's script."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_examples import DEFAULT_NAMESRV, blocks, run_python

from tidemq.testing.processes import ServerProcess, serve

pytestmark = pytest.mark.slow


def examples() -> list[str]:
    return blocks("client.md", "python")


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
    result = run_python(
        code,
        tmp_path / f"example_{index}.py",
        {"TIDEMQ_OFFSET_STORE_DIR": str(tmp_path / "offsets"), "PATH": "/usr/bin:/bin"},
        replace={DEFAULT_NAMESRV: server.namesrv},
    )
    assert result.returncode == 0, f"example {index} failed:\n{code}\n{result.stderr}"
    # A consumer started right after its topic was created used to warn that the
    # broker knew no consumer of its group (the timer example showed it).
    assert "no consumer for this group" not in result.stderr, result.stderr
