"""The Python example of docs/trace.md runs as written against a real
`tidemq serve` (the name server address substituted), in a fresh interpreter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_examples import DEFAULT_NAMESRV, blocks, run_python

from tidemq.testing.processes import ServerProcess, serve

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("trace-docs") / "data") as process:
        yield process


def examples() -> list[str]:
    return blocks("trace.md", "python")


def test_the_page_has_its_example() -> None:
    assert len(examples()) == 1


@pytest.mark.parametrize("index", range(len(examples())))
def test_example_runs(index: int, server: ServerProcess, tmp_path: Path) -> None:
    code = examples()[index]
    assert DEFAULT_NAMESRV in code, "examples name the default name server"
    result = run_python(
        code,
        tmp_path / f"example_{index}.py",
        {"PATH": "/usr/bin:/bin"},
        replace={DEFAULT_NAMESRV: server.namesrv},
    )
    assert result.returncode == 0, f"example {index} failed:\n{code}\n{result.stderr}"
    assert "retry 0 -> FAILED" in result.stdout and "retry 1 -> SUCCESS" in result.stdout
